#include "backend/cuda/attn_fallback.hpp"

#include <cmath>
#include <optional>

#include "backend/cuda/common.hpp"
#include "backend/cuda/reduce.cuh"

namespace tetra::cuda {
namespace {

// ---- Attention by GEMMs (attn_fallback.cu), fp32, one sequence b at a time ----
// S holds [H, Sq, Sk] scores of sequence b already scaled (s_ij = scale q_i . k_j); key j is
// visible from query i when mask.visible(b, i, j) (backend/attn_mask.hpp). One block per row
// (h, i).

// Forward: P = softmax over the visible keys in place of S; lse[h, i] = m + log l.
__global__ void masked_softmax_kernel(float* S, float* lse, AttnMaskView mask, int64_t b) {
  const int64_t Sq = mask.sq, Sk = mask.sk, row = blockIdx.x, i = row % Sq;
  float* s = S + row * Sk;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < Sk; j += blockDim.x)
    if (mask.visible(b, i, j)) m = fmaxf(m, s[j]);
  m = block_reduce(m, Max{}, -INFINITY);
  float l = 0;
  for (int64_t j = threadIdx.x; j < Sk; j += blockDim.x)
    if (mask.visible(b, i, j)) l += expf(s[j] - m);
  l = block_reduce(l, Sum{}, 0.f);
  for (int64_t j = threadIdx.x; j < Sk; j += blockDim.x)
    s[j] = mask.visible(b, i, j) ? expf(s[j] - m) / l : 0.f;
  if (threadIdx.x == 0) lse[row] = m + logf(l);
}
// Backward: P = exp(S - lse) over the visible keys, in place.
__global__ void probs_from_lse_kernel(float* S, const float* lse, AttnMaskView mask, int64_t b) {
  const int64_t Sq = mask.sq, Sk = mask.sk, row = blockIdx.x, i = row % Sq;
  float* s = S + row * Sk;
  const float L = lse[row];
  for (int64_t j = threadIdx.x; j < Sk; j += blockDim.x)
    s[j] = mask.visible(b, i, j) ? expf(s[j] - L) : 0.f;
}
// dS = P (dP - D_i) in place of dP, D_i = dO_i . O_i (rows of dout, out at stride ld, head h
// at column h hd).
__global__ void softmax_grad_kernel(float* dP, const float* P, const float* dout, const float* out,
                                    int64_t Sq, int64_t Sk, int64_t ld, int hd) {
  const int64_t row = blockIdx.x, h = row / Sq, i = row % Sq;
  const float* a = dout + i * ld + h * hd;
  const float* o = out + i * ld + h * hd;
  float D = 0;
  for (int c = threadIdx.x; c < hd; c += blockDim.x) D += a[c] * o[c];
  D = block_reduce(D, Sum{}, 0.f);
  for (int64_t j = threadIdx.x; j < Sk; j += blockDim.x)
    dP[row * Sk + j] = P[row * Sk + j] * (dP[row * Sk + j] - D);
}

void check_blas(cublasStatus_t st, const char* call) {
  if (st != CUBLAS_STATUS_SUCCESS) fail("cuBLAS error in ", call, ": ", cublasGetStatusString(st));
}

// Row-major C [m, n] = alpha op(A) op(B) + beta C for `batch` matrices `stride*` elements apart,
// rows ld* apart (cuBLAS sees the transposes: C^T = op(B)^T op(A)^T).
void gemm(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float* A, int64_t lda, int64_t sa, const float* B, int64_t ldb, int64_t sb,
          float beta, float* C, int64_t ldc, int64_t sc, int64_t batch) {
  check_blas(
      cublasSgemmStridedBatched(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                int(n), int(m), int(k), &alpha, B, int(ldb), sb, A, int(lda), sa,
                                &beta, C, int(ldc), sc, int(batch)),
      "cublasSgemmStridedBatched");
}

// dst [rows, w] (rows dst_ld apart) = src [rows, w] (rows src_ld apart), converted.
template <typename TD, typename TS>
__global__ void convert_rows_kernel(TD* dst, int64_t dst_ld, const TS* src, int64_t src_ld,
                                    int64_t rows, int64_t w) {
  TETRA_FOR(i, rows * w) store(dst, (i / w) * dst_ld + i % w, load(src, (i / w) * src_ld + i % w));
}

// Columns [col, col + w) of a tensor's rows as fp32 device memory, rows ld() apart: the
// tensor itself (fp32), or a packed widened scratch copy (bf16; read: copy its values).
class AsF32 {
 public:
  AsF32(cudaStream_t s, const Tensor& t, int64_t col, int64_t w, bool read = true)
      : s_(s), t_(t), col_(col), w_(w) {
    if (t.dtype == DType::F32) {
      p_ = f32(t) + col, ld_ = t.cols();
      return;
    }
    scratch_.emplace(s, size_t(t.rows() * w) * sizeof(float));
    p_ = scratch_->as<float>(), ld_ = w;
    if (read && t.rows() * w > 0) {
      convert_rows_kernel<float, uint16_t><<<grid_for(t.rows() * w, kThreads), kThreads, 0, s>>>(
          p_, w, bf16(t) + col, t.cols(), t.rows(), w);
      TETRA_LAUNCH_CHECK("convert_rows_kernel");
    }
  }
  // A packed tensor: all its columns.
  AsF32(cudaStream_t s, const Tensor& t, bool read = true) : AsF32(s, t, 0, t.cols(), read) {}
  float* get() const { return p_; }
  int64_t ld() const { return ld_; }
  // Rounds the fp32 result into the tensor's columns (bf16); nothing for an fp32 tensor.
  void store() const {
    if (!scratch_ || t_.rows() * w_ == 0) return;
    convert_rows_kernel<uint16_t, float><<<grid_for(t_.rows() * w_, kThreads), kThreads, 0, s_>>>(
        bf16(t_) + col_, t_.cols(), p_, w_, t_.rows(), w_);
    TETRA_LAUNCH_CHECK("convert_rows_kernel");
  }

