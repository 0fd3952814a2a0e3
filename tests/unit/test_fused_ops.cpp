// Two fusions of [22/29] on the CPU backend (the reference the CUDA kernels are compared with
// on a GPU), each against the composition of the ops it replaces, in fp32 and under the
// mixed-precision wrapper (the bf16 reference):
//   rmsnorm_backward_residual  = rmsnorm_backward, then add: bit for bit in fp32 (the same
//                                arithmetic); in bf16 the sum rounded once.
//   ce_fused                   = ce_row_max, ce_stats, ce_backward: the same row maxima and
//                                target logits, the sum of exponentials (online softmax) within
//                                kSumTol, dlogits within kSumTol of the scale.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "../support/host_io.hpp"
#include "backend/backend.hpp"
#include "backend/op_math.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

// The online softmax's sum against the two-pass one (and each against the sum in double), as a
// relative difference. A priori, either sum of n = 963 positive terms in fp32 is within about
// (n + 2) u of the exact one (u = 2^-24: 5.8e-5; the rounding of each argument l - max is exact
// or tiny for the terms that count), so the two differ by at most 1.2e-4. Measured on these
// rows (random, a wide row, one rising at every column, so rescaled at every column, and one
// falling): at most 4.3e-7 with fp32 logits, 7.6e-7 with bf16 ones. kSumTol sits 13 times above
// the measured and 12 below the a priori bound: the inputs are seeded, so the check is
// deterministic, and a logit left out or counted twice moves a sum by its share, about 1e-3.
constexpr double kSumTol = 1e-5;
constexpr double kBf16Ulp = 1.0 / 128;  // one bf16 ulp is at most 2^-7 of the value

// ---- RMSNorm's backward with the residual ----

struct NormInputs {
  int64_t T = 37, d = 300;
  Floats x = randn(T * d, 1, 2.f), w = randn(d, 2, 0.3f), dy = randn(T * d, 3),
         res = randn(T * d, 4, 3.f), dw0 = randn(d, 5);
  NormInputs() {
    for (float& v : w) v += 1.f;
  }
};

// 1/rms of x's rows, by the CPU backend.
Floats rstd_of(const NormInputs& in, const Floats& x) {
  auto cpu = make_cpu_backend(1);
  Io io(*cpu);
  const Tensor y = io.put(Floats(x.size()), {in.T, in.d}), r = io.put(Floats(in.T), {in.T});
  cpu->rmsnorm_forward(y, r, io.put(x, {in.T, in.d}), io.put(in.w, {in.d}), 1e-5f);
  return io.get(r);
}

// ---- The fused classifier ----

struct CeInputs {
  int64_t T = 8, V = 1000, valid = 963;  // columns from 963 on pad the vocabulary
  float scale = 1.f / 8;
  Floats logits = randn(T * V, 11, 3.f);
  std::vector<int32_t> targets = {0, 962, 5, 963, 400, 999, 17, 250};  // 963, 999: padding
  CeInputs() {
    for (int64_t j = 0; j < V; ++j) {
      logits[2 * V + j] = -5.f + 10.f * float(j) / float(V);  // rising: a new maximum each column
      logits[3 * V + j] = 5.f - 10.f * float(j) / float(V);   // falling: one maximum
    }
    for (int64_t j = 0; j < V; ++j) logits[6 * V + j] *= 4.f;  // a wide row
  }
  // Row t's sum of exp(l - max) over the valid columns, in double.
  double exact_sum(int64_t t, const Floats& l) const {
    const float* r = l.data() + t * V;
    const double m = *std::max_element(r, r + valid);
    double s = 0;
    for (int64_t j = 0; j < valid; ++j) s += std::exp(double(r[j]) - m);
    return s;
  }
};

struct CeOut {
  Floats row_max, stats, dlogits;
};

CeOut ce_pieces(Backend& be, const CeInputs& in, DType t) {
  Io io(be);
  const Tensor l = io.put(in.logits, {in.T, in.V}, t), y = io.ints(in.targets),
               m = io.put(Floats(in.T), {in.T}), s = io.put(Floats(2 * in.T), {in.T, 2});
  be.ce_row_max(m, l, in.valid);
  be.ce_stats(s, l, m, y, 0, in.valid);
  be.ce_backward(l, m, s, y, 0, in.valid, in.scale);
  return {io.get(m), io.get(s), io.get(l)};
}
CeOut ce_fused(Backend& be, const CeInputs& in, DType t) {
  Io io(be);
  const Tensor l = io.put(in.logits, {in.T, in.V}, t), y = io.ints(in.targets),
               m = io.put(Floats(in.T), {in.T}), s = io.put(Floats(2 * in.T), {in.T, 2});
  be.ce_fused(l, m, s, y, in.valid, in.scale);
  return {io.get(m), io.get(s), io.get(l)};
}

