// Tensors are views: a pointer, a shape, a dtype and the device the pointer lives on. They
// never own memory; a Buffer does (backend/backend.hpp). Layer code passes views to Backend ops,
// so the same code runs on host memory (CPU backend) and device memory (CUDA backend).
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "util/error.hpp"

namespace tetra {

// Guarded: host memory that only its backend may touch (backend/cpu/guarded_backend.cpp).
enum class Device { CPU, CUDA, Guarded };
enum class DType { F32, BF16, I32 };

inline size_t dtype_size(DType t) {
  return t == DType::BF16 ? 2 : 4;
}
const char* dtype_name(DType t);

struct Tensor {
  static constexpr int kMaxDims = 4;

  void* ptr = nullptr;
  std::array<int64_t, kMaxDims> dims{};
  int ndim = 0;
  DType dtype = DType::F32;
  Device device = Device::CPU;

  Tensor() = default;
  Tensor(void* p, std::initializer_list<int64_t> shape, DType t = DType::F32,
         Device d = Device::CPU);

  int64_t numel() const;
  size_t bytes() const { return size_t(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return dims[i < 0 ? ndim + i : i]; }
  // For a 2-D view [rows, cols]; a 1-D view is one row.
  int64_t rows() const { return ndim == 1 ? 1 : dims[0]; }
  int64_t cols() const { return dims[ndim - 1]; }

  float* f32() const;
  int32_t* i32() const;

  // Same memory, another shape of the same element count.
  Tensor reshape(std::initializer_list<int64_t> shape) const;
  // Rows [r0, r0+n) of the tensor seen as [dim0, rest...]: contiguous, so still a view.
  Tensor rows_view(int64_t r0, int64_t n) const;
  // A flat 1-D view of elements [offset, offset+n).
  Tensor flat(int64_t offset, int64_t n) const;
  std::string shape_str() const;
};

}  // namespace tetra