 private:
  cudaStream_t s_;
  Tensor t_;
  int64_t col_, w_, ld_ = 0;
  float* p_ = nullptr;
  std::optional<Scratch> scratch_;
};

// q, k, v (or dq, dk, dv) as fp32 at the columns AttnShape's layout gives.
struct QkvF32 {
  AsF32 q, k, v;
  QkvF32(cudaStream_t s, const AttnShape& a, const Tensor& tq, const Tensor& tk, const Tensor& tv,
         bool read)
      : QkvF32(s, a, attn_strides(a), tq, tk, tv, read) {}

 private:
  QkvF32(cudaStream_t s, const AttnShape& a, const AttnStrides& st, const Tensor& tq,
         const Tensor& tk, const Tensor& tv, bool read)
      : q(s, tq, st.q_col, int64_t(a.heads) * a.head_dim, read),
        k(s, tk, st.k_col, int64_t(a.kv_heads) * a.head_dim, read),
        v(s, tv, st.v_col, int64_t(a.kv_heads) * a.head_dim, read) {}
};

void check_shapes(const AttnShape& a, const Tensor& q, const Tensor& k, const Tensor& v,
                  const AttnPositions& pos) {
  check(a.heads > 0 && a.kv_heads > 0 && a.heads % a.kv_heads == 0 && a.head_dim > 0,
        "attention shapes: heads ", a.heads, "/", a.kv_heads, ", head_dim ", a.head_dim);
  check_attn_positions(a, pos);
  check_attn_qkv("attention", a, q, k, v);
}

}  // namespace

void gemm_attention_forward(cudaStream_t s, cublasHandle_t blas, Tensor out, Tensor lse,
                            const Tensor& q, const Tensor& k, const Tensor& v,
                            const AttnPositions& pos, const AttnShape& a) {
  check_shapes(a, q, k, v, pos);
  const AttnMaskView mask = attn_mask_view(a, pos);
  check(out.numel() == a.batch * a.sq * a.heads * a.head_dim &&
            lse.numel() == a.batch * a.heads * a.sq && lse.dtype == DType::F32,
        "attention_forward outputs ", out.shape_str(), ", ", lse.shape_str());
  if (a.batch * a.sq == 0) return;
  const int64_t H = a.heads, KV = a.kv_heads, hd = a.head_dim, G = H / KV, Sq = a.sq, Sk = a.sk;
  const int64_t qw = H * hd;
  const float scale = 1.f / std::sqrt(float(hd));
  const QkvF32 in(s, a, q, k, v, true);
  const AsF32 O(s, out, false);
  const int64_t qs = in.q.ld(), ks = in.k.ld(), vs = in.v.ld();
  Scratch S(s, size_t(H * Sq * std::max<int64_t>(Sk, 1)) * sizeof(float));
  float* P = S.as<float>();
  for (int64_t b = 0; b < a.batch; ++b) {
    const float *qb = in.q.get() + b * Sq * qs, *kb = in.k.get() + b * Sk * ks,
                *vb = in.v.get() + b * Sk * vs;
    for (int64_t g = 0; g < KV; ++g)  // S_h [Sq, Sk] = scale Q_h K_g^T for the group's heads h
      gemm(blas, false, true, Sq, Sk, hd, scale, qb + g * G * hd, qs, hd, kb + g * hd, ks, 0, 0.f,
           P + g * G * Sq * Sk, Sk, Sq * Sk, G);
    masked_softmax_kernel<<<unsigned(H * Sq), kThreads, 0, s>>>(P, f32(lse) + b * H * Sq, mask, b);
    TETRA_LAUNCH_CHECK("masked_softmax_kernel");
    for (int64_t g = 0; g < KV; ++g)  // O_h [Sq, hd] = P_h V_g
      gemm(blas, false, false, Sq, hd, Sk, 1.f, P + g * G * Sq * Sk, Sk, Sq * Sk, vb + g * hd, vs,
           0, 0.f, O.get() + b * Sq * qw + g * G * hd, qw, hd, G);
  }
  O.store();
}

