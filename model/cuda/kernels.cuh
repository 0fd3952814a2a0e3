// Device kernels of the CUDA backend, fp32: the correctness baseline that later work makes fast
// (bf16 GEMMs, fused and tiled kernels). Each kernel does what the same op of
// model/cpu/cpu_backend.cpp does; the comments give the math and the shapes (row-major, T =
// tokens). Every reduction has a fixed order (per-thread loops in index order, then a fixed
// tree across the block; no atomics), so two runs give the same bits.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "model/cuda/reduce.cuh"
#include "util/bf16.hpp"

namespace tetra::cuda {

constexpr int kAttnThreads = 128;                      // attention: a tile of keys or queries
constexpr int kMaxHeadDim = 512;                       // attention head_dim limit
constexpr int kAttnCols = kMaxHeadDim / kAttnThreads;  // output columns per attention thread

// ---- Elementwise ----

__global__ void fill_kernel(float* x, int64_t n, float value) {
  TETRA_FOR(i, n) x[i] = value;
}
// bf16 <-> f32 by util/bf16.hpp, the host's functions (round to nearest even, NaN kept quiet),
// so the two backends round to the same bits.
__global__ void f32_to_bf16_kernel(uint16_t* dst, const float* src, int64_t n) {
  TETRA_FOR(i, n) dst[i] = float_to_bf16(src[i]);
}
__global__ void bf16_to_f32_kernel(float* dst, const uint16_t* src, int64_t n) {
  TETRA_FOR(i, n) dst[i] = bf16_to_float(src[i]);
}
__global__ void add_kernel(float* y, const float* x, int64_t n) {
  TETRA_FOR(i, n) y[i] += x[i];
}
__global__ void add3_kernel(float* out, const float* a, const float* b, int64_t n) {
  TETRA_FOR(i, n) out[i] = a[i] + b[i];
}
__global__ void scale_kernel(float* x, int64_t n, float alpha) {
  TETRA_FOR(i, n) x[i] *= alpha;
}

// src seen as [a, b, block] -> dst [b, a, block]; E is a word of the block (4, 2 or 1 bytes).
template <typename E>
__global__ void transpose_blocks_kernel(E* dst, const E* src, int64_t a, int64_t b, int64_t block) {
  TETRA_FOR(idx, a * b * block) {
    const int64_t e = idx % block, r = idx / block;  // src block r = i * b + j
    const int64_t i = r / b, j = r % b;
    dst[(j * a + i) * block + e] = src[idx];
  }
}

// h = silu(g) * u, silu(g) = g * sigmoid(g).
__global__ void swiglu_forward_kernel(float* h, const float* gate, const float* up, int64_t n) {
  TETRA_FOR(i, n) h[i] = gate[i] / (1.f + expf(-gate[i])) * up[i];
}
// du = dh * silu(g); dg = dh * u * silu'(g), silu'(g) = sig(g) * (1 + g * (1 - sig(g))).
__global__ void swiglu_backward_kernel(float* dgate, float* dup, const float* dh, const float* gate,
                                       const float* up, int64_t n) {
  TETRA_FOR(i, n) {
    const float d = dh[i], g = gate[i], u = up[i];
    const float sig = 1.f / (1.f + expf(-g));
    dup[i] = d * g * sig;
    dgate[i] = d * u * sig * (1.f + g * (1.f - sig));
  }
}

// ---- Embedding: table [V, d] holds vocabulary rows [vocab_start, vocab_start + V) ----

// out [T, d]: out[t] = table[tok[t] - vocab_start] for tokens in the shard, 0 otherwise.
__global__ void embedding_forward_kernel(float* out, const int32_t* tok, const float* table,
                                         int64_t T, int64_t d, int64_t V, int64_t vocab_start) {
  TETRA_FOR(idx, T * d) {
    const int64_t t = idx / d, c = idx % d, r = tok[t] - vocab_start;
    out[idx] = (r >= 0 && r < V) ? table[r * d + c] : 0.f;
  }
}
// dtable[tok[t] - vocab_start, c] += dout[t, c]: one thread per column c, tokens in order, so
// no two threads touch one element and repeated tokens add in a fixed order.
__global__ void embedding_backward_kernel(float* dtable, const int32_t* tok, const float* dout,
                                          int64_t T, int64_t d, int64_t V, int64_t vocab_start) {
  TETRA_FOR(c, d) {
    for (int64_t t = 0; t < T; ++t) {
      const int64_t r = tok[t] - vocab_start;
      if (r >= 0 && r < V) dtable[r * d + c] += dout[t * d + c];
    }
  }
}

// ---- RMSNorm over rows of x [T, d], weight w [d], rstd [T] ----

// One block per row t: rstd[t] = 1 / sqrt(mean_i x[t,i]^2 + eps), y[t,i] = x[t,i] rstd[t] w[i].
__global__ void rmsnorm_forward_kernel(float* y, float* rstd, const float* x, const float* w,
                                       int64_t d, float eps) {
  const int64_t t = blockIdx.x;
  const float* xr = x + t * d;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_reduce(ss, Sum{}, 0.f);
  const float r = 1.f / sqrtf(ss / float(d) + eps);
  if (threadIdx.x == 0) rstd[t] = r;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) y[t * d + i] = xr[i] * r * w[i];
}
// One block per row, with xhat = x r: dx = r (dy w - xhat mean_i(dy w xhat)) (overwritten).
__global__ void rmsnorm_backward_dx_kernel(float* dx, const float* dy, const float* x,
                                           const float* w, const float* rstd, int64_t d) {
  const int64_t t = blockIdx.x;
  const float *xr = x + t * d, *gr = dy + t * d;
  const float r = rstd[t];
  float dot = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) dot += gr[i] * w[i] * xr[i] * r;
  dot = block_reduce(dot, Sum{}, 0.f);
  const float mean = dot / float(d);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
    dx[t * d + i] = r * (gr[i] * w[i] - xr[i] * r * mean);
}
// dw[c] += sum_t dy[t,c] x[t,c] rstd[t]: one thread per column, rows in order.
__global__ void rmsnorm_backward_dw_kernel(float* dw, const float* dy, const float* x,
                                           const float* rstd, int64_t T, int64_t d) {
  TETRA_FOR(c, d) {
    float acc = dw[c];
    for (int64_t t = 0; t < T; ++t) acc += dy[t * d + c] * x[t * d + c] * rstd[t];
    dw[c] = acc;
  }
}

