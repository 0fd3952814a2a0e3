// The CPU backend's attention, in blocks of kBlock query rows. Per (batch, head) and block: the
// scores against the keys the block can see (the mask by positions ends the block's keys at the
// last one any of its queries sees, which for a causal sequence skips about half the products
// and exponentials of a whole [Sq, Sk] score matrix), the softmax masked by positions and
// documents (backend/attn_mask.hpp's rule, row by row), and the product with V.
// Backward per (batch, KV head), so that the query heads sharing a KV head, block after block,
// add into dK, dV in a fixed order. The products are single-threaded gemms (cpu_gemm.hpp); the
// threads take (batch, head) pairs, so no bit depends on their number.
#include "backend/cpu/cpu_attention.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <vector>

#include "backend/cpu/cpu_gemm.hpp"
#include "backend/cpu/cpu_lanes.hpp"
#include "backend/cpu/cpu_parallel.hpp"
#include "backend/op_math.hpp"

namespace tetra {
namespace {

constexpr int64_t kBlock = kAttentionBlock;

// An exception must not leave an OpenMP parallel region (the program would terminate): the
// attention loops, which allocate their score matrices per thread, catch inside and keep the
// first; rethrow() raises it after the region, an allocation failure as a tetra::Error that
// names what did not fit.
class RegionErrors {
 public:
  void capture() {
#pragma omp critical(tetra_region_errors)
    if (!first_) first_ = std::current_exception();
  }
  void rethrow(const char* op, int64_t rows, int64_t cols) const {
    if (!first_) return;
    try {
      std::rethrow_exception(first_);
    } catch (const std::bad_alloc&) {
      fail("out of host memory in ", op, ": a [", rows, ", ", cols,
           "] fp32 score matrix per thread does not fit; shorten `model.seq_len` or raise "
           "`layout.cp`");
    }
  }

 private:
  std::exception_ptr first_;
};

// The calling thread's score matrices, kept from call to call (OpenMP's threads persist), so
// that a step neither allocates nor zero-fills them: buffer `which` (0 or 1) of at least n
// floats, its contents undefined.
float* scratch(int which, size_t n) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& b = buffers[which];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// The keys [0, n) that hold every key a query of qp[0, rows) may see: n - 1 is the last key at or
// before the block's latest position (n is at least 1, so that a block that sees no key still
// has a row to divide by, as the whole matrix had).
int64_t visible_keys(const int32_t* qp, int64_t rows, const int32_t* kp, int64_t sk) {
  const int32_t latest = *std::max_element(qp, qp + rows);
  int64_t n = sk;
  while (n > 1 && kp[n - 1] > latest) --n;
  return n;
}

// One query row's view of AttnMaskView::visible: key j is visible when kp[j] <= q and, with
// documents (kd not null), kd[j] == d.
struct RowMask {
  const int32_t* kp;  // [n] key positions
  int32_t q;          // the query's position
  const int32_t* kd;  // [n] the keys' documents in this sequence, or null
  int32_t d;          // the query's document
};

// The row mask of query i of sequence b.
RowMask row_mask(const AttnMaskView& m, int64_t b, int64_t i) {
  if (!m.q_doc) return {m.k_pos, m.q_pos[i], nullptr, 0};
  return {m.k_pos, m.q_pos[i], m.k_doc + b * m.sk, m.q_doc[b * m.sq + i]};
}

// f(visible) for the row's mask, a branch-free predicate of key j for each case, so that the
// loops given it vectorize (a test of kd inside the loop, or a read of kd[j] that depends on
// kp[j], kept them scalar).
template <class F>
inline auto with_visible(const RowMask& r, F f) {
  const int32_t *kp = r.kp, *kd = r.kd;
  const int32_t q = r.q, d = r.d;
  if (!kd) return f([=](int64_t j) { return kp[j] <= q; });
  return f([=](int64_t j) { return (kp[j] <= q) & (kd[j] == d); });
}

// p[j] = e^(p[j] - shift) for the keys the row sees, 0 for the others (every exponential
// computed, then selected, in vectors: elementwise, so the same bits).
void exp_masked(float* p, int64_t n, const RowMask& r, float shift) {
  with_visible(r, [=](auto visible) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      const float e = op::exp_poly(p[j] - shift);
      p[j] = visible(j) ? e : 0.f;
    }
  });
}

