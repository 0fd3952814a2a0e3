// Device kernels of the CUDA backend's native bf16 path (and of the ops that came with it, in
// fp32 as well): storage T is float or bf16 (uint16_t, rounded to nearest even by
// util/bf16.hpp), math is fp32 through backend/op_math.hpp, the formulas the CPU backend runs.
// Every reduction has a fixed order (per-thread loops in index order, fixed butterflies, then
// per-block partials summed in block order): no float atomics, so two runs agree bit for bit.
// Shapes as in backend/backend.hpp; T = tokens.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/reduce.cuh"
#include "backend/op_math.hpp"
#include "backend/rope.hpp"

namespace tetra::cuda {

constexpr int kRowsPerWarpBlock = 8;        // warp-per-row kernels: 8 warps, 256 threads
constexpr int64_t kNormPartialRows = 64;    // RMSNorm dw: rows per partial
constexpr int kRopeTablePositions = 32768;  // positions below this read the cos/sin table
constexpr int kMaxMultiTensors = 64;        // tensors per multi-tensor launch

// ---- Elementwise, any storage ----

template <typename T>
__global__ void fill_t_kernel(T* x, int64_t n, float value) {
  TETRA_FOR(i, n) store(x, i, value);
}
template <typename TY, typename TX>
__global__ void add_t_kernel(TY* y, const TX* x, int64_t n) {
  TETRA_FOR(i, n) store(y, i, load(y, i) + load(x, i));
}
template <typename TO, typename TA, typename TB>
__global__ void add3_t_kernel(TO* out, const TA* a, const TB* b, int64_t n) {
  TETRA_FOR(i, n) store(out, i, load(a, i) + load(b, i));
}
template <typename T>
__global__ void scale_t_kernel(T* x, int64_t n, float alpha) {
  TETRA_FOR(i, n) store(x, i, load(x, i) * alpha);
}

// Context parallelism's key order (Backend::cp_zigzag), E a word of the block: ranked
// [cp, batch, 2, block] <-> global [batch, 2 cp, block]; global chunk c of a sequence is half
// (c >= cp) of rank (c < cp ? c : 2 cp - 1 - c).
template <typename E>
__global__ void cp_zigzag_kernel(E* dst, const E* src, int cp, int64_t batch, int64_t block,
                                 bool to_global) {
  TETRA_FOR(idx, 2 * cp * batch * block) {
    const int64_t e = idx % block, gb = idx / block;  // global block gb = b * 2 cp + c
    const int64_t b = gb / (2 * cp), c = gb % (2 * cp);
    const int64_t r = c < cp ? c : 2 * cp - 1 - c, h = c < cp ? 0 : 1;
    const int64_t ranked = ((r * batch + b) * 2 + h) * block + e;
    if (to_global)
      dst[idx] = src[ranked];
    else
      dst[ranked] = src[idx];
  }
}

// ---- Sums of squares of many tensors (the gradient norm) ----
// Tensor i is split into chunks of kSumChunk elements, chunks numbered over all tensors
// (first[i] is tensor i's first); one block per chunk writes partial[chunk] in double, then one
// block per tensor sums its chunks in order. The same chunks and trees as sum_squares of one
// tensor (kernels.cuh), so each result has the same bits as alone.
template <typename T>
struct MultiTensor {
  const T* ptr[kMaxMultiTensors];
  int64_t n[kMaxMultiTensors];
  int64_t first[kMaxMultiTensors + 1];
  int count;
};
template <typename T>
__global__ void multi_sum_squares_partial_kernel(double* partial, const MultiTensor<T> m) {
  const int64_t chunk = blockIdx.x;
  int i = 0;
  while (chunk >= m.first[i + 1]) ++i;  // the tensor of this chunk (few tensors: linear)
  const int64_t begin = (chunk - m.first[i]) * kSumChunk;
  const int64_t end = m.n[i] < begin + kSumChunk ? m.n[i] : begin + kSumChunk;
  double s = 0;
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
    const double x = load(m.ptr[i], j);
    s += x * x;
  }
  s = block_reduce(s, Sum{}, 0.0);
  if (threadIdx.x == 0) partial[chunk] = s;
}
// One block per tensor i: out[i] = sum of its partials in order (0 for an empty tensor).
template <typename T>
__global__ void multi_sum_partials_kernel(double* out, const double* partial,
                                          const MultiTensor<T> m) {
  const int i = blockIdx.x;
  double s = 0;
  for (int64_t c = m.first[i] + threadIdx.x; c < m.first[i + 1]; c += blockDim.x) s += partial[c];
  s = block_reduce(s, Sum{}, 0.0);
  if (threadIdx.x == 0) out[i] = s;
}