// ---- RoPE, rotate-half, in place on x [T, heads * hd] at positions pos [T] ----

// One thread per (t, i < hd/2): angle = pos[t] theta^(-2i/hd) in double (as on the CPU),
// c = cos, s = sign sin in float; in every head (x1, x2) = (x[i], x[i + hd/2]) ->
// (x1 c - x2 s, x2 c + x1 s). sign = -1 is the transposed rotation (the backward).
__global__ void rope_kernel(float* x, const int32_t* pos, int64_t T, int heads, int64_t hd,
                            double theta, float sign) {
  const int64_t half = hd / 2;
  TETRA_FOR(idx, T * half) {
    const int64_t t = idx / half, i = idx % half;
    const double angle = double(pos[t]) * pow(theta, -2.0 * double(i) / double(hd));
    const float c = float(cos(angle)), s = sign * float(sin(angle));
    for (int h = 0; h < heads; ++h) {
      float* xh = x + (t * heads + h) * hd;
      const float x1 = xh[i], x2 = xh[i + half];
      xh[i] = x1 * c - x2 * s;
      xh[i + half] = x2 * c + x1 * s;
    }
  }
}

// ---- Attention ----
// q, out, dq, dout: [B*Sq, H*hd]; k, v, dk, dv: [B*Sk, KV*hd]; lse, D: [B, H, Sq]. Query head h
// reads KV head g = h / (H/KV). Key j is visible from query i when k_pos[j] <= q_pos[i];
// s_ij = scale q_i . k_j, scale = 1/sqrt(hd). Scores are recomputed where needed rather than
// stored, so any Sk fits; the products over keys (or queries) go in tiles of kAttnThreads:
// each thread computes one weight into shared memory, then each thread accumulates its own
// output columns c = tid + r * kAttnThreads over the tile in index order.
struct AttnDims {
  int64_t Sq, Sk;
  int H, KV, hd;
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
                                         const float* v, const int32_t* q_pos, const int32_t* k_pos,
                                         AttnDims a) {
  extern __shared__ float smem[];
  float* qs = smem;         // [hd] the query row
  float* ps = smem + a.hd;  // [kAttnThreads] probabilities of a tile of keys
  const int64_t i = blockIdx.x, b = blockIdx.z;
  const int h = blockIdx.y, g = h / (a.H / a.KV), tid = threadIdx.x;
  const int64_t qs_stride = int64_t(a.H) * a.hd, ks_stride = int64_t(a.KV) * a.hd;
  const int64_t qoff = (b * a.Sq + i) * qs_stride + int64_t(h) * a.hd;
  const float* kb = k + b * a.Sk * ks_stride + int64_t(g) * a.hd;  // key j at kb + j*ks_stride
  const float* vb = v + b * a.Sk * ks_stride + int64_t(g) * a.hd;
  for (int c = tid; c < a.hd; c += kAttnThreads) qs[c] = q[qoff + c];
  __syncthreads();
  const int32_t qp = q_pos[i];

  float m = -INFINITY;
  for (int64_t j = tid; j < a.Sk; j += kAttnThreads)
    if (k_pos[j] <= qp) m = fmaxf(m, a.scale * dot(qs, kb + j * ks_stride, a.hd));
  m = block_reduce(m, Max{}, -INFINITY);
  float l = 0;
  for (int64_t j = tid; j < a.Sk; j += kAttnThreads)
    if (k_pos[j] <= qp) l += expf(a.scale * dot(qs, kb + j * ks_stride, a.hd) - m);
  l = block_reduce(l, Sum{}, 0.f);
  if (tid == 0) lse[(b * a.H + h) * a.Sq + i] = m + logf(l);

  float acc[kAttnCols] = {};
  for (int64_t j0 = 0; j0 < a.Sk; j0 += kAttnThreads) {
    const int64_t j = j0 + tid;
    ps[tid] = (j < a.Sk && k_pos[j] <= qp)
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
    if (c < a.hd) out[qoff + c] = acc[r];
  }
}