// The largest of the scores p[0, n) the row sees (-inf when none). A maximum is exact in any
// order, so the vector reduction's order changes no bit.
float masked_max(const float* p, int64_t n, const RowMask& r) {
  return with_visible(r, [=](auto visible) {
    const float neg_inf = -std::numeric_limits<float>::infinity();
    float m = neg_inf;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; ++j) m = std::max(m, visible(j) ? p[j] : neg_inf);
    return m;
  });
}

// Row-wise masked softmax of sequence b's scores P [rows, n] for queries i0.. in place; masked
// entries become 0, L[i] = log-sum-exp (a query sees its own key, so no row is empty).
void softmax_masked(float* P, int64_t rows, int64_t n, const AttnMaskView& mask, int64_t b,
                    int64_t i0, float* L) {
  for (int64_t i = 0; i < rows; ++i) {
    float* p = P + i * n;
    const RowMask r = row_mask(mask, b, i0 + i);
    const float m = masked_max(p, n, r);
    exp_masked(p, n, r, m);
    const float sum = lane_sum<float>(n, [p](int64_t j) { return p[j]; });
    for (int64_t j = 0; j < n; ++j) p[j] /= sum;
    L[i] = m + std::log(sum);
  }
}

}  // namespace

void cpu_attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k,
                           const Tensor& v, const AttnPositions& pos, const AttnShape& s) {
  const int64_t H = s.heads, KV = s.kv_heads, hd = s.head_dim, group = H / KV;
  const float scale = 1.f / std::sqrt(float(hd));
  check_attn_positions(s, pos);
  const int32_t *qp = pos.q_pos.i32(), *kp = pos.k_pos.i32();
  check_attn_mask(s, qp, kp);
  const AttnMaskView mask = attn_mask_view(s, pos);
  check_attn_qkv("attention_forward", s, q, k, v);
  const AttnStrides st = attn_strides(s);
  const float *pq = q.f32() + st.q_col, *pk = k.f32() + st.k_col, *pv = v.f32() + st.v_col;
  const int64_t work = s.batch * H * s.sq * s.sk * hd;  // multiply-adds of Q K^T
  RegionErrors errors;
#pragma omp parallel for collapse(2) schedule(static) if (parallel_macs(work))
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      try {
        const int64_t g = h / group, os = H * hd;
        const float* Q = pq + b * s.sq * st.q + h * hd;   // [Sq, hd], row stride st.q
        const float* K = pk + b * s.sk * st.kv + g * hd;  // [Sk, hd], row stride st.kv
        const float* V = pv + b * s.sk * st.kv + g * hd;
        float* O = out.f32() + b * s.sq * os + h * hd;  // [Sq, hd], row stride H hd
        float* L = lse.f32() + (b * H + h) * s.sq;
        float* P = scratch(0, size_t(std::min(kBlock, s.sq) * s.sk));  // [rows, n] scores
        for (int64_t i0 = 0; i0 < s.sq; i0 += kBlock) {
          const int64_t rows = std::min(kBlock, s.sq - i0);
          const int64_t n = visible_keys(qp + i0, rows, kp, s.sk);
          gemm_serial(false, true, rows, n, hd, scale, Q + i0 * st.q, st.q, K, st.kv, 0.f, P, n);
          softmax_masked(P, rows, n, mask, b, i0, L + i0);
          gemm_serial(false, false, rows, hd, n, 1.f, P, n, V, st.kv, 0.f, O + i0 * os, os);
        }
      } catch (...) {
        errors.capture();
      }
    }
  }
  errors.rethrow("attention forward", std::min(kBlock, s.sq), s.sk);
}

