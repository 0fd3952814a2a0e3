// The CPU backend's attention: per (batch, head) an Eigen product into a [Sq, Sk] score matrix,
// the softmax masked by positions and documents (backend/attn_mask.hpp), and the product with V;
// backward per (batch, KV head) so that the query heads sharing a KV head add into dK, dV in order.
#include "backend/cpu/cpu_attention.hpp"

#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <new>

namespace tetra {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
// A [rows, cols] block inside a wider row-major matrix (one head of a [T, H*hd] tensor).
using Strided = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;
using MStrided = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;

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

// Row-wise masked softmax of sequence b's scores P in place; masked entries become 0,
// L[i] = log-sum-exp.
void softmax_masked(RowMat& P, const AttnMaskView& mask, int64_t b, float* L) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < P.rows(); ++i) {
    float mx = neg_inf;
    for (int64_t j = 0; j < P.cols(); ++j) {
      if (!mask.visible(b, i, j)) P(i, j) = neg_inf;
      mx = std::max(mx, P(i, j));
    }
    float sum = 0;
    for (int64_t j = 0; j < P.cols(); ++j) {
      P(i, j) = P(i, j) == neg_inf ? 0.f : std::exp(P(i, j) - mx);
      sum += P(i, j);
    }
    for (int64_t j = 0; j < P.cols(); ++j) P(i, j) /= sum;
    L[i] = mx + std::log(sum);
  }
}

}  // namespace

void cpu_attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k,
                           const Tensor& v, const AttnPositions& pos, const AttnShape& s) {
  const int64_t H = s.heads, KV = s.kv_heads, hd = s.head_dim, group = H / KV;
  const float scale = 1.f / std::sqrt(float(hd));
  check_attn_positions(s, pos);
  check_attn_mask(s, pos.q_pos.i32(), pos.k_pos.i32());
  const AttnMaskView mask = attn_mask_view(s, pos);
  check_attn_qkv("attention_forward", s, q, k, v);
  const AttnStrides st = attn_strides(s);
  const float *pq = q.f32() + st.q_col, *pk = k.f32() + st.k_col, *pv = v.f32() + st.v_col;
  RegionErrors errors;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      try {
        const int64_t g = h / group;
        Strided Q(pq + b * s.sq * st.q + h * hd, s.sq, hd, Eigen::OuterStride<>(st.q));
        Strided K(pk + b * s.sk * st.kv + g * hd, s.sk, hd, Eigen::OuterStride<>(st.kv));
        Strided V(pv + b * s.sk * st.kv + g * hd, s.sk, hd, Eigen::OuterStride<>(st.kv));
        MStrided O(out.f32() + b * s.sq * H * hd + h * hd, s.sq, hd, Eigen::OuterStride<>(H * hd));
        RowMat P = scale * (Q * K.transpose());  // [Sq, Sk]
        float* L = lse.f32() + (b * H + h) * s.sq;
        softmax_masked(P, mask, b, L);
        O.noalias() = P * V;
      } catch (...) {
        errors.capture();
      }
    }
  }
  errors.rethrow("attention forward", s.sq, s.sk);
}

void cpu_attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q,
                            const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                            const AttnPositions& pos, const AttnShape& s) {
  // Per (batch, kv head) so that the query heads sharing a KV head add into dK, dV in order:
  //   P = exp(S - lse), dV += P^T dO, dP = dO V^T, D = rowsum(dO * O),
  //   dS = P * (dP - D), dQ = scale dS K, dK += scale dS^T Q.
  const int64_t H = s.heads, KV = s.kv_heads, hd = s.head_dim, group = H / KV;
  const float scale = 1.f / std::sqrt(float(hd));
  check_attn_positions(s, pos);
  check_attn_mask(s, pos.q_pos.i32(), pos.k_pos.i32());
  const AttnMaskView mask = attn_mask_view(s, pos);
  check_attn_qkv("attention_backward", s, q, k, v);
  check_attn_qkv("attention_backward", s, dq, dk, dv);
  const AttnStrides st = attn_strides(s);
  const float *pq = q.f32() + st.q_col, *pk = k.f32() + st.k_col, *pv = v.f32() + st.v_col;
  float *pdq = dq.f32() + st.q_col, *pdk = dk.f32() + st.k_col, *pdv = dv.f32() + st.v_col;
  const Eigen::OuterStride<> qs(st.q), ks(st.kv), os(H * hd);
  RegionErrors errors;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < KV; ++g) {
      try {
        const int64_t koff = b * s.sk * st.kv + g * hd;
        Strided K(pk + koff, s.sk, hd, ks), V(pv + koff, s.sk, hd, ks);
        MStrided dK(pdk + koff, s.sk, hd, ks), dV(pdv + koff, s.sk, hd, ks);
        dK.setZero();
        dV.setZero();
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          const int64_t qoff = b * s.sq * st.q + h * hd, ooff = b * s.sq * H * hd + h * hd;
          Strided Q(pq + qoff, s.sq, hd, qs), O(out.f32() + ooff, s.sq, hd, os);
          Strided dO(dout.f32() + ooff, s.sq, hd, os);
          MStrided dQ(pdq + qoff, s.sq, hd, qs);
          const float* L = lse.f32() + (b * H + h) * s.sq;
          RowMat P = scale * (Q * K.transpose());
          for (int64_t i = 0; i < s.sq; ++i)
            for (int64_t j = 0; j < s.sk; ++j)
              P(i, j) = mask.visible(b, i, j) ? std::exp(P(i, j) - L[i]) : 0.f;
          dV.noalias() += P.transpose() * dO;
          RowMat dP = dO * V.transpose();
          for (int64_t i = 0; i < s.sq; ++i) {
            const float D = dO.row(i).dot(O.row(i));
            for (int64_t j = 0; j < s.sk; ++j) dP(i, j) = P(i, j) * (dP(i, j) - D);
          }
          dQ.noalias() = scale * (dP * K);
          dK.noalias() += scale * (dP.transpose() * Q);
        }
      } catch (...) {
        errors.capture();
      }
    }
  }
  errors.rethrow("attention backward", s.sq, s.sk);
}

}  // namespace tetra