// dQ, one block per (i, h, b): D_i = dO_i . O_i (kept in D for the dK/dV kernel); for visible
// keys p_ij = exp(s_ij - lse_i), ds_ij = p_ij (dO_i . v_j - D_i); dq_i = scale sum_j ds_ij k_j.
__global__ void attention_backward_dq_kernel(float* dq, float* D, const float* dout, const float* q,
                                             const float* k, const float* v, const float* out,
                                             const float* lse, const int32_t* q_pos,
                                             const int32_t* k_pos, AttnDims a) {
  extern __shared__ float smem[];
  float* qs = smem;              // [hd] q_i
  float* dos = smem + a.hd;      // [hd] dO_i
  float* dss = smem + 2 * a.hd;  // [kAttnThreads] ds of a tile of keys
  const int64_t i = blockIdx.x, b = blockIdx.z;
  const int h = blockIdx.y, g = h / (a.H / a.KV), tid = threadIdx.x;
  const int64_t qs_stride = int64_t(a.H) * a.hd, ks_stride = int64_t(a.KV) * a.hd;
  const int64_t qoff = (b * a.Sq + i) * qs_stride + int64_t(h) * a.hd;
  const float* kb = k + b * a.Sk * ks_stride + int64_t(g) * a.hd;
  const float* vb = v + b * a.Sk * ks_stride + int64_t(g) * a.hd;
  float di = 0;
  for (int c = tid; c < a.hd; c += kAttnThreads) {
    qs[c] = q[qoff + c];
    dos[c] = dout[qoff + c];
    di += dout[qoff + c] * out[qoff + c];
  }
  di = block_reduce(di, Sum{}, 0.f);  // also orders the shared loads above before their use
  const int64_t row = (b * a.H + h) * a.Sq + i;
  if (tid == 0) D[row] = di;
  const float L = lse[row];
  const int32_t qp = q_pos[i];

  float acc[kAttnCols] = {};
  for (int64_t j0 = 0; j0 < a.Sk; j0 += kAttnThreads) {
    const int64_t j = j0 + tid;
    float ds = 0.f;
    if (j < a.Sk && k_pos[j] <= qp) {
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
                                               const float* lse, const float* D,
                                               const int32_t* q_pos, const int32_t* k_pos,
                                               AttnDims a) {
  extern __shared__ float smem[];
  float* ks = smem;                             // [hd] k_j
  float* vs = smem + a.hd;                      // [hd] v_j
  float* ps = smem + 2 * a.hd;                  // [kAttnThreads] p of a tile of queries
  float* dss = smem + 2 * a.hd + kAttnThreads;  // [kAttnThreads] ds of the tile
  const int64_t j = blockIdx.x, b = blockIdx.z;
  const int g = blockIdx.y, group = a.H / a.KV, tid = threadIdx.x;
  const int64_t qs_stride = int64_t(a.H) * a.hd, ks_stride = int64_t(a.KV) * a.hd;
  const int64_t koff = (b * a.Sk + j) * ks_stride + int64_t(g) * a.hd;
  for (int c = tid; c < a.hd; c += kAttnThreads) {
    ks[c] = k[koff + c];
    vs[c] = v[koff + c];
  }
  __syncthreads();
  const int32_t kp = k_pos[j];

  float dk_acc[kAttnCols] = {}, dv_acc[kAttnCols] = {};
  for (int h = g * group; h < (g + 1) * group; ++h) {
    const float* qb = q + b * a.Sq * qs_stride + int64_t(h) * a.hd;  // row i at qb + i*qs_stride
    const float* dob = dout + b * a.Sq * qs_stride + int64_t(h) * a.hd;
    const float* Lh = lse + (b * a.H + h) * a.Sq;
    const float* Dh = D + (b * a.H + h) * a.Sq;
    for (int64_t i0 = 0; i0 < a.Sq; i0 += kAttnThreads) {
      const int64_t i = i0 + tid;
      float p = 0.f, ds = 0.f;
      if (i < a.Sq && kp <= q_pos[i]) {
        p = expf(a.scale * dot(qb + i * qs_stride, ks, a.hd) - Lh[i]);
        ds = p * (dot(dob + i * qs_stride, vs, a.hd) - Dh[i]);
      }
      ps[tid] = p;
      dss[tid] = ds;
      __syncthreads();
      const int64_t n = a.Sq - i0 < kAttnThreads ? a.Sq - i0 : kAttnThreads;
      for (int64_t ii = 0; ii < n; ++ii) {
        const float* qi = qb + (i0 + ii) * qs_stride;
        const float* doi = dob + (i0 + ii) * qs_stride;
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

// ---- Vocab-parallel cross-entropy on logits [T, V] of the shard [vocab_start, +V) ----

// Only the first `valid` columns are tokens; the rest pad the vocabulary (see backend.hpp).
// One block per row t: row_max[t] = max_v logits[t, v] over the valid columns.
__global__ void ce_row_max_kernel(float* row_max, const float* logits, int64_t V, int64_t valid) {
  const float* l = logits + int64_t(blockIdx.x) * V;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) m = fmaxf(m, l[j]);
  m = block_reduce(m, Max{}, -INFINITY);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}
// One block per row t: stats[t] = (sum_v exp(l[t,v] - row_max[t]),
// l[t, target - vocab_start] if the target is in the shard else 0).
__global__ void ce_stats_kernel(float* stats, const float* logits, const float* row_max,
                                const int32_t* targets, int64_t V, int64_t vocab_start,
                                int64_t valid) {
  const int64_t t = blockIdx.x;
  const float* l = logits + t * V;
  const float m = row_max[t];
  float sum = 0;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) sum += expf(l[j] - m);
  sum = block_reduce(sum, Sum{}, 0.f);
  if (threadIdx.x == 0) {
    const int64_t r = targets[t] - vocab_start;
    stats[2 * t] = sum;
    stats[2 * t + 1] = (r >= 0 && r < valid) ? l[r] : 0.f;
  }
}
// In place over [T, V]: l = scale exp(l - row_max) / sum - scale [v == target - vocab_start]
// in the valid columns, 0 in the padding.
__global__ void ce_backward_kernel(float* logits, const float* row_max, const float* stats,
                                   const int32_t* targets, int64_t T, int64_t V,
                                   int64_t vocab_start, int64_t valid, float scale) {
  TETRA_FOR(idx, T * V) {
    const int64_t t = idx / V, j = idx % V;
    float g = 0.f;
    if (j < valid) {
      g = scale * expf(logits[idx] - row_max[t]) * (1.f / stats[2 * t]);
      if (j == targets[t] - vocab_start) g -= scale;
    }
    logits[idx] = g;
  }
}

// ---- AdamW (torch.optim.AdamW), coefficients computed on the host as on the CPU ----

struct AdamCoeffs {
  float beta1, beta2, eps, grad_scale, step_size, bc2_sqrt, decay;
};
// g' = g grad_scale; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
// p = p (1 - lr wd) - lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
__global__ void adamw_kernel(float* p, const float* grad, float* m, float* v, int64_t n,
                             AdamCoeffs c) {
  TETRA_FOR(i, n) {
    const float gi = grad[i] * c.grad_scale;
    const float mi = c.beta1 * m[i] + (1.f - c.beta1) * gi;
    const float vi = c.beta2 * v[i] + (1.f - c.beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) / c.bc2_sqrt + c.eps;
    p[i] = p[i] * c.decay - c.step_size * mi / denom;
  }
}

}  // namespace tetra::cuda
