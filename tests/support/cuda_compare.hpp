// Helpers of the CUDA op tests (test_cuda_backend.cpp: fp32, test_cuda_bf16.cpp: bf16): seeded
// inputs uploaded into a backend, outputs read back as doubles, and the comparison of a GPU run
// with a reference run (within a tolerance relative to the reference's largest magnitude) and
// with a second GPU run (bit for bit).
#pragma once
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "host_io.hpp"
#include "util/bf16.hpp"

namespace tetra::test {

inline bool have_gpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}
#define SKIP_WITHOUT_GPU()        \
  do {                            \
    if (!have_gpu()) {            \
      MESSAGE("no GPU: skipped"); \
      return;                     \
    }                             \
  } while (0)

using Ints = std::vector<int32_t>;

// The GPU op tests' tolerances, relative to the reference's largest magnitude:
//   kOneRounding = 2^-7 + 1e-4: an output rounded to bf16 once from fp32 math that the two
//     devices order differently (warp trees, FMA contraction, expf) can land on the neighbouring
//     bf16 value: one ulp, at most 2^-7 of the largest magnitude, plus the fp32 op's own 1e-4.
//   kFp32 = 1e-4: fp32 outputs (1/rms, lse, statistics, weight gradients, master weights).
//   kFused = 2^-5 (four ulps): cuDNN rounds the probabilities to bf16 before P V and dS before
//     the dQ, dK GEMMs (flash attention's recipe), and a CP chunk's dK, dV are the bf16 sum of
//     two rounded parts.
constexpr double kOneRounding = 1.0 / 128 + 1e-4;
constexpr double kFp32 = 1e-4;
constexpr double kFused = 1.0 / 32;
// Named outputs of one run, as doubles (floats convert exactly; sum_squares is a double).
using Outputs = std::vector<std::pair<std::string, std::vector<double>>>;

inline Ints randint(int64_t n, uint32_t seed, int32_t lo, int32_t hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi - 1);
  Ints x(static_cast<size_t>(n));
  for (int32_t& v : x) v = dist(rng);
  return x;
}
inline Ints iota(int32_t from, int32_t to) {
  Ints x;
  for (int32_t i = from; i < to; ++i) x.push_back(i);
  return x;
}
inline Ints concat(std::initializer_list<Ints> parts) {
  Ints x;
  for (const Ints& p : parts) x.insert(x.end(), p.begin(), p.end());
  return x;
}

// Inputs uploaded into one backend; the buffers live as long as this object.
struct Inputs {
  Backend& be;
  std::vector<Buffer> keep;
  explicit Inputs(Backend& b) : be(b) {}
  Tensor put(const void* host, DType t, std::initializer_list<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    keep.emplace_back(be, n, t);
    Tensor x = keep.back().view(shape);
    be.upload(x, host);
    return x;
  }
  Tensor f32(const Floats& h, std::initializer_list<int64_t> shape) {
    return put(h.data(), DType::F32, shape);
  }
  // h rounded to bf16 (exactly the values both backends then hold).
  Tensor bf16(const Floats& h, std::initializer_list<int64_t> shape) {
    std::vector<uint16_t> b(h.size());
    for (size_t i = 0; i < h.size(); ++i) b[i] = float_to_bf16(h[i]);
    return put(b.data(), DType::BF16, shape);
  }
  // fp32 or bf16, the activations' dtype of a test.
  Tensor act(DType t, const Floats& h, std::initializer_list<int64_t> shape) {
    return t == DType::BF16 ? bf16(h, shape) : f32(h, shape);
  }
  Tensor i32(const Ints& h, std::initializer_list<int64_t> shape) {
    return put(h.data(), DType::I32, shape);
  }
  Tensor zeros(std::initializer_list<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return f32(Floats(size_t(n), 0.f), shape);
  }
};

inline std::vector<double> get(Backend& be, const Tensor& t) {
  std::vector<double> out;
  if (t.dtype == DType::I32) {
    Ints h(size_t(t.numel()));
    be.download(h.data(), t);
    out.assign(h.begin(), h.end());
  } else if (t.dtype == DType::BF16) {
    std::vector<uint16_t> h(size_t(t.numel()));
    be.download(h.data(), t);
    for (uint16_t x : h) out.push_back(bf16_to_float(x));
  } else {
    Floats h(size_t(t.numel()));
    be.download(h.data(), t);
    out.assign(h.begin(), h.end());
  }
  return out;
}

// Runs `f` on `ref_be` and twice on `gpu_be`: the GPU must match the reference within tol
// (relative to the largest reference magnitude of each output) and itself bit for bit.
inline void check_outputs(Backend& ref_be, Backend& gpu_be,
                          const std::function<Outputs(Backend&)>& f, double tol) {
  const Outputs ref = f(ref_be), a = f(gpu_be), b = f(gpu_be);
  REQUIRE(ref.size() == a.size());
  REQUIRE(a.size() == b.size());
  for (size_t o = 0; o < ref.size(); ++o) {
    const auto& [name, r] = ref[o];
    const std::vector<double>&x = a[o].second, &y = b[o].second;
    REQUIRE(r.size() == x.size());
    REQUIRE(x.size() == y.size());
    double mag = 0, err = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      mag = std::max(mag, std::abs(r[i]));
      const double d = std::abs(r[i] - x[i]);
      err = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(err, d);
    }
    INFO(name, ": max |cpu - cuda| = ", err, ", max |cpu| = ", mag, ", tol ", tol);
    CHECK(err <= tol * std::max(mag, 1e-30));
    CHECK_MESSAGE(std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0, name,
                  ": two CUDA runs differ");
  }
}
// The CUDA backend against the CPU backend, fp32.
inline void check_against_cpu(const std::function<Outputs(Backend&)>& f, double tol) {
  auto cpu = make_cpu_backend(1);
  auto gpu = make_cuda_backend(0);
  check_outputs(*cpu, *gpu, f, tol);
}
// The CUDA backend's native bf16 path against the CPU's bf16 reference: the mixed-precision
// wrapper over the fp32 CPU backend (fp32 math on the same bf16 inputs, one rounding per
// output).
inline void check_bf16_against_cpu(const std::function<Outputs(Backend&)>& f, double tol) {
  auto cpu = make_mixed_precision_backend(make_cpu_backend(1));
  auto gpu = make_cuda_backend(0);
  REQUIRE(gpu->native_bf16());
  check_outputs(*cpu, *gpu, f, tol);
}

}  // namespace tetra::test
