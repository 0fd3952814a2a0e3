#include "backend/backend.hpp"

#include <algorithm>
#include <cstdlib>

namespace tetra {

void* Backend::host_alloc(size_t bytes) {
  void* p = std::malloc(std::max<size_t>(bytes, 1));
  check(p != nullptr, "out of host memory allocating ", bytes, " bytes of staging");
  return p;
}

void Backend::host_free(void* p) {
  std::free(p);
}

void Backend::sum_squares(std::span<const Tensor> xs, std::span<double> out) {
  check(xs.size() == out.size(), "sum_squares: ", xs.size(), " tensors, ", out.size(), " results");
  for (size_t i = 0; i < xs.size(); ++i) out[i] = sum_squares(xs[i]);
}

void check_adamw(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                 std::span<const AdamWSegment> segments, const Tensor& copy) {
  const int64_t n = param.numel();
  check(grad.numel() == n && m.numel() == n && v.numel() == n &&
            (copy.ptr == nullptr || (copy.dtype == DType::BF16 && copy.numel() == n)),
        "adamw: ", n, " weights with ", grad.numel(), " gradients, ", m.numel(), " and ", v.numel(),
        " moments, a compute copy of ", copy.numel());
  int64_t at = 0;
  for (const AdamWSegment& s : segments) {
    check(at <= s.begin && s.begin <= s.end && s.end <= n, "adamw: segment [", s.begin, ", ", s.end,
          ") after ", at, " in ", n, " weights");
    at = s.end;
  }
}

HostBuffer::~HostBuffer() {
  if (p_) be_->host_free(p_);
}

char* HostBuffer::get(Backend& be, size_t bytes) {
  if (bytes <= size_ && be_ == &be) return p_;
  if (p_) be_->host_free(p_);
  p_ = nullptr;
  be_ = &be;
  p_ = static_cast<char*>(be.host_alloc(bytes));
  size_ = bytes;
  return p_;
}

Buffer::Buffer(Backend& be, int64_t numel, DType dtype) : be_(&be), numel_(numel), dtype_(dtype) {
  check(numel >= 0, "negative buffer size");
  ptr_ = numel > 0 ? be.raw_alloc(bytes()) : nullptr;
  Backend::AllocStats& s = be.alloc_stats;
  s.in_use += int64_t(bytes());
  s.peak = std::max(s.peak, s.in_use);
  s.largest = std::max(s.largest, int64_t(bytes()));
}

Buffer::~Buffer() {
  reset();
}

void Buffer::reset() {
  if (ptr_) {
    be_->raw_free(ptr_, bytes());
    be_->alloc_stats.in_use -= int64_t(bytes());
  }
  ptr_ = nullptr;
  numel_ = 0;
}

Buffer::Buffer(Buffer&& o) noexcept : be_(o.be_), ptr_(o.ptr_), numel_(o.numel_), dtype_(o.dtype_) {
  o.ptr_ = nullptr;
  o.numel_ = 0;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    be_ = o.be_;
    ptr_ = o.ptr_;
    numel_ = o.numel_;
    dtype_ = o.dtype_;
    o.ptr_ = nullptr;
    o.numel_ = 0;
  }
  return *this;
}

Tensor Buffer::view(std::initializer_list<int64_t> shape) const {
  return flat().reshape(shape);
}

Tensor Buffer::flat() const {
  return Tensor(ptr_, {numel_}, dtype_, be_ ? be_->device() : Device::CPU);
}

}  // namespace tetra
