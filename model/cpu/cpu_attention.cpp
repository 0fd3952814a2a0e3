// The CPU backend's attention: per (batch, head) an Eigen product into a [Sq, Sk] score matrix,
// the causal softmax by positions, and the product with V; backward per (batch, KV head) so that
// the query heads sharing a KV head add into dK, dV in order.
#include "model/cpu/cpu_attention.hpp"

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
           "] fp32 score matrix per thread does not fit; shorten --seq-len or raise --cp");
    }
  }

 private:
  std::exception_ptr first_;
};

// Row-wise causal softmax of P in place; masked entries become 0, L[i] = log-sum-exp.
void softmax_causal(RowMat& P, const int32_t* qp, const int32_t* kp, float* L) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < P.rows(); ++i) {
    float mx = neg_inf;
    for (int64_t j = 0; j < P.cols(); ++j) {
      if (kp[j] > qp[i]) P(i, j) = neg_inf;
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
                           const Tensor& v, const Tensor& q_pos, const Tensor& k_pos,
                           const AttnShape& s) {
  const int64_t H = s.heads, KV = s.kv_heads, hd = s.head_dim, group = H / KV;
  const float scale = 1.f / std::sqrt(float(hd));
  const int32_t *qp = q_pos.i32(), *kp = k_pos.i32();
  check_attn_mask(s, qp, kp);
  RegionErrors errors;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      try {
        const int64_t g = h / group;
        Strided Q(q.f32() + b * s.sq * H * hd + h * hd, s.sq, hd, Eigen::OuterStride<>(H * hd));
        Strided K(k.f32() + b * s.sk * KV * hd + g * hd, s.sk, hd, Eigen::OuterStride<>(KV * hd));
        Strided V(v.f32() + b * s.sk * KV * hd + g * hd, s.sk, hd, Eigen::OuterStride<>(KV * hd));
        MStrided O(out.f32() + b * s.sq * H * hd + h * hd, s.sq, hd, Eigen::OuterStride<>(H * hd));
        RowMat P = scale * (Q * K.transpose());  // [Sq, Sk]
        float* L = lse.f32() + (b * H + h) * s.sq;
        softmax_causal(P, qp, kp, L);
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
                            const Tensor& q_pos, const Tensor& k_pos, const AttnShape& s) {
  // Per (batch, kv head) so that the query heads sharing a KV head add into dK, dV in order:
  //   P = exp(S - lse), dV += P^T dO, dP = dO V^T, D = rowsum(dO * O),
  //   dS = P * (dP - D), dQ = scale dS K, dK += scale dS^T Q.
  const int64_t H = s.heads, KV = s.kv_heads, hd = s.head_dim, group = H / KV;
  const float scale = 1.f / std::sqrt(float(hd));
  const int32_t *qp = q_pos.i32(), *kp = k_pos.i32();
  check_attn_mask(s, qp, kp);
  const Eigen::OuterStride<> qs(H * hd), ks(KV * hd);
  RegionErrors errors;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < KV; ++g) {
      try {
        Strided K(k.f32() + b * s.sk * KV * hd + g * hd, s.sk, hd, ks);
        Strided V(v.f32() + b * s.sk * KV * hd + g * hd, s.sk, hd, ks);
        MStrided dK(dk.f32() + b * s.sk * KV * hd + g * hd, s.sk, hd, ks);
        MStrided dV(dv.f32() + b * s.sk * KV * hd + g * hd, s.sk, hd, ks);
        dK.setZero();
        dV.setZero();
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          const int64_t off = b * s.sq * H * hd + h * hd;
          Strided Q(q.f32() + off, s.sq, hd, qs), O(out.f32() + off, s.sq, hd, qs);
          Strided dO(dout.f32() + off, s.sq, hd, qs);
          MStrided dQ(dq.f32() + off, s.sq, hd, qs);
          const float* L = lse.f32() + (b * H + h) * s.sq;
          RowMat P = scale * (Q * K.transpose());
          for (int64_t i = 0; i < s.sq; ++i)
            for (int64_t j = 0; j < s.sk; ++j)
              P(i, j) = kp[j] <= qp[i] ? std::exp(P(i, j) - L[i]) : 0.f;
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
