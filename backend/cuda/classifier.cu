// The fused classifier's kernel: a block per row of the logits, as llm.c's fused_classifier.
// Each thread runs an online softmax (backend/op_math.hpp's softmax_add, the CPU's formula) over
// its columns j = tid, tid + 1024, ..., the one read of the row from memory; the block merges
// the threads' states by a fixed tree; then each thread reads its columns again and writes
// dlogits over them. One kernel instead of ce_row_max, ce_stats and ce_backward's three passes
// (four reads or writes of the logits from memory, 2.1 GB a step at the ~350M benchmark's
// T = 8192, V = 32000 in bf16; here a read and a write, 1.05 GB, and a second read from L2).
// 1024 threads a row, so that the rows in flight fit in L2 for that second read: at most two
// blocks an SM, 264 rows on an H200's 132 SMs, 17 MB of bf16 logits at V = 32000 (34 MB in
// fp32) against 50 MB of L2; 256 threads a row would keep 68 MB in flight.
#include "backend/cuda/classifier.hpp"
#include "backend/cuda/common.hpp"
#include "backend/cuda/reduce.cuh"
#include "backend/op_math.hpp"
#include "util/error.hpp"

namespace tetra::cuda {
namespace {

constexpr int kClassifierThreads = 1024;

// The states (m, s) of the 32 lanes merged by a butterfly; every lane gets the merge.
__device__ inline void warp_softmax_merge(float& m, float& s) {
  for (int o = 16; o > 0; o /= 2) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    op::softmax_merge(m, s, m2, s2);
  }
}

// The block's states merged: each warp's, then warp 0 over the warps' (a fixed tree, so two
// runs agree bit for bit); every thread gets the row's (m, s), broadcast from one thread.
__device__ inline void block_softmax_merge(float& m, float& s) {
  __shared__ float wm[32], ws[32], row_m, row_s;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  warp_softmax_merge(m, s);
  if (lane == 0) wm[warp] = m, ws[warp] = s;
  __syncthreads();
  if (warp == 0) {
    m = lane < warps ? wm[lane] : -INFINITY;
    s = lane < warps ? ws[lane] : 0.f;
    warp_softmax_merge(m, s);
    if (lane == 0) row_m = m, row_s = s;
  }
  __syncthreads();
  m = row_m, s = row_s;
}

template <typename T>
__global__ void __launch_bounds__(kClassifierThreads, 2)
    ce_fused_kernel(T* logits, float* row_max, float* stats, const int32_t* targets, int64_t V,
                    int64_t valid, float scale) {
  const int64_t t = blockIdx.x;
  T* l = logits + t * V;
  const int64_t r = targets[t];
  const bool in_row = r >= 0 && r < valid;
  // The target's logit, read before the merge's barriers: after them other threads overwrite
  // the row.
  const float target = threadIdx.x == 0 && in_row ? load(l, r) : 0.f;
  float m = -INFINITY, s = 0.f;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) op::softmax_add(m, s, load(l, j));
  block_softmax_merge(m, s);
  if (threadIdx.x == 0) {
    row_max[t] = m;
    stats[2 * t] = s;
    stats[2 * t + 1] = target;
  }
  const float inv = 1.f / s;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
    store(l, j, j < valid ? op::ce_grad(load(l, j), m, inv, scale, j == r) : 0.f);
}

}  // namespace

void ce_fused_any(cudaStream_t s, Tensor logits, Tensor row_max, Tensor stats,
                  const Tensor& targets, int64_t valid, float scale) {
  const int64_t T = logits.rows(), V = logits.cols();
  check(row_max.numel() == T && stats.numel() == 2 * T && targets.numel() == T &&
            row_max.dtype == DType::F32 && stats.dtype == DType::F32 && valid >= 0 && valid <= V,
        "ce_fused ", logits.shape_str(), ", ", valid, " valid columns");
  if (T == 0) return;
  if (logits.dtype == DType::F32)
    ce_fused_kernel<float><<<unsigned(T), kClassifierThreads, 0, s>>>(
        f32(logits), f32(row_max), f32(stats), i32(targets), V, valid, scale);
  else if (logits.dtype == DType::BF16)
    ce_fused_kernel<uint16_t><<<unsigned(T), kClassifierThreads, 0, s>>>(
        bf16(logits), f32(row_max), f32(stats), i32(targets), V, valid, scale);
  else
    fail("ce_fused: no kernel for ", dtype_name(logits.dtype), " logits");
  TETRA_LAUNCH_CHECK("ce_fused_kernel");
}

}  // namespace tetra::cuda
