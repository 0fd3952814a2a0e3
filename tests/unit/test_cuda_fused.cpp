// The CUDA kernels of two fusions of [22/29] against the CPU (test_fused_ops.cpp tests the CPU
// ops against the plain paths), in fp32 and in native bf16 against the CPU's bf16 reference,
// each run twice on the GPU for bit equality:
//   rmsnorm_backward_residual: the warp-per-row dx kernel adding the residual (either dtype);
//   ce_fused: one block per row, an online softmax per thread merged by a fixed tree.
// Tolerances (cuda_compare.hpp), relative to the reference's largest magnitude:
//   fp32 1e-5 for dx and dlogits, 1e-4 for the sums (both devices run an online softmax, in
//   different orders); bf16 outputs one rounding, 2^-7 + 1e-4.
// Without a GPU every case says so and passes.
#ifdef TETRA_HAVE_CUDA
#include <doctest/doctest.h>

#include <tuple>
#include <utility>

#include "../support/cuda_compare.hpp"
#include "backend/backend.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

Outputs run_norm_residual(Backend& be, DType t, int64_t T, int64_t d, bool rounded) {
  Inputs in(be);
  Floats w = randn(d, 31, 0.3f);
  for (float& x : w) x += 1.f;
  const Tensor x = in.act(t, randn(T * d, 32, 2.f), {T, d}), wt = in.act(t, w, {d}),
               y = in.act(t, Floats(T * d, 0.f), {T, d}), rstd = in.zeros({T}),
               dy = in.act(t, randn(T * d, 33), {T, d}),
               g = in.act(t, randn(T * d, 34, 3.f), {T, d}),
               dx = in.act(t, Floats(T * d, 0.f), {T, d}), dw = in.f32(randn(d, 35), {d});
  be.rmsnorm_forward(y, rstd, x, wt, 1e-5f);
  be.rmsnorm_backward_residual(dx, dw, dy, x, wt, rstd, g);
  if (rounded) return {{"rmsnorm_backward_residual dx", get(be, dx)}};
  return {{"rmsnorm_backward_residual dw (fp32, accumulated)", get(be, dw)}};
}

// Padding columns (valid < V), targets at both ends of the valid columns and in the padding,
// a row rising monotonically (a new maximum at every column).
Outputs run_ce_fused(Backend& be, DType t, int64_t T, int64_t V, int64_t valid, bool stats) {
  Inputs in(be);
  Floats l = randn(T * V, 62, 3.f);
  for (int64_t j = 0; j < V; ++j) l[V + j] = -5.f + 10.f * float(j) / float(V);
  Ints tgt = randint(T, 61, 0, int32_t(valid));
  tgt[0] = 0;
  tgt[1] = int32_t(valid - 1);
  tgt[2] = int32_t(valid);  // in the padding: no onehot, target logit 0
  const Tensor logits = in.act(t, l, {T, V}), targets = in.i32(tgt, {T}), row_max = in.zeros({T}),
               st = in.zeros({T, 2});
  be.ce_fused(logits, row_max, st, targets, valid, 1.f / float(T));
  if (stats) return {{"ce_fused row_max", get(be, row_max)}, {"ce_fused stats", get(be, st)}};
  return {{"ce_fused dlogits (in place)", get(be, logits)}};
}

}  // namespace

TEST_CASE("cuda: rmsnorm backward with the residual added, fp32 and bf16") {
  SKIP_WITHOUT_GPU();
  for (auto [T, d] : {std::pair<int64_t, int64_t>{33, 300}, {200, 64}, {5, 1024}}) {
    for (bool rounded : {true, false}) {
      check_against_cpu(
          [&](Backend& be) { return run_norm_residual(be, DType::F32, T, d, rounded); }, 1e-5);
      check_bf16_against_cpu(
          [&](Backend& be) { return run_norm_residual(be, DType::BF16, T, d, rounded); },
          rounded ? kOneRounding : kFp32);
    }
  }
}

TEST_CASE("cuda: the fused classifier, fp32 and bf16 logits") {
  SKIP_WITHOUT_GPU();
  // A small vocabulary with padding, fewer valid columns than threads, and the benchmark's
  // 32000 columns.
  for (auto [T, V, valid] :
       {std::tuple<int64_t, int64_t, int64_t>{9, 1000, 963}, {4, 300, 100}, {3, 32000, 32000}}) {
    CAPTURE(V);
    for (bool stats : {true, false}) {
      check_against_cpu(
          [&](Backend& be) { return run_ce_fused(be, DType::F32, T, V, valid, stats); },
          stats ? kFp32 : 1e-5);
      check_bf16_against_cpu(
          [&](Backend& be) { return run_ce_fused(be, DType::BF16, T, V, valid, stats); },
          stats ? kFp32 : kOneRounding);
    }
  }
}

#endif  // TETRA_HAVE_CUDA