// ---- Embedding ----

template <typename T>
__global__ void embedding_forward_t_kernel(T* out, const int32_t* tok, const T* table, int64_t T_,
                                           int64_t d, int64_t V, int64_t vocab_start) {
  TETRA_FOR(idx, T_ * d) {
    const int64_t t = idx / d, c = idx % d, r = tok[t] - vocab_start;
    store(out, idx, (r >= 0 && r < V) ? load(table, r * d + c) : 0.f);
  }
}
// Key of token t for the sort: its row in the shard, or V when it is not in the shard.
static __global__ void embedding_keys_kernel(int32_t* key, int32_t* index, const int32_t* tok,
                                             int64_t T_, int64_t V, int64_t vocab_start) {
  TETRA_FOR(t, T_) {
    const int64_t r = tok[t] - vocab_start;
    key[t] = (r >= 0 && r < V) ? int32_t(r) : int32_t(V);
    index[t] = int32_t(t);
  }
}
// After a stable sort of (row, t) by row: block i starts a run of equal rows when i is the first
// of its row; its threads take the columns and add the run's gradients in token order:
// dtable[row, c] += dout[t_1, c] + ... (left to right), as the CPU's loop over t does.
template <typename T>
__global__ void embedding_backward_runs_kernel(float* dtable, const int32_t* key,
                                               const int32_t* index, const T* dout, int64_t T_,
                                               int64_t d, int64_t V) {
  const int64_t i = blockIdx.x;
  const int32_t row = key[i];
  if (row == V || (i > 0 && key[i - 1] == row)) return;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float acc = dtable[int64_t(row) * d + c];
    for (int64_t j = i; j < T_ && key[j] == row; ++j) acc += load(dout, int64_t(index[j]) * d + c);
    dtable[int64_t(row) * d + c] = acc;
  }
}
// The same sums spread (Fusion::EmbeddingSpread): block (i, g) takes column group g, one
// column a thread, of the run starting at i, and reads the run's rows kEmbeddingRows at a time
// (their keys, indices and gradients loaded before any is added), so a long run of one token
// is a few dependent steps instead of one per row and column. Each column still adds its
// gradients in token order, so the sums have the plain kernel's bits.
constexpr int kEmbeddingRows = 8;
template <typename T>
__global__ void embedding_backward_spread_kernel(float* dtable, const int32_t* key,
                                                 const int32_t* index, const T* dout, int64_t T_,
                                                 int64_t d, int64_t V) {
  const int64_t i = blockIdx.x, c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  const int32_t row = key[i];
  if (c >= d || row == V || (i > 0 && key[i - 1] == row)) return;
  float acc = dtable[int64_t(row) * d + c];
  for (int64_t j0 = i;; j0 += kEmbeddingRows) {
    bool in_run[kEmbeddingRows];
    float g[kEmbeddingRows];
#pragma unroll
    for (int u = 0; u < kEmbeddingRows; ++u) {
      const int64_t j = j0 + u;
      in_run[u] = j < T_ && key[j] == row;
      g[u] = in_run[u] ? load(dout, int64_t(index[j]) * d + c) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kEmbeddingRows; ++u)
      if (in_run[u]) acc += g[u];
    if (!in_run[kEmbeddingRows - 1]) break;
  }
  dtable[int64_t(row) * d + c] = acc;
}

// ---- RMSNorm: a warp per row of x [T, d] ----

