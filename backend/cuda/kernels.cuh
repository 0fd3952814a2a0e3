// Device kernels of the CUDA backend, fp32: the correctness baseline that later work makes fast
// (bf16 GEMMs, fused and tiled kernels). Each kernel does what the same op of
// backend/cpu/cpu_backend.cpp does; the comments give the math and the shapes (row-major, T =
// tokens). Every reduction has a fixed order (per-thread loops in index order, then a fixed
// tree across the block; no atomics), so two runs give the same bits.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/reduce.cuh"
#include "util/bf16.hpp"

namespace tetra::cuda {

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

}  // namespace tetra::cuda
