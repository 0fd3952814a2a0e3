#include "backend/cuda/attention.hpp"

#include <cstdlib>
#include <cstring>

#include "backend/cuda/attn_fallback.hpp"
#include "backend/cuda/common.hpp"
#include "backend/cuda/reduce.cuh"
#ifdef TETRA_HAVE_CUDNN
#include "backend/cuda/attn_cudnn.hpp"
#endif

namespace tetra::cuda {

#ifndef TETRA_HAVE_CUDNN
// A build without the frontend: the member that would hold the graphs stays null.
class CudnnSdpa {};
#endif

namespace {

#ifdef TETRA_HAVE_CUDNN
// dst += src on rows [0, rows) of each sequence of both ([batch, seq_rows, w] bf16).
__global__ void add_prefix_kernel(uint16_t* dst, const uint16_t* src, int64_t batch, int64_t rows,
                                  int64_t seq_rows, int64_t w) {
  TETRA_FOR(idx, batch * rows * w) {
    const int64_t b = idx / (rows * w), e = idx % (rows * w);
    const int64_t d = b * seq_rows * w + e;
    store(dst, d, load(dst, d) + load(src, d));
  }
}
#endif

}  // namespace

Attention::Attention(cudaStream_t s, cublasHandle_t blas) : stream_(s), blas_(blas) {
  const char* env = std::getenv("TETRA_ATTENTION");
  forced_fallback_ = env && std::strcmp(env, "fallback") == 0;
#ifdef TETRA_HAVE_CUDNN
  // A cuDNN that cannot start (a library the driver refuses) leaves the fallback, said by path().
  if (!forced_fallback_) try {
      cudnn_ = std::make_unique<CudnnSdpa>(s);
    } catch (const Error& e) {
      unavailable_ = e.what();
    }
#endif
}

Attention::~Attention() = default;

std::string Attention::refusal(const AttnShape& a, bool backward) const {
#ifndef TETRA_HAVE_CUDNN
  return "this build has no cuDNN frontend";
#else
  if (forced_fallback_) return "TETRA_ATTENTION=fallback";
  if (!cudnn_) return "cuDNN did not start: " + unavailable_;
  if (a.mask == AttnMask::General) return "the mask is by positions only (no hint)";
  // cuDNN's SDPA would take documents as packed variable-length sequences (ragged offsets, one
  // per document), a graph per document count; tetra does not build those.
  if (a.documents) return "a document mask (per-document masks are not given to cuDNN)";
  if (a.head_dim % 8 != 0 || a.head_dim > 256)
    return "head_dim " + std::to_string(a.head_dim) + " (cuDNN: a multiple of 8, at most 256)";
  std::string why;
  for (const SdpaGeometry& g : sdpa_geometries(a))
    if (!cudnn_->prepare(g, backward, &why)) return "cuDNN refused: " + why;
  return "";
#endif
}

std::string Attention::path(const AttnShape& a, bool backward) const {
  const std::string why = refusal(a, backward);
#ifdef TETRA_HAVE_CUDNN
  if (why.empty()) return "cudnn sdpa (" + cudnn_version() + ")";
#endif
  return "cuda fallback (batched GEMMs): " + why;
}

std::string Attention::path(const AttnShape& a) const {
  const std::string forward = path(a, false), backward = path(a, true);
  if (forward == backward && forward.starts_with("cudnn sdpa"))
    return forward + ", forward and backward";
  return "forward " + forward + "; backward " + backward;
}

void Attention::forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
                        const AttnPositions& pos, const AttnShape& a) {
  if (!refusal(a, false).empty())
    return gemm_attention_forward(stream_, blas_, out, lse, q, k, v, pos, a);
#ifdef TETRA_HAVE_CUDNN
  const int64_t H = a.heads, hd = a.head_dim;
  check(q.dtype == DType::BF16 && k.dtype == DType::BF16 && v.dtype == DType::BF16 &&
            out.dtype == DType::BF16 && lse.dtype == DType::F32,
        "cuDNN attention: bf16 q, k, v, out and fp32 lse");
  check_attn_qkv("cuDNN attention", a, q, k, v);
  // q, k, v at their columns (AttnShape's layout), rows as the geometry's strides say.
  const AttnStrides st = attn_strides(a);
  const uint16_t *pq = bf16(q) + st.q_col, *pk = bf16(k) + st.k_col, *pv = bf16(v) + st.v_col;
  if (a.mask == AttnMask::Causal) {  // lse [B, H, S] is the packed layout itself
    const SdpaGeometry g = sdpa_geometries(a)[0];
    Scratch ws(stream_, size_t(cudnn_->workspace_bytes(g, false)));
    cudnn_->forward(g, pq, pk, pv, dev(out), f32(lse), ws.get());
    return;
  }
  const int64_t C = a.sq / 2;
  const std::vector<SdpaGeometry> chunks = sdpa_geometries(a);
  for (int c = 0; c < 2; ++c) {
    const SdpaGeometry& g = chunks[c];
    Scratch ws(stream_, size_t(cudnn_->workspace_bytes(g, false)));
    Scratch stats(stream_, size_t(a.batch * H * C) * sizeof(float));
    // The chunk's first query row in each sequence, of q and of out.
    const int64_t qoff = c * C * st.q, ooff = c * C * H * hd;
    cudnn_->forward(g, pq + qoff, pk, pv, bf16(out) + ooff, stats.as<float>(), ws.get());
    // Packed [B, H, C] into columns [c C, (c+1) C) of lse [B, H, 2C].
    TETRA_CUDA_CHECK(cudaMemcpy2DAsync(f32(lse) + c * C, size_t(a.sq) * 4, stats.get(),
                                       size_t(C) * 4, size_t(C) * 4, size_t(a.batch * H),
                                       cudaMemcpyDeviceToDevice, stream_));
  }
#endif
}

