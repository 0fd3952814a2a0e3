// The fusions' switches (backend/fusions.hpp): each name turns its fusion off, "all" every one,
// and an unknown name is one clear error naming the known ones.
#include <doctest/doctest.h>

#include "backend/fusions.hpp"
#include "util/error.hpp"

using namespace tetra;

TEST_CASE("TETRA_UNFUSED's names turn their fusions off, all of them with all") {
  set_unfused("");
  for (int i = 0; i < kFusionCount; ++i) CHECK(fused(Fusion(i)));
  CHECK(fusions_line() == "fusions: all on");
  set_unfused("norm_residual,classifier");
  CHECK(fused(Fusion::RopeInPlace));
  CHECK_FALSE(fused(Fusion::NormResidual));
  CHECK_FALSE(fused(Fusion::Classifier));
  CHECK(fusions_line() == "fusions: on except norm_residual, classifier (TETRA_UNFUSED)");
  set_unfused("all");
  for (int i = 0; i < kFusionCount; ++i) CHECK_FALSE(fused(Fusion(i)));
  for (int i = 0; i < kFusionCount; ++i) {
    set_unfused(fusion_name(Fusion(i)));
    for (int j = 0; j < kFusionCount; ++j) CHECK(fused(Fusion(j)) == (i != j));
  }
  CHECK_THROWS_WITH_AS(set_unfused("rope"), doctest::Contains("unknown fusion 'rope'"), Error);
  set_unfused("");
}
