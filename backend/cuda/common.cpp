#include "backend/cuda/common.hpp"

#include <algorithm>
#include <cstdio>

namespace tetra::cuda {

void check_cuda(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return;
  cudaGetLastError();
  fail("CUDA error in ", call, ": ", cudaGetErrorString(err));
}

void* dev(const Tensor& t) {
  check(t.device == Device::CUDA, "CUDA backend given a tensor ", t.shape_str(),
        " that is not in CUDA memory");
  return t.ptr;
}
float* f32(const Tensor& t) {
  check(t.dtype == DType::F32, "CUDA kernel wants an fp32 tensor, got ", dtype_name(t.dtype), " ",
        t.shape_str());
  return static_cast<float*>(dev(t));
}
uint16_t* bf16(const Tensor& t) {
  check(t.dtype == DType::BF16, "CUDA kernel wants a bf16 tensor, got ", dtype_name(t.dtype), " ",
        t.shape_str());
  return static_cast<uint16_t*>(dev(t));
}
const int32_t* i32(const Tensor& t) {
  check(t.dtype == DType::I32, "CUDA kernel wants an i32 tensor, got ", dtype_name(t.dtype), " ",
        t.shape_str());
  return static_cast<const int32_t*>(dev(t));
}

Scratch::Scratch(cudaStream_t s, size_t bytes) : s_(s) {
  const cudaError_t err = cudaMallocAsync(&p_, std::max<size_t>(bytes, 1), s);
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail("out of CUDA memory allocating ", bytes, " bytes of scratch (", cudaGetErrorString(err),
         ")");
  }
}
Scratch::~Scratch() {
  if (cudaFreeAsync(p_, s_) != cudaSuccess) {
    cudaGetLastError();
    std::fprintf(stderr, "tetra: cudaFreeAsync of scratch failed\n");
  }
}

unsigned grid_for(int64_t n, int threads) {
  return unsigned(std::min<int64_t>((n + threads - 1) / threads, int64_t(1) << 16));
}

}  // namespace tetra::cuda
