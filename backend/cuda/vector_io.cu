// Launchers of the 16-byte kernels (vector_io.hpp): when the vector path applies, and grids
// over whole vectors.
#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "backend/cuda/common.hpp"
#include "backend/cuda/vector_io.cuh"
#include "backend/cuda/vector_io.hpp"
#include "backend/fusions.hpp"

namespace tetra::cuda {
namespace {

// Elements of one vector over tensors of these dtypes: 8 bf16 when all are bf16, else 4 (16
// bytes of fp32, 8 of bf16 beside them), as the kernels' N = 16 / the widest element.
int vec_elems(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->dtype != DType::BF16) return 4;
  return 8;
}
// The switch is on, every tensor is fp32 or bf16 and aligned to N of its elements, and the n
// elements (n > 0) are whole vectors of N.
bool usable(int64_t n, int N, std::initializer_list<const Tensor*> ts) {
  if (!fused(Fusion::VectorIo) || n == 0 || n % N != 0) return false;
  for (const Tensor* t : ts) {
    if (t->dtype != DType::F32 && t->dtype != DType::BF16) return false;
    if (reinterpret_cast<uintptr_t>(t->ptr) % (size_t(N) * dtype_size(t->dtype)) != 0) return false;
  }
  return true;
}
template <typename... Ts>
constexpr int kVec = int(16 / std::max({sizeof(Ts)...}));

}  // namespace

bool try_vec_fill(cudaStream_t s, Tensor x, float value) {
  if (!usable(x.numel(), vec_elems({&x}), {&x})) return false;
  by_dtype(x.dtype, "vector_io", [&](auto tag) {
    using T = decltype(tag);
    constexpr int N = kVec<T>;
    const int64_t vectors = x.numel() / N;
    fill_vec_kernel<T, N>
        <<<grid_for(vectors, kThreads), kThreads, 0, s>>>(dev_as<T>(x), vectors, value);
  });
  TETRA_LAUNCH_CHECK("fill_vec_kernel");
  return true;
}

bool try_vec_cast(cudaStream_t s, Tensor dst, const Tensor& src) {
  if (dst.dtype == src.dtype || !usable(src.numel(), 4, {&dst, &src})) return false;
  const int64_t vectors = src.numel() / 4;
  if (dst.dtype == DType::BF16)
    convert_vec_kernel<uint16_t, float, 4>
        <<<grid_for(vectors, kThreads), kThreads, 0, s>>>(bf16(dst), f32(src), vectors);
  else
    convert_vec_kernel<float, uint16_t, 4>
        <<<grid_for(vectors, kThreads), kThreads, 0, s>>>(f32(dst), bf16(src), vectors);
  TETRA_LAUNCH_CHECK("convert_vec_kernel");
  return true;
}

bool try_vec_add(cudaStream_t s, Tensor y, const Tensor& x) {
  if (!usable(y.numel(), vec_elems({&y, &x}), {&y, &x})) return false;
  by_dtype(y.dtype, "vector_io", [&](auto ty) {
    by_dtype(x.dtype, "vector_io", [&](auto tx) {
      using TY = decltype(ty);
      using TX = decltype(tx);
      constexpr int N = kVec<TY, TX>;
      const int64_t vectors = y.numel() / N;
      add_vec_kernel<TY, TX, N>
          <<<grid_for(vectors, kThreads), kThreads, 0, s>>>(dev_as<TY>(y), dev_as<TX>(x), vectors);
    });
  });
  TETRA_LAUNCH_CHECK("add_vec_kernel");
  return true;
}

bool try_vec_add3(cudaStream_t s, Tensor out, const Tensor& a, const Tensor& b) {
  if (a.dtype != out.dtype || b.dtype != out.dtype ||
      !usable(out.numel(), vec_elems({&out}), {&out, &a, &b}))
    return false;
  by_dtype(out.dtype, "vector_io", [&](auto tag) {
    using T = decltype(tag);
    constexpr int N = kVec<T>;
    const int64_t vectors = out.numel() / N;
    add3_vec_kernel<T, N><<<grid_for(vectors, kThreads), kThreads, 0, s>>>(
        dev_as<T>(out), dev_as<T>(a), dev_as<T>(b), vectors);
  });
  TETRA_LAUNCH_CHECK("add3_vec_kernel");
  return true;
}