void gemm_attention_backward(cudaStream_t s, cublasHandle_t blas, Tensor dq, Tensor dk, Tensor dv,
                             const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& out, const Tensor& lse, const AttnPositions& pos,
                             const AttnShape& a) {
  check_shapes(a, q, k, v, pos);
  const AttnMaskView mask = attn_mask_view(a, pos);
  check_attn_qkv("attention_backward", a, dq, dk, dv);
  const int64_t qn = a.batch * a.sq * a.heads * a.head_dim;
  check(dout.numel() == qn && out.numel() == qn && lse.numel() == a.batch * a.heads * a.sq,
        "attention_backward shapes");
  if (a.batch == 0) return;
  const int64_t H = a.heads, KV = a.kv_heads, hd = a.head_dim, G = H / KV, Sq = a.sq, Sk = a.sk;
  const int64_t qw = H * hd;
  const float scale = 1.f / std::sqrt(float(hd));
  const QkvF32 in(s, a, q, k, v, true), d(s, a, dq, dk, dv, false);
  const AsF32 O(s, out), dO(s, dout);
  const AsF32 &Q = in.q, &K = in.k, &V = in.v, &dQ = d.q, &dK = d.k, &dV = d.v;
  // Row strides: the tensors' own for fp32, packed where widened (so q and dq may differ).
  const int64_t qs = Q.ld(), ks = K.ld(), vs = V.ld(), dqs = dQ.ld(), dks = dK.ld(), dvs = dV.ld();
  const size_t scores = size_t(H * std::max<int64_t>(Sq, 1) * std::max<int64_t>(Sk, 1));
  Scratch Ps(s, scores * sizeof(float)), dPs(s, scores * sizeof(float));
  float *P = Ps.as<float>(), *dP = dPs.as<float>();
  for (int64_t b = 0; b < a.batch; ++b) {
    const int64_t oo = b * Sq * qw;
    const float *qb = Q.get() + b * Sq * qs, *kb = K.get() + b * Sk * ks,
                *vb = V.get() + b * Sk * vs;
    const float *ob = O.get() + oo, *dob = dO.get() + oo;
    float *dqb = dQ.get() + b * Sq * dqs, *dkb = dK.get() + b * Sk * dks,
          *dvb = dV.get() + b * Sk * dvs;
    for (int64_t g = 0; g < KV; ++g) {
      const int64_t h0 = g * G;
      // P_h = exp(scale Q_h K_g^T - lse_h); dP_h = dO_h V_g^T.
      gemm(blas, false, true, Sq, Sk, hd, scale, qb + h0 * hd, qs, hd, kb + g * hd, ks, 0, 0.f,
           P + h0 * Sq * Sk, Sk, Sq * Sk, G);
      gemm(blas, false, true, Sq, Sk, hd, 1.f, dob + h0 * hd, qw, hd, vb + g * hd, vs, 0, 0.f,
           dP + h0 * Sq * Sk, Sk, Sq * Sk, G);
    }
    if (Sq > 0) {
      probs_from_lse_kernel<<<unsigned(H * Sq), kThreads, 0, s>>>(P, f32(lse) + b * H * Sq, mask,
                                                                  b);
      TETRA_LAUNCH_CHECK("probs_from_lse_kernel");
      // dS = P (dP - rowsum(dO O)), in place of dP.
      softmax_grad_kernel<<<unsigned(H * Sq), kThreads, 0, s>>>(dP, P, dob, ob, Sq, Sk, qw,
                                                                int(hd));
      TETRA_LAUNCH_CHECK("softmax_grad_kernel");
    }
    for (int64_t g = 0; g < KV; ++g) {
      const int64_t h0 = g * G;
      // dQ_h [Sq, hd] = scale dS_h K_g.
      gemm(blas, false, false, Sq, hd, Sk, scale, dP + h0 * Sq * Sk, Sk, Sq * Sk, kb + g * hd, ks,
           0, 0.f, dqb + h0 * hd, dqs, hd, G);
      // dV_g [Sk, hd] = sum_h P_h^T dO_h, dK_g = scale sum_h dS_h^T Q_h: heads in order.
      for (int64_t j = 0; j < G; ++j) {
        const int64_t h = h0 + j;
        const float beta = j == 0 ? 0.f : 1.f;
        gemm(blas, true, false, Sk, hd, Sq, 1.f, P + h * Sq * Sk, Sk, 0, dob + h * hd, qw, 0, beta,
             dvb + g * hd, dvs, 0, 1);
        gemm(blas, true, false, Sk, hd, Sq, scale, dP + h * Sq * Sk, Sk, 0, qb + h * hd, qs, 0,
             beta, dkb + g * hd, dks, 0, 1);
      }
    }
  }
  dQ.store();
  dK.store();
  dV.store();
}

}  // namespace tetra::cuda