// Pieces and fused agree: maxima and target logits bit for bit, sums within kSumTol (and each
// within kSumTol of the exact sum), per-token losses within kSumTol, dlogits within kSumTol of
// the scale (plus one bf16 ulp of the value when rounded), the padding columns 0.
void check_ce(const CeInputs& in, const Floats& logits, const CeOut& a, const CeOut& b,
              double ulp) {
  CHECK(same_bits(a.row_max, b.row_max));
  double worst = 0;
  for (int64_t t = 0; t < in.T; ++t) {
    CAPTURE(t);
    CHECK(a.stats[2 * t + 1] == b.stats[2 * t + 1]);  // the target logit, or 0
    const double sa = a.stats[2 * t], sb = b.stats[2 * t], exact = in.exact_sum(t, logits);
    worst = std::max(worst, std::abs(sb - sa) / sa);
    CHECK(std::abs(sb - sa) <= kSumTol * sa);
    CHECK(std::abs(sb - exact) <= kSumTol * exact);
    CHECK(std::abs(sa - exact) <= kSumTol * exact);
    const double la = std::log(sa) + a.row_max[t] - a.stats[2 * t + 1],
                 lb = std::log(sb) + b.row_max[t] - b.stats[2 * t + 1];
    CHECK(std::abs(la - lb) <= kSumTol);
    for (int64_t j = 0; j < in.V; ++j) {
      const float ga = a.dlogits[t * in.V + j], gb = b.dlogits[t * in.V + j];
      if (j >= in.valid) {
        CHECK(gb == 0.f);
        CHECK(logits[t * in.V + j] != 0.f);  // the padding held logits before
        continue;
      }
      CHECK(std::abs(ga - gb) <= kSumTol * in.scale + ulp * std::max(std::abs(ga), std::abs(gb)));
    }
  }
  MESSAGE("largest relative difference of the sums of exponentials: ", worst);
}

}  // namespace

TEST_CASE("ops: rmsnorm backward with the residual added is rmsnorm_backward, then add") {
  const NormInputs in;
  const Floats rstd = rstd_of(in, in.x);
  for (auto& be : fp32_backends()) {
    Io io(*be);
    const Tensor x = io.put(in.x, {in.T, in.d}), w = io.put(in.w, {in.d}),
                 dy = io.put(in.dy, {in.T, in.d}), g = io.put(in.res, {in.T, in.d}),
                 r = io.put(rstd, {in.T}), dx1 = io.put(Floats(in.x.size()), {in.T, in.d}),
                 dx2 = io.put(Floats(in.x.size()), {in.T, in.d}), dw1 = io.put(in.dw0, {in.d}),
                 dw2 = io.put(in.dw0, {in.d});
    be->rmsnorm_backward(dx1, dw1, dy, x, w, r);
    be->add(dx1, g);
    be->rmsnorm_backward_residual(dx2, dw2, dy, x, w, r, g);
    CHECK(same_bits(io.get(dx1), io.get(dx2)));
    CHECK(same_bits(io.get(dw1), io.get(dw2)));
    CHECK_THROWS_AS(be->rmsnorm_backward_residual(dx2, dw2, dy, x, w, r, dx2), Error);
  }

  // bf16 (the wrapper): dx = round(a + g), a the fp32 dx of the widened inputs, against the
  // plain path's round(round(a) + g).
  const Floats xb = round_bf16(in.x), wb = round_bf16(in.w), dyb = round_bf16(in.dy),
               gb = round_bf16(in.res), rstd_b = rstd_of(in, xb);
  auto cpu = make_cpu_backend(1);
  Io ref(*cpu);
  const Tensor a = ref.put(Floats(in.x.size()), {in.T, in.d}), dwr = ref.put(in.dw0, {in.d});
  cpu->rmsnorm_backward(a, dwr, ref.put(dyb, {in.T, in.d}), ref.put(xb, {in.T, in.d}),
                        ref.put(wb, {in.d}), ref.put(rstd_b, {in.T}));
  const Floats av = ref.get(a);
  auto mixed = make_mixed_precision_backend(make_cpu_backend(1));
  Io io(*mixed);
  constexpr DType B = DType::BF16;
  const Tensor x = io.put(in.x, {in.T, in.d}, B), w = io.put(in.w, {in.d}, B),
               dy = io.put(in.dy, {in.T, in.d}, B), g = io.put(in.res, {in.T, in.d}, B),
               r = io.put(rstd_b, {in.T}), dx1 = io.put(Floats(in.x.size()), {in.T, in.d}, B),
               dx2 = io.put(Floats(in.x.size()), {in.T, in.d}, B), dw1 = io.put(in.dw0, {in.d}),
               dw2 = io.put(in.dw0, {in.d});
  mixed->rmsnorm_backward(dx1, dw1, dy, x, w, r);
  mixed->add(dx1, g);
  mixed->rmsnorm_backward_residual(dx2, dw2, dy, x, w, r, g);
  const Floats plain = io.get(dx1), fused = io.get(dx2);
  CHECK(same_bits(io.get(dw1), io.get(dw2)));
  CHECK(same_bits(io.get(dw2), ref.get(dwr)));
  int differ = 0;
  for (size_t i = 0; i < fused.size(); ++i) {
    CHECK(fused[i] == round_bf16(av[i] + gb[i]));
    const double bound =
        std::abs(av[i]) / 256 + kBf16Ulp * std::max(std::abs(fused[i]), std::abs(plain[i]));
    CHECK(std::abs(fused[i] - plain[i]) <= bound);
    differ += fused[i] != plain[i];
  }
  CHECK(differ > 0);  // the single rounding is observable on these inputs
  MESSAGE("bf16 dx: ", differ, " of ", fused.size(), " differ from rmsnorm_backward, then add");
}