template <typename T>
__global__ void rmsnorm_forward_t_kernel(T* y, float* rstd, const T* x, const T* w, int64_t T_,
                                         int64_t d, float eps) {
  const int64_t t = int64_t(blockIdx.x) * kRowsPerWarpBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (t >= T_) return;
  float ss = 0;
  for (int64_t i = lane; i < d; i += 32) {
    const float v = load(x, t * d + i);
    ss += v * v;
  }
  const float r = op::rmsnorm_rstd(warp_sum(ss), float(d), eps);
  if (lane == 0) rstd[t] = r;
  for (int64_t i = lane; i < d; i += 32)
    store(y, t * d + i, op::rmsnorm_y(load(x, t * d + i), r, load(w, i)));
}
// dx [T, d] (overwritten) = r (dy w - xhat mean(dy w xhat)), a warp per row; plus res [T, d]
// when not null (the norm_residual fusion: the sum rounded once).
template <typename T>
__global__ void rmsnorm_backward_dx_t_kernel(T* dx, const T* dy, const T* x, const T* w,
                                             const float* rstd, int64_t T_, int64_t d,
                                             const T* res) {
  const int64_t t = int64_t(blockIdx.x) * kRowsPerWarpBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (t >= T_) return;
  const float r = rstd[t];
  float dot = 0;
  for (int64_t i = lane; i < d; i += 32)
    dot += load(dy, t * d + i) * load(w, i) * load(x, t * d + i) * r;
  const float mean = warp_sum(dot) / float(d);
  for (int64_t i = lane; i < d; i += 32) {
    const float g = op::rmsnorm_dx(load(dy, t * d + i), load(w, i), load(x, t * d + i), r, mean);
    store(dx, t * d + i, res ? op::residual_add(g, load(res, t * d + i)) : g);
  }
}
// dw partials: block (column tile, row block p); partial[p, c] = sum over rows t of block p, in
// order, of dy[t, c] x[t, c] rstd[t].
template <typename T>
__global__ void rmsnorm_dw_partial_kernel(float* partial, const T* dy, const T* x,
                                          const float* rstd, int64_t T_, int64_t d) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, p = blockIdx.y;
  if (c >= d) return;
  const int64_t t1 = (p + 1) * kNormPartialRows < T_ ? (p + 1) * kNormPartialRows : T_;
  float acc = 0;
  for (int64_t t = p * kNormPartialRows; t < t1; ++t)
    acc += load(dy, t * d + c) * load(x, t * d + c) * rstd[t];
  partial[p * d + c] = acc;
}
// dw[c] += partial[0, c] + partial[1, c] + ... in block order.
static __global__ void rmsnorm_dw_sum_kernel(float* dw, const float* partial, int64_t parts,
                                             int64_t d) {
  TETRA_FOR(c, d) {
    float acc = dw[c];
    for (int64_t p = 0; p < parts; ++p) acc += partial[p * d + c];
    dw[c] = acc;
  }
}

// ---- RoPE from a table: table[p, i] = (cos, sin) of p rope.inv_freq(i, hd) (backend/rope.hpp),
// built in double ----

static __global__ void rope_table_kernel(float2* table, int64_t positions, int64_t hd, Rope rope) {
  const int64_t half = hd / 2;
  TETRA_FOR(idx, positions * half) {
    const int64_t p = idx / half, i = idx % half;
    const double angle = double(p) * rope.inv_freq(i, hd);
    table[idx] = make_float2(float(cos(angle)), float(sin(angle)));
  }
}
__device__ inline float2 rope_cs(const float2* table, int32_t p, int64_t i, int64_t hd,
                                 const Rope& rope) {
  if (p >= 0 && p < kRopeTablePositions) return table[int64_t(p) * (hd / 2) + i];
  const double angle = double(p) * rope.inv_freq(i, hd);
  return make_float2(float(cos(angle)), float(sin(angle)));
}
// In place on the first `heads` heads (hd wide) of rows `stride` apart: one thread per
// (t, i < hd/2), all heads. sign -1: the inverse rotation.
template <typename T>
__global__ void rope_t_kernel(T* x, int64_t stride, const int32_t* pos, const float2* table,
                              int64_t T_, int heads, int64_t hd, Rope rope, float sign) {
  const int64_t half = hd / 2;
  TETRA_FOR(idx, T_ * half) {
    const int64_t t = idx / half, i = idx % half;
    const float2 cs = rope_cs(table, pos[t], i, hd, rope);
    for (int h = 0; h < heads; ++h) {
      const int64_t o = t * stride + int64_t(h) * hd + i;
      float x1 = load(x, o), x2 = load(x, o + half);
      op::rope_rotate(x1, x2, cs.x, sign * cs.y);
      store(x, o, x1);
      store(x, o + half, x2);
    }
  }
}
// part [T, w] = columns [col0, col0 + w) of the rows of fused (fw wide), or back (to_fused).
template <typename T>
__global__ void copy_columns_kernel(T* part, T* fused, int64_t T_, int64_t w, int64_t fw,
                                    int64_t col0, bool to_fused) {
  TETRA_FOR(idx, T_ * w) {
    const int64_t f = (idx / w) * fw + col0 + idx % w;
    if (to_fused)
      fused[f] = part[idx];
    else
      part[idx] = fused[f];
  }
}

