// What every kernel file of the CUDA backend shares: block sizes, the grid-stride loop and the
// deterministic block reduction.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "util/bf16.hpp"

namespace tetra::cuda {

constexpr int kThreads = 256;         // elementwise and per-row kernels
constexpr int64_t kSumChunk = 16384;  // sum_squares: elements per block

// Grid-stride loop over [0, n) with 64-bit indices.
#define TETRA_FOR(i, n)                                                     \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

struct Sum {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduces v over the block (blockDim.x a multiple of 32); every thread gets the result. A
// butterfly in each warp, then one over the warp results: a fixed tree, hence deterministic.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T part[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // an earlier call may still be reading part
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < warps ? part[lane] : identity;
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Storage: fp32, or bf16 as uint16_t (util/bf16.hpp's rounding); math in fp32.
__device__ inline float load(const float* p, int64_t i) {
  return p[i];
}
__device__ inline float load(const uint16_t* p, int64_t i) {
  return bf16_to_float(p[i]);
}
__device__ inline void store(float* p, int64_t i, float v) {
  p[i] = v;
}
__device__ inline void store(uint16_t* p, int64_t i, float v) {
  p[i] = float_to_bf16(v);
}

// A sum over the 32 lanes of a warp; every lane gets it (a fixed butterfly).
__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename TD, typename TS>
__global__ void convert_kernel(TD* dst, const TS* src, int64_t n) {
  TETRA_FOR(i, n) store(dst, i, load(src, i));
}
}  // namespace tetra::cuda