TEST_CASE("op_math: the online softmax's merge") {
  const float m = 1.5f, s = 3.25f;
  float m1 = -INFINITY, s1 = 0.f;
  op::softmax_merge(m1, s1, m, s);  // into nothing
  CHECK(m1 == m);
  CHECK(s1 == s);
  op::softmax_merge(m1, s1, -INFINITY, 0.f);  // nothing into it
  CHECK(m1 == m);
  CHECK(s1 == s);
  float me = -INFINITY, se = 0.f;
  op::softmax_merge(me, se, -INFINITY, 0.f);  // nothing into nothing: no NaN
  CHECK(me == -INFINITY);
  CHECK(se == 0.f);
  // Either order gives the same bits (a butterfly's two lanes agree).
  for (float m2 : {0.25f, 1.5f, 4.f}) {
    float ma = m, sa = s, mb = m2, sb = 2.f;
    op::softmax_merge(ma, sa, m2, 2.f);
    op::softmax_merge(mb, sb, m, s);
    CHECK(ma == mb);
    CHECK(sa == sb);
  }
  // A row split anywhere and merged: the same maximum, the sum within kSumTol of the exact one.
  const Floats l = randn(500, 21, 3.f);
  const double mx = *std::max_element(l.begin(), l.end());
  double exact = 0;
  for (float v : l) exact += std::exp(double(v) - mx);
  for (size_t cut : {size_t(0), size_t(1), size_t(250), size_t(499), size_t(500)}) {
    float ma = -INFINITY, sa = 0.f, mb = -INFINITY, sb = 0.f;
    for (size_t j = 0; j < cut; ++j) op::softmax_add(ma, sa, l[j]);
    for (size_t j = cut; j < l.size(); ++j) op::softmax_add(mb, sb, l[j]);
    op::softmax_merge(ma, sa, mb, sb);
    CAPTURE(cut);
    CHECK(ma == float(mx));
    CHECK(std::abs(sa - exact) <= kSumTol * exact);
  }
}

TEST_CASE("ops: the fused classifier against ce_row_max, ce_stats and ce_backward") {
  const CeInputs in;
  for (auto& be : fp32_backends()) {
    CAPTURE(be->name());
    check_ce(in, in.logits, ce_pieces(*be, in, DType::F32), ce_fused(*be, in, DType::F32), 0);
  }
  // bf16 logits through the wrapper: the statistics in fp32 from the same rounded logits, each
  // dlogit rounded once from values within kSumTol of the scale of each other.
  auto mixed = make_mixed_precision_backend(make_cpu_backend(1));
  const CeOut fused = ce_fused(*mixed, in, DType::BF16);
  check_ce(in, round_bf16(in.logits), ce_pieces(*mixed, in, DType::BF16), fused, kBf16Ulp);
  // ...and they are the fp32 op's on the rounded logits, dlogits rounded once.
  CeInputs rounded = in;
  rounded.logits = round_bf16(in.logits);
  auto cpu = make_cpu_backend(1);
  const CeOut wide = ce_fused(*cpu, rounded, DType::F32);
  CHECK(same_bits(fused.row_max, wide.row_max));
  CHECK(same_bits(fused.stats, wide.stats));
  CHECK(same_bits(fused.dlogits, round_bf16(wide.dlogits)));
}