// ---- SwiGLU: h [T, F] from gate and up rows `in_stride` apart (2F: the fused gate_up) ----

template <typename T>
__global__ void swiglu_t_kernel(T* h, const T* g, const T* u, int64_t T_, int64_t F,
                                int64_t in_stride) {
  TETRA_FOR(idx, T_ * F) {
    const int64_t j = (idx / F) * in_stride + idx % F;
    store(h, idx, op::swiglu(load(g, j), load(u, j)));
  }
}
template <typename T>
__global__ void swiglu_backward_t_kernel(T* dg, T* du, const T* dh, const T* g, const T* u,
                                         int64_t T_, int64_t F, int64_t in_stride) {
  TETRA_FOR(idx, T_ * F) {
    const int64_t j = (idx / F) * in_stride + idx % F;
    float a, b;
    op::swiglu_backward(load(dh, idx), load(g, j), load(u, j), a, b);
    store(dg, j, a);
    store(du, j, b);
  }
}

// ---- Cross-entropy pieces on logits [T, V] of any storage (row_max, stats fp32) ----

template <typename T>
__global__ void ce_row_max_t_kernel(float* row_max, const T* logits, int64_t V, int64_t valid) {
  const int64_t t = blockIdx.x;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) m = fmaxf(m, load(logits, t * V + j));
  m = block_reduce(m, Max{}, -INFINITY);
  if (threadIdx.x == 0) row_max[t] = m;
}
template <typename T>
__global__ void ce_stats_t_kernel(float* stats, const T* logits, const float* row_max,
                                  const int32_t* targets, int64_t V, int64_t vocab_start,
                                  int64_t valid) {
  const int64_t t = blockIdx.x;
  const float m = row_max[t];
  float sum = 0;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x)
    sum += expf(load(logits, t * V + j) - m);
  sum = block_reduce(sum, Sum{}, 0.f);
  if (threadIdx.x == 0) {
    const int64_t r = targets[t] - vocab_start;
    stats[2 * t] = sum;
    stats[2 * t + 1] = (r >= 0 && r < valid) ? load(logits, t * V + r) : 0.f;
  }
}
template <typename T>
__global__ void ce_backward_t_kernel(T* logits, const float* row_max, const float* stats,
                                     const int32_t* targets, int64_t T_, int64_t V,
                                     int64_t vocab_start, int64_t valid, float scale) {
  TETRA_FOR(idx, T_ * V) {
    const int64_t t = idx / V, j = idx % V;
    const float g = j < valid ? op::ce_grad(load(logits, idx), row_max[t], 1.f / stats[2 * t],
                                            scale, j == targets[t] - vocab_start)
                              : 0.f;
    store(logits, idx, g);
  }
}

// ---- AdamW on fp32 master, m, v; copy (bf16, may be null) gets the updated weights ----

// A launch's segments, passed by value: element i of segment s, begin[s] <= i < end[s], decays
// by decay[s] = 1 - lr wd_s; elements between segments are left alone.
constexpr int kAdamSegments = 16;
struct AdamSegments {
  int n;
  int64_t begin[kAdamSegments], end[kAdamSegments];
  float decay[kAdamSegments];
};

// Over elements [first, first + n) of the shard.
static __global__ void adamw_kernel(float* p, const float* grad, float* m, float* v, uint16_t* copy,
                                    int64_t first, int64_t n, op::AdamCoeffs c, AdamSegments segs) {
  TETRA_FOR(j, n) {
    const int64_t i = first + j;
    int s = 0;
    while (s < segs.n && i >= segs.end[s]) ++s;
    if (s == segs.n || i < segs.begin[s]) continue;
    op::AdamCoeffs cs = c;
    cs.decay = segs.decay[s];
    float pi = p[i], mi = m[i], vi = v[i];
    op::adamw_update(pi, grad[i], mi, vi, cs);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if (copy) copy[i] = float_to_bf16(pi);
  }
}

}  // namespace tetra::cuda
