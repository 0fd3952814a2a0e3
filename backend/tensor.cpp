#include "backend/tensor.hpp"

#include <sstream>

namespace tetra {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::BF16:
      return "bf16";
    case DType::I32:
      return "i32";
  }
  return "?";
}

Tensor::Tensor(void* p, std::initializer_list<int64_t> shape, DType t, Device d)
    : ptr(p), dtype(t), device(d) {
  check(shape.size() <= kMaxDims, "tensor rank above ", kMaxDims);
  for (int64_t s : shape) dims[ndim++] = s;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= dims[i];
  return n;
}

float* Tensor::f32() const {
  check(dtype == DType::F32, "expected an f32 tensor, got ", dtype_name(dtype));
  return static_cast<float*>(ptr);
}

int32_t* Tensor::i32() const {
  check(dtype == DType::I32, "expected an i32 tensor, got ", dtype_name(dtype));
  return static_cast<int32_t*>(ptr);
}

Tensor Tensor::reshape(std::initializer_list<int64_t> shape) const {
  Tensor t(ptr, shape, dtype, device);
  check(t.numel() == numel(), "reshape ", shape_str(), " to ", t.shape_str());
  return t;
}

Tensor Tensor::rows_view(int64_t r0, int64_t n) const {
  check(r0 >= 0 && r0 + n <= dims[0], "rows [", r0, ", ", r0 + n, ") of ", shape_str());
  Tensor t = *this;
  t.dims[0] = n;
  t.ptr = static_cast<char*>(ptr) + size_t(r0) * (bytes() / size_t(dims[0]));
  return t;
}

Tensor Tensor::flat(int64_t offset, int64_t n) const {
  check(offset >= 0 && offset + n <= numel(), "flat [", offset, ", ", offset + n, ") of ",
        shape_str());
  return Tensor(static_cast<char*>(ptr) + size_t(offset) * dtype_size(dtype), {n}, dtype, device);
}

std::string Tensor::shape_str() const {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < ndim; ++i) os << (i ? ", " : "") << dims[i];
  os << "]";
  return os.str();
}

}  // namespace tetra