void cpu_attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q,
                            const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                            const AttnPositions& pos, const AttnShape& s) {
  // Per (batch, kv head) so that the query heads sharing a KV head add into dK, dV in order;
  // per block of query rows, over the keys it sees:
  //   P = exp(S - lse), dV += P^T dO, dP = dO V^T, D = rowsum(dO * O),
  //   dS = P * (dP - D), dQ = scale dS K, dK += scale dS^T Q.
  const int64_t H = s.heads, KV = s.kv_heads, hd = s.head_dim, group = H / KV;
  const float scale = 1.f / std::sqrt(float(hd));
  check_attn_positions(s, pos);
  const int32_t *qp = pos.q_pos.i32(), *kp = pos.k_pos.i32();
  check_attn_mask(s, qp, kp);
  const AttnMaskView mask = attn_mask_view(s, pos);
  check_attn_qkv("attention_backward", s, q, k, v);
  check_attn_qkv("attention_backward", s, dq, dk, dv);
  const AttnStrides st = attn_strides(s);
  const float *pq = q.f32() + st.q_col, *pk = k.f32() + st.k_col, *pv = v.f32() + st.v_col;
  float *pdq = dq.f32() + st.q_col, *pdk = dk.f32() + st.k_col, *pdv = dv.f32() + st.v_col;
  const int64_t qs = st.q, ks = st.kv, os = H * hd;
  const int64_t work = s.batch * H * s.sq * s.sk * hd;  // multiply-adds of Q K^T
  RegionErrors errors;
#pragma omp parallel for collapse(2) schedule(static) if (parallel_macs(work))
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < KV; ++g) {
      try {
        const int64_t koff = b * s.sk * ks + g * hd;
        const float *K = pk + koff, *V = pv + koff;  // [Sk, hd], row stride ks
        float *dK = pdk + koff, *dV = pdv + koff;
        const size_t size = size_t(std::min(kBlock, s.sq) * s.sk);
        float *P = scratch(0, size), *dP = scratch(1, size);  // [rows, n]
        for (int64_t j = 0; j < s.sk; ++j) {
          std::fill(dK + j * ks, dK + j * ks + hd, 0.f);
          std::fill(dV + j * ks, dV + j * ks + hd, 0.f);
        }
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          const int64_t qoff = b * s.sq * qs + h * hd, ooff = b * s.sq * os + h * hd;
          const float *Q = pq + qoff, *O = out.f32() + ooff, *dO = dout.f32() + ooff;
          float* dQ = pdq + qoff;
          const float* L = lse.f32() + (b * H + h) * s.sq;
          for (int64_t i0 = 0; i0 < s.sq; i0 += kBlock) {
            const int64_t rows = std::min(kBlock, s.sq - i0);
            const int64_t n = visible_keys(qp + i0, rows, kp, s.sk);
            const float *Qb = Q + i0 * qs, *Ob = O + i0 * os, *dOb = dO + i0 * os;
            gemm_serial(false, true, rows, n, hd, scale, Qb, qs, K, ks, 0.f, P, n);
            for (int64_t i = 0; i < rows; ++i)
              exp_masked(P + i * n, n, row_mask(mask, b, i0 + i), L[i0 + i]);
            gemm_serial(true, false, n, hd, rows, 1.f, P, n, dOb, os, 1.f, dV, ks);
            gemm_serial(false, true, rows, n, hd, 1.f, dOb, os, V, ks, 0.f, dP, n);
            for (int64_t i = 0; i < rows; ++i) {
              const float *dOr = dOb + i * os, *Or = Ob + i * os;
              const float D = lane_sum<float>(hd, [=](int64_t c) { return dOr[c] * Or[c]; });
              for (int64_t j = 0; j < n; ++j) dP[i * n + j] = P[i * n + j] * (dP[i * n + j] - D);
            }
            gemm_serial(false, false, rows, hd, n, scale, dP, n, K, ks, 0.f, dQ + i0 * qs, qs);
            gemm_serial(true, false, n, hd, rows, scale, dP, n, Qb, qs, 1.f, dK, ks);
          }
        }
      } catch (...) {
        errors.capture();
      }
    }
  }
  errors.rethrow("attention backward", std::min(kBlock, s.sq), s.sk);
}

}  // namespace tetra
