// What the CUDA backend's files share: errors of CUDA calls as tetra::Error, device pointers of
// tensors, and scratch memory from the stream-ordered pool. Host code (g++ or nvcc).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/tensor.hpp"

namespace tetra::cuda {

// Throws tetra::Error naming the call (and clears a non-sticky error first, so that later
// launch checks do not see it).
void check_cuda(cudaError_t err, const char* call);
#define TETRA_CUDA_CHECK(call) ::tetra::cuda::check_cuda((call), #call)
// After a kernel launch: a bad configuration shows here, a fault at the next synchronization.
#define TETRA_LAUNCH_CHECK(kernel) ::tetra::cuda::check_cuda(cudaGetLastError(), kernel)

// The device pointer of a tensor, checked to live in CUDA memory.
void* dev(const Tensor& t);
template <typename T>
T* dev_as(const Tensor& t) {
  return static_cast<T*>(dev(t));
}
// Calls f(T{}) with T the storage type of dtype t: float or uint16_t (bf16); throws
// tetra::Error naming op for any other dtype.
template <typename F>
void by_dtype(DType t, const char* op, F&& f) {
  if (t == DType::F32) return f(float{});
  if (t == DType::BF16) return f(uint16_t{});
  fail(op, ": no kernel for ", dtype_name(t), " tensors");
}
// Checked dtype as well.
float* f32(const Tensor& t);
uint16_t* bf16(const Tensor& t);
const int32_t* i32(const Tensor& t);

// Temporary device memory from the stream-ordered pool, freed in stream order at scope end:
// kernels queued before the free still see it.
class Scratch {
 public:
  Scratch(cudaStream_t s, size_t bytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return p_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  cudaStream_t s_;
  void* p_ = nullptr;
};

// Blocks for a grid-stride kernel over n elements (n > 0) with `threads` per block.
unsigned grid_for(int64_t n, int threads);

}  // namespace tetra::cuda