bool try_vec_embedding_forward(cudaStream_t s, Tensor out, const Tensor& tokens,
                               const Tensor& table, int64_t vocab_start) {
  const int64_t T = out.rows(), d = out.cols(), V = table.rows();
  const int N = vec_elems({&out});
  if (table.dtype != out.dtype || d % N != 0 || !usable(T * d, N, {&out, &table})) return false;
  by_dtype(out.dtype, "vector_io", [&](auto tag) {
    using T_ = decltype(tag);
    constexpr int M = kVec<T_>;
    embedding_forward_vec_kernel<T_, M><<<grid_for(T * d / M, kThreads), kThreads, 0, s>>>(
        dev_as<T_>(out), i32(tokens), dev_as<T_>(table), T, d, V, vocab_start);
  });
  TETRA_LAUNCH_CHECK("embedding_forward_vec_kernel");
  return true;
}

bool try_vec_swiglu_fused_forward(cudaStream_t s, Tensor h, const Tensor& gate_up) {
  const int64_t T = h.rows(), F = h.cols();
  const int N = vec_elems({&h});
  if (gate_up.dtype != h.dtype || F % N != 0 || !usable(T * F, N, {&h, &gate_up})) return false;
  by_dtype(h.dtype, "vector_io", [&](auto tag) {
    using T_ = decltype(tag);
    constexpr int M = kVec<T_>;
    const T_* g = dev_as<T_>(gate_up);
    swiglu_vec_kernel<T_, M>
        <<<grid_for(T * F / M, kThreads), kThreads, 0, s>>>(dev_as<T_>(h), g, g + F, T, F, 2 * F);
  });
  TETRA_LAUNCH_CHECK("swiglu_vec_kernel");
  return true;
}

bool try_vec_swiglu_fused_backward(cudaStream_t s, Tensor dgate_up, const Tensor& dh,
                                   const Tensor& gate_up) {
  const int64_t T = dh.rows(), F = dh.cols();
  const int N = vec_elems({&dh});
  if (gate_up.dtype != dh.dtype || dgate_up.dtype != dh.dtype || F % N != 0 ||
      !usable(T * F, N, {&dgate_up, &dh, &gate_up}))
    return false;
  by_dtype(dh.dtype, "vector_io", [&](auto tag) {
    using T_ = decltype(tag);
    constexpr int M = kVec<T_>;
    T_* dg = dev_as<T_>(dgate_up);
    const T_* g = dev_as<T_>(gate_up);
    swiglu_backward_vec_kernel<T_, M><<<grid_for(T * F / M, kThreads), kThreads, 0, s>>>(
        dg, dg + F, dev_as<T_>(dh), g, g + F, T, F, 2 * F);
  });
  TETRA_LAUNCH_CHECK("swiglu_backward_vec_kernel");
  return true;
}

bool try_vec_ce_backward(cudaStream_t s, Tensor logits, const Tensor& row_max, const Tensor& stats,
                         const Tensor& targets, int64_t vocab_start, int64_t valid, float scale) {
  const int64_t T = logits.rows(), V = logits.cols();
  if (logits.dtype != DType::BF16 || V % 8 != 0 || !usable(T * V, 8, {&logits})) return false;
  ce_backward_vec_kernel<uint16_t, 8><<<grid_for(T * V / 8, kThreads), kThreads, 0, s>>>(
      bf16(logits), f32(row_max), f32(stats), i32(targets), T, V, vocab_start, valid, scale);
  TETRA_LAUNCH_CHECK("ce_backward_vec_kernel");
  return true;
}

bool try_vec_adamw(cudaStream_t s, Tensor param, const Tensor& grad, Tensor m, Tensor v,
                   Tensor copy, int64_t first, int64_t n, const op::AdamCoeffs& c,
                   const AdamSegments& segs) {
  // Whole vectors of 4 around [first, first + n): the elements added at either end lie
  // outside every segment, and go back unchanged.
  const int64_t lo = first / 4 * 4, hi = (first + n + 3) / 4 * 4;
  if (hi > param.numel() || !usable(hi - lo, 4, {&param, &grad, &m, &v}) ||
      (copy.ptr && !usable(hi - lo, 4, {&copy})))
    return false;
  const int64_t vectors = (hi - lo) / 4;
  adamw_vec_kernel<<<grid_for(vectors, kThreads), kThreads, 0, s>>>(
      f32(param), f32(grad), f32(m), f32(v), copy.ptr ? bf16(copy) : nullptr, lo, vectors, c, segs);
  TETRA_LAUNCH_CHECK("adamw_vec_kernel");
  return true;
}

}  // namespace tetra::cuda