void Attention::backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q,
                         const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                         const AttnPositions& pos, const AttnShape& a) {
  if (!refusal(a, true).empty())
    return gemm_attention_backward(stream_, blas_, dq, dk, dv, dout, q, k, v, out, lse, pos, a);
#ifdef TETRA_HAVE_CUDNN
  const int64_t H = a.heads, KV = a.kv_heads, hd = a.head_dim, kw = KV * hd;
  check_attn_qkv("cuDNN attention backward", a, q, k, v);
  check_attn_qkv("cuDNN attention backward", a, dq, dk, dv);
  const AttnStrides st = attn_strides(a);
  const uint16_t *pq = bf16(q) + st.q_col, *pk = bf16(k) + st.k_col, *pv = bf16(v) + st.v_col;
  uint16_t* pdq = bf16(dq) + st.q_col;
  if (a.mask == AttnMask::Causal) {  // under AttnLayout::Qkv, dq, dk, dv are columns of dqkv
    const SdpaGeometry g = sdpa_geometries(a)[0];
    Scratch ws(stream_, size_t(cudnn_->workspace_bytes(g, true)));
    cudnn_->backward(g, pq, pk, pv, dev(out), dev(dout), f32(lse), pdq, bf16(dk) + st.k_col,
                     bf16(dv) + st.v_col, ws.get());
    return;
  }
  // CP chunks: k, v (dk, dv) are the gathered keys, packed.
  check(st.kv == kw, "cuDNN attention: CP chunks take packed keys");
  // Chunk 1 (the later one: the longer prefix) writes dK, dV rows [0, P1) of each sequence in
  // place; rows past it are seen by no local query and are zeroed; chunk 0 writes rows [0, P0)
  // of a scratch of the same layout, which are then added.
  const int64_t C = a.sq / 2, S = a.sk;
  const std::vector<SdpaGeometry> chunks = sdpa_geometries(a);
  const SdpaGeometry &g0 = chunks[0], &g1 = chunks[1];
  const int64_t P1 = g1.sk, P0 = g0.sk;
  if (P1 < S)
    for (const Tensor* t : {&dk, &dv})
      TETRA_CUDA_CHECK(cudaMemset2DAsync(bf16(*t) + P1 * kw, size_t(S * kw) * 2, 0,
                                         size_t((S - P1) * kw) * 2, size_t(a.batch), stream_));
  Scratch dk0(stream_, size_t(a.batch * S * kw) * 2), dv0(stream_, size_t(a.batch * S * kw) * 2);
  for (int c = 1; c >= 0; --c) {
    const SdpaGeometry& g = c == 1 ? g1 : g0;
    Scratch ws(stream_, size_t(cudnn_->workspace_bytes(g, true)));
    Scratch stats(stream_, size_t(a.batch * H * C) * sizeof(float));
    TETRA_CUDA_CHECK(cudaMemcpy2DAsync(stats.get(), size_t(C) * 4, f32(lse) + c * C,
                                       size_t(a.sq) * 4, size_t(C) * 4, size_t(a.batch * H),
                                       cudaMemcpyDeviceToDevice, stream_));
    const int64_t qoff = c * C * st.q, ooff = c * C * H * hd;
    if (c == 1) {
      cudnn_->backward(g, pq + qoff, pk, pv, bf16(out) + ooff, bf16(dout) + ooff, stats.as<float>(),
                       pdq + qoff, dev(dk), dev(dv), ws.get());
    } else {
      cudnn_->backward(g, pq + qoff, pk, pv, bf16(out) + ooff, bf16(dout) + ooff, stats.as<float>(),
                       pdq + qoff, dk0.get(), dv0.get(), ws.get());
    }
  }
  for (const auto& [t, part] : {std::pair{&dk, &dk0}, {&dv, &dv0}}) {
    add_prefix_kernel<<<grid_for(a.batch * P0 * kw, kThreads), kThreads, 0, stream_>>>(
        bf16(*t), part->as<uint16_t>(), a.batch, P0, S, kw);
    TETRA_LAUNCH_CHECK("add_prefix_kernel");
  }
#endif
}

}  // namespace tetra::cuda
