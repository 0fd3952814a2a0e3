// Test support for the CPU op tests: seeded host values, host references of ops, and host
// values in and out of one backend (bf16 tensors uploaded rounded and read widened), so each
// test file states only its op and its comparison.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.hpp"
#include "backend/op_math.hpp"
#include "util/bf16.hpp"

namespace tetra::test {

using Floats = std::vector<float>;

// n values drawn from N(0, sd^2) with a seeded generator: the same values on every run.
inline Floats randn(int64_t n, uint32_t seed, float sd = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, sd);
  Floats x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  return x;
}

inline float round_bf16(float x) {
  return bf16_to_float(float_to_bf16(x));
}
inline Floats round_bf16(const Floats& x) {
  Floats r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = round_bf16(x[i]);
  return r;
}

inline bool same_bits(const Floats& a, const Floats& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Rotate-half RoPE on the host, in the CPU backend's arithmetic: the first `heads` heads (hd
// wide) of each row of x [T, width] at positions pos [T], angle = pos theta^(-2i/hd) in
// double, its cosine and sine rounded to float, the rotation in float (op::rope_rotate);
// inverse: the transposed rotation.
inline Floats host_rope(Floats x, int64_t width, int64_t heads, int64_t hd,
                        const std::vector<int32_t>& pos, double theta, bool inverse) {
  const int64_t half = hd / 2;
  for (size_t t = 0; t < pos.size(); ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(pos[t]) * std::pow(theta, -2.0 * double(i) / double(hd));
      const float c = float(std::cos(angle)), s = (inverse ? -1.f : 1.f) * float(std::sin(angle));
      for (int64_t h = 0; h < heads; ++h) {
        float* xh = &x[t * width + h * hd];
        op::rope_rotate(xh[i], xh[i + half], c, s);
      }
    }
  return x;
}

// Tensors of one backend made from host values, kept alive as long as the Io.
struct Io {
  explicit Io(Backend& b) : be(b) {}
  Backend& be;
  std::vector<Buffer> keep;
  Tensor put(const Floats& h, std::initializer_list<int64_t> shape, DType t = DType::F32) {
    keep.emplace_back(be, int64_t(h.size()), t);
    Tensor x = keep.back().view(shape);
    if (t == DType::F32) {
      be.upload(x, h.data());
    } else {
      std::vector<uint16_t> b(h.size());
      for (size_t i = 0; i < h.size(); ++i) b[i] = float_to_bf16(h[i]);
      be.upload(x, b.data());
    }
    return x;
  }
  Tensor zeros(std::initializer_list<int64_t> shape, DType t = DType::F32) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return put(Floats(size_t(n), 0.f), shape, t);
  }
  Tensor ints(const std::vector<int32_t>& h) {
    keep.emplace_back(be, int64_t(h.size()), DType::I32);
    be.upload(keep.back().flat(), h.data());
    return keep.back().flat();
  }
  Floats get(const Tensor& t) {
    Floats out(size_t(t.numel()));
    if (t.dtype == DType::F32) {
      be.download(out.data(), t);
    } else {
      std::vector<uint16_t> b(out.size());
      be.download(b.data(), t);
      for (size_t i = 0; i < b.size(); ++i) out[i] = bf16_to_float(b[i]);
    }
    return out;
  }
};

// The fp32 CPU backends: plain, and guarded (host code cannot touch its memory).
inline std::vector<std::unique_ptr<Backend>> fp32_backends() {
  std::vector<std::unique_ptr<Backend>> v;
  v.push_back(make_cpu_backend(2));
  v.push_back(make_guarded_cpu_backend(2));
  return v;
}

}  // namespace tetra::test
