// cuDNN's fused attention, checked without a GPU: cudnn-frontend's validate() for compute
// capability 9.0 (H100, H200) on every graph geometry that tetra's runs in tools/gpu_check.sh and
// tools/bench/gpu.sh ask for: the models of the check (TINY, SMALL) and of the benchmark (the
// ~124M and ~350M shapes), at CP 1 (causal, top-left) and as CP ranks' chunks against their key
// prefixes (bottom-right), forward and backward, with q, k, v packed and as RoPE in place gives
// them (Fusion::RopeInPlace: at CP 1 q, k, v and dq, dk, dv strided in the fused qkv and dqkv;
// at CP > 1 q and dq strided, the gathered keys packed). A geometry cuDNN would refuse fails
// here, in CI, instead of falling back on the GPU machine.
#ifdef TETRA_HAVE_CUDNN
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "backend/cuda/attn_cudnn.hpp"
#include "parallel/cp.hpp"

using namespace tetra;

namespace {

struct Model {
  const char* name;
  int dim, heads, kv_heads, seq, micro_batch;
};

// A CP rank's attention call: its two chunks of the sequence against all keys in order; with
// RoPE in place q (at CP 1 also k, v) read from the fused qkv, as transformer/block.cpp asks.
AttnShape shape(const Model& m, int cp, int rank, bool in_place) {
  const int hd = m.dim / m.heads;
  const AttnLayout fused = cp == 1 ? AttnLayout::Qkv : AttnLayout::QInQkv;
  const AttnLayout layout = in_place ? fused : AttnLayout::Packed;
  if (cp == 1)
    return {m.micro_batch, m.seq, m.seq, m.heads, m.kv_heads, hd, AttnMask::Causal, 1, 0, layout};
  return {m.micro_batch,      m.seq / cp, m.seq, m.heads, m.kv_heads, hd,
          AttnMask::CpChunks, cp,         rank,  layout};
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
      for (int rank = 0; rank < cp; ++rank)
        for (bool in_place : {false, true}) {
          const AttnShape a = shape(m, cp, rank, in_place);
          for (const cuda::SdpaGeometry& g : cuda::sdpa_geometries(a))
            for (bool backward : {false, true}) {
              CAPTURE(m.name);
              CAPTURE(cp);
              CAPTURE(rank);
              CAPTURE(in_place);
              CAPTURE(g.sq);
              CAPTURE(g.sk);
              CAPTURE(backward);
              CHECK(cuda::cudnn_sdpa_validate(g, backward, 90) == "");
              ++graphs;
            }
        }
    }
  MESSAGE(graphs, " graphs validated for sm_90");
  CHECK(graphs == 2 * 5 * 2 * (1 + 2 * 2 + 4 * 2));
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
  CHECK((g[0].q_row == 4 * 8 && g[0].kv_row == 2 * 8 && g[0].o_batch_stride == 8 * 4 * 8));
  // RoPE in place: q's rows are the fused qkv's, (4 + 2 x 2) x 8 wide; o and the keys packed.
  AttnShape in_place = a;
  in_place.layout = AttnLayout::QInQkv;
  const cuda::SdpaGeometry f = cuda::sdpa_geometries(in_place)[1];
  CHECK((f.q_row == 64 && f.q_batch_stride == 8 * 64 && f.kv_row == 16 &&
         f.k_batch_stride == 16 * 16 && f.o_batch_stride == 8 * 32));
  CHECK(f.key() != g[1].key());  // a graph of its own in the cache
  // CP 1 with q, k, v all in qkv [S, 64]: every row stride 64.
  const AttnShape causal{3, 16, 16, 4, 2, 8, AttnMask::Causal, 1, 0, AttnLayout::Qkv};
  const cuda::SdpaGeometry c = cuda::sdpa_geometries(causal)[0];
  CHECK((c.q_row == 64 && c.kv_row == 64 && c.q_batch_stride == 16 * 64 &&
         c.k_batch_stride == 16 * 64 && c.o_batch_stride == 16 * 32));
  // The positions the hint stands for are what context parallelism gives the rank.
  std::vector<int32_t> keys(16);
  for (int j = 0; j < 16; ++j) keys[j] = j;
  CHECK_NOTHROW(check_attn_mask(a, cp_positions(16, 2, 1).data(), keys.data()));
  CHECK_THROWS_AS(check_attn_mask(a, cp_positions(16, 2, 0).data(), keys.data()), Error);
  // A geometry cuDNN cannot run (head_dim 12, not a multiple of 8) is refused by validate(),
  // so that the test above could fail.
  const cuda::SdpaGeometry bad{1,           8,           4,     64,     16,     12,
                               64 * 8 * 12, 16 * 4 * 12, false, 8 * 12, 4 * 12, 64 * 8 * 12};
  CHECK(cuda::cudnn_sdpa_validate(bad, false, 90) != "");
}

#endif  // TETRA_HAVE_CUDNN
