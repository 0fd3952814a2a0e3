// cuDNN's fused attention, checked without a GPU: cudnn-frontend's validate() for compute
// capability 9.0 (H100, H200) on every graph geometry that tetra's runs in tools/gpu_check.sh and
// tools/bench/gpu.sh ask for: the models of the check (TINY, SMALL) and of the benchmark (the
// ~124M and ~350M shapes), at CP 1 (causal, top-left) and as CP ranks' chunks against their key
// prefixes (bottom-right), forward and backward. A geometry cuDNN would refuse fails here, in
// CI, instead of falling back on the GPU machine.
#ifdef TETRA_HAVE_CUDNN
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "model/cuda/attn_cudnn.hpp"
#include "parallel/cp.hpp"

using namespace tetra;

namespace {

struct Model {
  const char* name;
  int dim, heads, kv_heads, seq, micro_batch;
};

// A CP rank's attention call: its two chunks of the sequence against all keys in order.
AttnShape shape(const Model& m, int cp, int rank) {
  const int hd = m.dim / m.heads;
  if (cp == 1)
    return {m.micro_batch, m.seq, m.seq, m.heads, m.kv_heads, hd, AttnMask::Causal, 1, 0};
  return {m.micro_batch, m.seq / cp, m.seq, m.heads, m.kv_heads, hd, AttnMask::CpChunks, cp, rank};
}

}  // namespace

TEST_CASE("cudnn: every SDPA graph of the GPU check and the benchmark validates for sm_90") {
  const std::vector<Model> models = {{"gpu_check TINY", 64, 8, 4, 16, 1},
                                     {"gpu_check SMALL", 128, 8, 4, 64, 1},
                                     {"bench 124M", 768, 12, 12, 1024, 8},
                                     {"bench 350M", 1024, 16, 8, 1024, 8},
                                     {"bench 350M, micro-batch 4", 1024, 16, 8, 1024, 4}};
  int graphs = 0;
  for (const Model& m : models)
    for (int cp : {1, 2, 4}) {
      if (m.seq % (2 * cp) != 0) continue;
      for (int rank = 0; rank < cp; ++rank) {
        const AttnShape a = shape(m, cp, rank);
        for (const cuda::SdpaGeometry& g : cuda::sdpa_geometries(a))
          for (bool backward : {false, true}) {
            CAPTURE(m.name);
            CAPTURE(cp);
            CAPTURE(rank);
            CAPTURE(g.sq);
            CAPTURE(g.sk);
            CAPTURE(backward);
            CHECK(cuda::cudnn_sdpa_validate(g, backward, 90) == "");
            ++graphs;
          }
      }
    }
  MESSAGE(graphs, " graphs validated for sm_90");
  CHECK(graphs == 5 * 2 * (1 + 2 * 2 + 4 * 2));
}

TEST_CASE("cudnn: the chunk geometries attend each local query chunk to its key prefix") {
  // CP 2, rank 1 of a 16-token sequence: chunks 1 and 2 of 4 tokens, keys 0..15.
  const AttnShape a{3, 8, 16, 4, 2, 8, AttnMask::CpChunks, 2, 1};
  const std::vector<cuda::SdpaGeometry> g = cuda::sdpa_geometries(a);
  REQUIRE(g.size() == 2);
  CHECK(g[0].sq == 4);
  CHECK(g[0].sk == 8);   // global chunk 1 sees keys [0, 8)
  CHECK(g[1].sk == 12);  // global chunk 2 sees keys [0, 12)
  CHECK(g[0].bottom_right);
  CHECK(g[0].q_batch_stride == 8 * 4 * 8);   // the local sequence's rows
  CHECK(g[0].k_batch_stride == 16 * 2 * 8);  // the whole sequence of keys
  // The positions the hint stands for are what context parallelism gives the rank.
  std::vector<int32_t> keys(16);
  for (int j = 0; j < 16; ++j) keys[j] = j;
  CHECK_NOTHROW(check_attn_mask(a, cp_positions(16, 2, 1).data(), keys.data()));
  CHECK_THROWS_AS(check_attn_mask(a, cp_positions(16, 2, 0).data(), keys.data()), Error);
  // A geometry cuDNN cannot run (head_dim 12, not a multiple of 8) is refused by validate(),
  // so that the test above could fail.
  const cuda::SdpaGeometry bad{1, 8, 4, 64, 16, 12, 64 * 8 * 12, 16 * 4 * 12, false};
  CHECK(cuda::cudnn_sdpa_validate(bad, false, 90) != "");
}

#endif  // TETRA_HAVE_CUDNN
