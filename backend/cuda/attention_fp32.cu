// Attention in fp32 (--dtype fp32): the plain kernels of the correctness baseline, recomputing
// scores where needed rather than storing them, so any Sk fits.
#include "backend/cuda/attention_fp32.hpp"

#include <climits>
#include <cmath>

#include "backend/cuda/common.hpp"
#include "backend/cuda/reduce.cuh"

namespace tetra::cuda {
namespace {

constexpr int kAttnThreads = 128;                      // attention: a tile of keys or queries
constexpr int kMaxHeadDim = 512;                       // attention head_dim limit
constexpr int kAttnCols = kMaxHeadDim / kAttnThreads;  // output columns per attention thread

// ---- Attention ----
// q, dq: rows q_stride apart; out, dout: [B*Sq, H*hd]; k, v, dk, dv: rows kv_stride apart
// (AttnShape's layout; the pointers at their column offsets); lse, D: [B, H, Sq]. Query head h
// reads KV head g = h / (H/KV). Key j is visible from query i of sequence b when
// mask.visible(b, i, j) (backend/attn_mask.hpp: by positions, and documents under --doc-mask);
// s_ij = scale q_i . k_j, scale = 1/sqrt(hd). Scores are recomputed where needed rather than
// stored, so any Sk fits; the products over keys (or queries) go in tiles of kAttnThreads:
// each thread computes one weight into shared memory, then each thread accumulates its own
// output columns c = tid + r * kAttnThreads over the tile in index order.
struct AttnDims {
  int64_t Sq, Sk;
  int H, KV, hd;
  int64_t q_stride, kv_stride;
  float scale;
};

// a . b over n elements, in index order.
__device__ inline float dot(const float* a, const float* b, int n) {
  float s = 0;
  for (int c = 0; c < n; ++c) s += a[c] * b[c];
  return s;
}

// One block per (query row i, head h, batch b) = blockIdx (x, y, z):
//   m = max_j s_ij, l = sum_j exp(s_ij - m), lse_i = m + log l,
//   out_i = sum_j exp(s_ij - m) / l * v_j (masked keys contribute nothing).
__global__ void attention_forward_kernel(float* out, float* lse, const float* q, const float* k,
                                         const float* v, AttnMaskView mask, AttnDims a) {
  extern __shared__ float smem[];
  float* qs = smem;         // [hd] the query row
  float* ps = smem + a.hd;  // [kAttnThreads] probabilities of a tile of keys
  const int64_t i = blockIdx.x, b = blockIdx.z;
  const int h = blockIdx.y, g = h / (a.H / a.KV), tid = threadIdx.x;
  const int64_t ks_stride = a.kv_stride;
  const int64_t qoff = (b * a.Sq + i) * a.q_stride + int64_t(h) * a.hd;
  const int64_t ooff = (b * a.Sq + i) * a.H * a.hd + int64_t(h) * a.hd;
  const float* kb = k + b * a.Sk * ks_stride + int64_t(g) * a.hd;  // key j at kb + j*ks_stride
  const float* vb = v + b * a.Sk * ks_stride + int64_t(g) * a.hd;
  for (int c = tid; c < a.hd; c += kAttnThreads) qs[c] = q[qoff + c];
  __syncthreads();

  float m = -INFINITY;
  for (int64_t j = tid; j < a.Sk; j += kAttnThreads)
    if (mask.visible(b, i, j)) m = fmaxf(m, a.scale * dot(qs, kb + j * ks_stride, a.hd));
  m = block_reduce(m, Max{}, -INFINITY);
  float l = 0;
  for (int64_t j = tid; j < a.Sk; j += kAttnThreads)
    if (mask.visible(b, i, j)) l += expf(a.scale * dot(qs, kb + j * ks_stride, a.hd) - m);
  l = block_reduce(l, Sum{}, 0.f);
  if (tid == 0) lse[(b * a.H + h) * a.Sq + i] = m + logf(l);

  float acc[kAttnCols] = {};
  for (int64_t j0 = 0; j0 < a.Sk; j0 += kAttnThreads) {
    const int64_t j = j0 + tid;
    ps[tid] = (j < a.Sk && mask.visible(b, i, j))
                  ? expf(a.scale * dot(qs, kb + j * ks_stride, a.hd) - m) / l
                  : 0.f;
    __syncthreads();
    const int64_t n = a.Sk - j0 < kAttnThreads ? a.Sk - j0 : kAttnThreads;
    for (int64_t jj = 0; jj < n; ++jj) {
      const float p = ps[jj];
      const float* vj = vb + (j0 + jj) * ks_stride;
#pragma unroll
      for (int r = 0; r < kAttnCols; ++r) {
        const int c = tid + r * kAttnThreads;
        if (c < a.hd) acc[r] += p * vj[c];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < kAttnCols; ++r) {
    const int c = tid + r * kAttnThreads;
    if (c < a.hd) out[ooff + c] = acc[r];
  }
}

// dQ, one block per (i, h, b): D_i = dO_i . O_i (kept in D for the dK/dV kernel); for visible
// keys p_ij = exp(s_ij - lse_i), ds_ij = p_ij (dO_i . v_j - D_i); dq_i = scale sum_j ds_ij k_j.
__global__ void attention_backward_dq_kernel(float* dq, float* D, const float* dout, const float* q,
                                             const float* k, const float* v, const float* out,
                                             const float* lse, AttnMaskView mask, AttnDims a) {
  extern __shared__ float smem[];
  float* qs = smem;              // [hd] q_i
  float* dos = smem + a.hd;      // [hd] dO_i
  float* dss = smem + 2 * a.hd;  // [kAttnThreads] ds of a tile of keys
  const int64_t i = blockIdx.x, b = blockIdx.z;
  const int h = blockIdx.y, g = h / (a.H / a.KV), tid = threadIdx.x;
  const int64_t ks_stride = a.kv_stride;
  const int64_t qoff = (b * a.Sq + i) * a.q_stride + int64_t(h) * a.hd;
  const int64_t ooff = (b * a.Sq + i) * a.H * a.hd + int64_t(h) * a.hd;
  const float* kb = k + b * a.Sk * ks_stride + int64_t(g) * a.hd;
  const float* vb = v + b * a.Sk * ks_stride + int64_t(g) * a.hd;
  float di = 0;
  for (int c = tid; c < a.hd; c += kAttnThreads) {
    qs[c] = q[qoff + c];
    dos[c] = dout[ooff + c];
    di += dout[ooff + c] * out[ooff + c];
  }
  di = block_reduce(di, Sum{}, 0.f);  // also orders the shared loads above before their use
  const int64_t row = (b * a.H + h) * a.Sq + i;
  if (tid == 0) D[row] = di;
  const float L = lse[row];

  float acc[kAttnCols] = {};
  for (int64_t j0 = 0; j0 < a.Sk; j0 += kAttnThreads) {
    const int64_t j = j0 + tid;
    float ds = 0.f;
    if (j < a.Sk && mask.visible(b, i, j)) {
      const float p = expf(a.scale * dot(qs, kb + j * ks_stride, a.hd) - L);
      ds = p * (dot(dos, vb + j * ks_stride, a.hd) - di);
    }
    dss[tid] = ds;
    __syncthreads();
    const int64_t n = a.Sk - j0 < kAttnThreads ? a.Sk - j0 : kAttnThreads;
    for (int64_t jj = 0; jj < n; ++jj) {
      const float* kj = kb + (j0 + jj) * ks_stride;
#pragma unroll
      for (int r = 0; r < kAttnCols; ++r) {
        const int c = tid + r * kAttnThreads;
        if (c < a.hd) acc[r] += dss[jj] * kj[c];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < kAttnCols; ++r) {
    const int c = tid + r * kAttnThreads;
    if (c < a.hd) dq[qoff + c] = a.scale * acc[r];
  }
}

// dK, dV, one block per (key row j, KV head g, batch b) = blockIdx (x, y, z), summing over the
// query heads h of the group and the query rows i in order (deterministic, no atomics):
//   p_ij = exp(s_ij - lse_i), ds_ij = p_ij (dO_i . v_j - D_i),
//   dv_j = sum_h sum_i p_ij dO_i,  dk_j = scale sum_h sum_i ds_ij q_i   (both overwritten).
__global__ void attention_backward_dkdv_kernel(float* dk, float* dv, const float* dout,
                                               const float* q, const float* k, const float* v,
                                               const float* lse, const float* D, AttnMaskView mask,
                                               AttnDims a) {
  extern __shared__ float smem[];
  float* ks = smem;                             // [hd] k_j
  float* vs = smem + a.hd;                      // [hd] v_j
  float* ps = smem + 2 * a.hd;                  // [kAttnThreads] p of a tile of queries
  float* dss = smem + 2 * a.hd + kAttnThreads;  // [kAttnThreads] ds of the tile
  const int64_t j = blockIdx.x, b = blockIdx.z;
  const int g = blockIdx.y, group = a.H / a.KV, tid = threadIdx.x;
  const int64_t qs_stride = a.q_stride, os_stride = int64_t(a.H) * a.hd;
  const int64_t koff = (b * a.Sk + j) * a.kv_stride + int64_t(g) * a.hd;
  for (int c = tid; c < a.hd; c += kAttnThreads) {
    ks[c] = k[koff + c];
    vs[c] = v[koff + c];
  }
  __syncthreads();

  float dk_acc[kAttnCols] = {}, dv_acc[kAttnCols] = {};
  for (int h = g * group; h < (g + 1) * group; ++h) {
    const float* qb = q + b * a.Sq * qs_stride + int64_t(h) * a.hd;  // row i at qb + i*qs_stride
    const float* dob = dout + b * a.Sq * os_stride + int64_t(h) * a.hd;
    const float* Lh = lse + (b * a.H + h) * a.Sq;
    const float* Dh = D + (b * a.H + h) * a.Sq;
    for (int64_t i0 = 0; i0 < a.Sq; i0 += kAttnThreads) {
      const int64_t i = i0 + tid;
      float p = 0.f, ds = 0.f;
      if (i < a.Sq && mask.visible(b, i, j)) {
        p = expf(a.scale * dot(qb + i * qs_stride, ks, a.hd) - Lh[i]);
        ds = p * (dot(dob + i * os_stride, vs, a.hd) - Dh[i]);
      }
      ps[tid] = p;
      dss[tid] = ds;
      __syncthreads();
      const int64_t n = a.Sq - i0 < kAttnThreads ? a.Sq - i0 : kAttnThreads;
      for (int64_t ii = 0; ii < n; ++ii) {
        const float* qi = qb + (i0 + ii) * qs_stride;
        const float* doi = dob + (i0 + ii) * os_stride;
#pragma unroll
        for (int r = 0; r < kAttnCols; ++r) {
          const int c = tid + r * kAttnThreads;
          if (c < a.hd) {
            dv_acc[r] += ps[ii] * doi[c];
            dk_acc[r] += dss[ii] * qi[c];
          }
        }
      }
      __syncthreads();
    }
  }
#pragma unroll
  for (int r = 0; r < kAttnCols; ++r) {
    const int c = tid + r * kAttnThreads;
    if (c < a.hd) {
      dk[koff + c] = a.scale * dk_acc[r];
      dv[koff + c] = dv_acc[r];
    }
  }
}

AttnDims attn_dims(const AttnShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                   const AttnPositions& pos) {
  check(s.heads > 0 && s.kv_heads > 0 && s.heads % s.kv_heads == 0 && s.head_dim > 0 &&
            s.head_dim <= kMaxHeadDim,
        "attention: heads ", s.heads, ", kv_heads ", s.kv_heads, ", head_dim ", s.head_dim,
        " (the CUDA kernels take head_dim <= ", kMaxHeadDim, ")");
  check_attn_qkv("attention", s, q, k, v);
  check_attn_positions(s, pos);
  check(s.batch <= 65535 && s.heads <= 65535, "attention grid: batch ", s.batch, ", heads ",
        s.heads);
  const AttnStrides st = attn_strides(s);
  return AttnDims{.Sq = s.sq,
                  .Sk = s.sk,
                  .H = s.heads,
                  .KV = s.kv_heads,
                  .hd = s.head_dim,
                  .q_stride = st.q,
                  .kv_stride = st.kv,
                  .scale = 1.f / std::sqrt(float(s.head_dim))};
}
// One block per (row, head, batch).
dim3 attn_grid(int64_t rows, int heads, int64_t batch) {
  check(rows <= INT_MAX, "attention: ", rows, " rows");
  return dim3(unsigned(rows), unsigned(heads), unsigned(batch));
}

}  // namespace

void fp32_attention_forward(cudaStream_t stream, Tensor out, Tensor lse, const Tensor& q,
                            const Tensor& k, const Tensor& v, const AttnPositions& pos,
                            const AttnShape& s) {
  const AttnDims a = attn_dims(s, q, k, v, pos);
  check(out.numel() == s.batch * s.sq * s.heads * s.head_dim &&
            lse.numel() == s.batch * s.heads * s.sq,
        "attention_forward outputs ", out.shape_str(), ", ", lse.shape_str());
  if (s.batch * s.sq == 0) return;
  const AttnStrides st = attn_strides(s);
  const size_t smem = (a.hd + kAttnThreads) * sizeof(float);
  attention_forward_kernel<<<attn_grid(s.sq, s.heads, s.batch), kAttnThreads, smem, stream>>>(
      f32(out), f32(lse), f32(q) + st.q_col, f32(k) + st.k_col, f32(v) + st.v_col,
      attn_mask_view(s, pos), a);
  TETRA_LAUNCH_CHECK("attention_forward_kernel");
}

void fp32_attention_backward(cudaStream_t stream, Tensor dq, Tensor dk, Tensor dv,
                             const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& out, const Tensor& lse, const AttnPositions& pos,
                             const AttnShape& s) {
  const AttnDims a = attn_dims(s, q, k, v, pos);
  const AttnMaskView mask = attn_mask_view(s, pos);
  check_attn_qkv("attention_backward", s, dq, dk, dv);
  const int64_t qn = s.batch * s.sq * s.heads * s.head_dim;
  check(dout.numel() == qn && out.numel() == qn && lse.numel() == s.batch * s.heads * s.sq,
        "attention_backward shapes");
  if (s.batch == 0) return;
  const AttnStrides st = attn_strides(s);
  const float *pq = f32(q) + st.q_col, *pk = f32(k) + st.k_col, *pv = f32(v) + st.v_col;
  // D [B, H, Sq] = rowsum(dO * O), written by the dQ kernel and read by the dK/dV kernel.
  Scratch D(stream, size_t(s.batch * s.heads * s.sq) * sizeof(float));
  float* pD = D.as<float>();
  if (s.sq > 0) {
    const size_t smem = (2 * a.hd + kAttnThreads) * sizeof(float);
    attention_backward_dq_kernel<<<attn_grid(s.sq, s.heads, s.batch), kAttnThreads, smem, stream>>>(
        f32(dq) + st.q_col, pD, f32(dout), pq, pk, pv, f32(out), f32(lse), mask, a);
    TETRA_LAUNCH_CHECK("attention_backward_dq_kernel");
  }
  if (s.sk > 0) {
    const size_t smem = (2 * a.hd + 2 * kAttnThreads) * sizeof(float);
    attention_backward_dkdv_kernel<<<attn_grid(s.sk, s.kv_heads, s.batch), kAttnThreads, smem,
                                     stream>>>(f32(dk) + st.k_col, f32(dv) + st.v_col, f32(dout),
                                               pq, pk, pv, f32(lse), pD, mask, a);
    TETRA_LAUNCH_CHECK("attention_backward_dkdv_kernel");
  }
}

}  // namespace tetra::cuda
