// The 16-byte kernels of Fusion::VectorIo (vector_io.hpp): each thread moves whole vectors of
// N elements (4 fp32, 8 bf16; 4 of each where the two meet) instead of one element, and does
// the scalar kernel's math on every element (reduce.cuh's load/store, backend/op_math.hpp), so
// that both give the same bits. Every index below counts elements; e = i N is the first element
// of vector i, which the launcher has checked to be aligned for every pointer.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/fused_kernels.cuh"

namespace tetra::cuda {

// N elements of storage T as one aligned access (16 bytes for 4 fp32 or 8 bf16).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
  __device__ static Vec load(const T* p) { return *reinterpret_cast<const Vec*>(p); }
  __device__ void store(T* p) const { *reinterpret_cast<Vec*>(p) = *this; }
  __device__ float get(int k) const { return cuda::load(v, k); }
  __device__ void set(int k, float x) { cuda::store(v, k, x); }
};

template <typename T, int N>
__global__ void fill_vec_kernel(T* x, int64_t vectors, float value) {
  Vec<T, N> f;
  for (int k = 0; k < N; ++k) f.set(k, value);
  TETRA_FOR(i, vectors) f.store(x + i * N);
}
template <typename TD, typename TS, int N>
__global__ void convert_vec_kernel(TD* dst, const TS* src, int64_t vectors) {
  TETRA_FOR(i, vectors) {
    const Vec<TS, N> s = Vec<TS, N>::load(src + i * N);
    Vec<TD, N> d;
    for (int k = 0; k < N; ++k) d.set(k, s.get(k));
    d.store(dst + i * N);
  }
}
template <typename TY, typename TX, int N>
__global__ void add_vec_kernel(TY* y, const TX* x, int64_t vectors) {
  TETRA_FOR(i, vectors) {
    Vec<TY, N> a = Vec<TY, N>::load(y + i * N);
    const Vec<TX, N> b = Vec<TX, N>::load(x + i * N);
    for (int k = 0; k < N; ++k) a.set(k, a.get(k) + b.get(k));
    a.store(y + i * N);
  }
}
template <typename T, int N>
__global__ void add3_vec_kernel(T* out, const T* a, const T* b, int64_t vectors) {
  TETRA_FOR(i, vectors) {
    const Vec<T, N> va = Vec<T, N>::load(a + i * N), vb = Vec<T, N>::load(b + i * N);
    Vec<T, N> o;
    for (int k = 0; k < N; ++k) o.set(k, va.get(k) + vb.get(k));
    o.store(out + i * N);
  }
}

// out [T, d] from table rows (d a multiple of N), as embedding_forward_t_kernel.
template <typename T, int N>
__global__ void embedding_forward_vec_kernel(T* out, const int32_t* tok, const T* table, int64_t T_,
                                             int64_t d, int64_t V, int64_t vocab_start) {
  TETRA_FOR(i, T_ * d / N) {
    const int64_t e = i * N, t = e / d, c = e % d, r = tok[t] - vocab_start;
    Vec<T, N> o;
    if (r >= 0 && r < V) {
      const Vec<T, N> w = Vec<T, N>::load(table + r * d + c);
      for (int k = 0; k < N; ++k) o.set(k, w.get(k));
    } else {
      for (int k = 0; k < N; ++k) o.set(k, 0.f);
    }
    o.store(out + e);
  }
}

// SwiGLU over h [T, F] (F a multiple of N) from gate and up rows in_stride apart, as
// swiglu_t_kernel and swiglu_backward_t_kernel.
template <typename T, int N>
__global__ void swiglu_vec_kernel(T* h, const T* g, const T* u, int64_t T_, int64_t F,
                                  int64_t in_stride) {
  TETRA_FOR(i, T_ * F / N) {
    const int64_t e = i * N, j = (e / F) * in_stride + e % F;
    const Vec<T, N> gv = Vec<T, N>::load(g + j), uv = Vec<T, N>::load(u + j);
    Vec<T, N> hv;
    for (int k = 0; k < N; ++k) hv.set(k, op::swiglu(gv.get(k), uv.get(k)));
    hv.store(h + e);
  }
}
template <typename T, int N>
__global__ void swiglu_backward_vec_kernel(T* dg, T* du, const T* dh, const T* g, const T* u,
                                           int64_t T_, int64_t F, int64_t in_stride) {
  TETRA_FOR(i, T_ * F / N) {
    const int64_t e = i * N, j = (e / F) * in_stride + e % F;
    const Vec<T, N> dv = Vec<T, N>::load(dh + e), gv = Vec<T, N>::load(g + j),
                    uv = Vec<T, N>::load(u + j);
    Vec<T, N> a, b;
    for (int k = 0; k < N; ++k) {
      float x, y;
      op::swiglu_backward(dv.get(k), gv.get(k), uv.get(k), x, y);
      a.set(k, x);
      b.set(k, y);
    }
    a.store(dg + j);
    b.store(du + j);
  }
}

// dlogits in place over logits [T, V] (V a multiple of N), as ce_backward_t_kernel.
template <typename T, int N>
__global__ void ce_backward_vec_kernel(T* logits, const float* row_max, const float* stats,
                                       const int32_t* targets, int64_t T_, int64_t V,
                                       int64_t vocab_start, int64_t valid, float scale) {
  TETRA_FOR(i, T_ * V / N) {
    const int64_t e = i * N, t = e / V, j0 = e % V, target = targets[t] - vocab_start;
    const float mx = row_max[t], inv = 1.f / stats[2 * t];
    Vec<T, N> l = Vec<T, N>::load(logits + e);
    for (int k = 0; k < N; ++k) {
      const int64_t j = j0 + k;
      l.set(k, j < valid ? op::ce_grad(l.get(k), mx, inv, scale, j == target) : 0.f);
    }
    l.store(logits + e);
  }
}

// AdamW over elements [first, first + 4 vectors) of the shard (first a multiple of 4), as
// adamw_kernel: elements outside every segment are written back as they were read.
static __global__ void adamw_vec_kernel(float* p, const float* grad, float* m, float* v,
                                        uint16_t* copy, int64_t first, int64_t vectors,
                                        op::AdamCoeffs c, AdamSegments segs) {
  using F4 = Vec<float, 4>;
  using B4 = Vec<uint16_t, 4>;
  TETRA_FOR(q, vectors) {
    const int64_t i0 = first + q * 4;
    F4 pv = F4::load(p + i0), mv = F4::load(m + i0), vv = F4::load(v + i0);
    const F4 gv = F4::load(grad + i0);
    B4 cv{};
    if (copy) cv = B4::load(copy + i0);
    for (int k = 0; k < 4; ++k) {
      const int64_t i = i0 + k;
      int s = 0;
      while (s < segs.n && i >= segs.end[s]) ++s;
      if (s == segs.n || i < segs.begin[s]) continue;
      op::AdamCoeffs cs = c;
      cs.decay = segs.decay[s];
      float pi = pv.v[k], mi = mv.v[k], vi = vv.v[k];
      op::adamw_update(pi, gv.v[k], mi, vi, cs);
      pv.v[k] = pi;
      mv.v[k] = mi;
      vv.v[k] = vi;
      cv.v[k] = float_to_bf16(pi);
    }
    pv.store(p + i0);
    mv.store(m + i0);
    vv.store(v + i0);
    if (copy) cv.store(copy + i0);
  }
}

}  // namespace tetra::cuda
