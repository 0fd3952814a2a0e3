#include "backend/fusions.hpp"

#include <array>
#include <cstdlib>
#include <sstream>

#include "util/error.hpp"

namespace tetra {

namespace {

constexpr std::array<const char*, kFusionCount> kNames = {
    "rope_in_place", "norm_residual", "classifier",      "vector_io",
    "wgrad_beta0",   "grad_alias",    "embedding_spread"};

std::array<bool, kFusionCount> parse(const std::string& list) {
  std::array<bool, kFusionCount> on;
  on.fill(true);
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name.empty()) continue;
    if (name == "all") {
      on.fill(false);
      continue;
    }
    int i = 0;
    while (i < kFusionCount && name != kNames[i]) ++i;
    if (i == kFusionCount) {
      std::string known;
      for (const char* n : kNames) known += std::string(known.empty() ? "" : ", ") + n;
      fail("TETRA_UNFUSED: unknown fusion '", name, "' (known: ", known, ", all)");
    }
    on[i] = false;
  }
  return on;
}

// The switches, read from TETRA_UNFUSED on first use (a function-local static: once, even if
// threads ask at the same time); set_unfused overwrites them.
std::array<bool, kFusionCount>& switches() {
  static std::array<bool, kFusionCount> on = [] {
    const char* env = std::getenv("TETRA_UNFUSED");
    return parse(env ? env : "");
  }();
  return on;
}

}  // namespace

const char* fusion_name(Fusion f) {
  return kNames[int(f)];
}

bool fused(Fusion f) {
  return switches()[int(f)];
}

std::string fusions_line() {
  std::string off;
  for (int i = 0; i < kFusionCount; ++i)
    if (!fused(Fusion(i))) off += std::string(off.empty() ? "" : ", ") + kNames[i];
  return off.empty() ? "fusions: all on" : "fusions: on except " + off + " (TETRA_UNFUSED)";
}

void set_unfused(const std::string& list) {
  switches() = parse(list);
}

}  // namespace tetra
