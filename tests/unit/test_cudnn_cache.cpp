// cuDNN's SDPA graphs are built once per process and device: every CUDA backend shares them
// (and one cuDNN handle), so a second backend asking for the same geometry builds nothing, and
// both still compute the same attention on their own streams. Without a GPU it says so.
#if defined(TETRA_HAVE_CUDA) && defined(TETRA_HAVE_CUDNN)
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../support/cuda_compare.hpp"
#include "backend/cuda/attn_cudnn.hpp"

using namespace tetra;
using namespace tetra::test;

TEST_CASE("cudnn: a second backend reuses the process's graphs and computes the same") {
  SKIP_WITHOUT_GPU();
  const AttnShape s{2, 64, 64, 4, 2, 16, AttnMask::Causal, 1, 0};
  auto a = make_cuda_backend(0);
  const std::string path = a->attention_path(s, DType::BF16);  // builds forward and backward
  CAPTURE(path);
  REQUIRE(path.starts_with("cudnn sdpa"));  // this build has cuDNN: the GPU must take it
  const int64_t built = cuda::cudnn_graphs_built();
  CHECK(built >= 2);
  auto b = make_cuda_backend(0);
  CHECK(b->attention_path(s, DType::BF16) == path);
  CHECK(cuda::cudnn_graphs_built() == built);

  // The same inputs through both backends: one graph, two streams, the same bits.
  const int64_t T = s.batch * s.sq, q_cols = s.heads * s.head_dim,
                kv_cols = s.kv_heads * s.head_dim;
  std::vector<uint16_t> q(T * q_cols), kv(T * kv_cols);
  for (size_t i = 0; i < q.size(); ++i) q[i] = uint16_t(0x3c00 + (i * 37) % 512);  // ~[0.008, 0.03]
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = uint16_t(0x3c00 + (i * 53) % 512);
  std::vector<int32_t> pos(size_t(s.sq));  // [Sq] = [Sk]: 0, 1, ...
  for (size_t t = 0; t < pos.size(); ++t) pos[t] = int32_t(t);
  std::vector<std::vector<uint16_t>> outs;
  for (Backend* be : {a.get(), b.get()}) {
    Buffer bq(*be, T * q_cols, DType::BF16), bk(*be, T * kv_cols, DType::BF16),
        bv(*be, T * kv_cols, DType::BF16), out(*be, T * q_cols, DType::BF16),
        lse(*be, s.batch * s.heads * s.sq), bpos(*be, s.sq, DType::I32);
    be->upload(bq.flat(), q.data());
    be->upload(bk.flat(), kv.data());
    be->upload(bv.flat(), kv.data());
    be->upload(bpos.flat(), pos.data());
    be->attention_forward(out.view({T, q_cols}), lse.flat(), bq.view({T, q_cols}),
                          bk.view({T, kv_cols}), bv.view({T, kv_cols}), {bpos.flat(), bpos.flat()},
                          s);
    outs.emplace_back(size_t(T * q_cols));
    be->download(outs.back().data(), out.flat());
  }
  CHECK(outs[0] == outs[1]);
  CHECK(cuda::cudnn_graphs_built() == built);
}

#endif
