// Data parallelism with ZeRO-1/2/3 against a single rank: losses, step-0 gradients and
// final weights; the ring byte volume of every step; the per-rank persistent memory.
#include <doctest/doctest.h>

#include <cmath>

#include "layout_check.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

constexpr int kSteps = 5;

}  // namespace

TEST_CASE("dp: DP 2, 4, 8 x ZeRO 1, 2, 3 x 1-4 micro-batches match one rank") {
  REQUIRE(world_size() >= 8);
  std::map<int, RunResult> reference;  // by global batch
  int m = 0;
  for (int dp : {2, 4, 8}) {
    for (int zero : {1, 2, 3}) {
      m = m % 4 + 1;  // cycles 1, 2, 3, 4 over the cases
      const int G = dp * m;
      if (!reference.count(G)) reference[G] = run_on(tiny_model(G), kSteps);
      TrainConfig c = laid_out(tiny_model(G), 1, 1, 1, dp);
      c.optimizer.zero = zero;
      const RunResult run = run_on(c, kSteps);
      if (world_rank() != 0) continue;
      CAPTURE(dp);
      CAPTURE(zero);
      CAPTURE(m);
      CHECK(run.micro_batches == m);
      const std::string diff = compare(reference[G], run);
      CHECK_MESSAGE(diff.empty(), diff);

      // Ring volume over dp_cp, per step and rank: one reduce-scatter and one all-gather of
      // the padded flat parameters (ZeRO-1/2); ZeRO-3 gathers before every forward and every
      // backward of every micro-batch instead of after the update.
      const double full = 4.0 * double(run.padded_params), ring = double(dp - 1) / dp;
      const double expected = zero < 3 ? 2 * ring * full : (1 + 2 * m) * ring * full;
      for (const StepResult& s : run.steps)
        CHECK(s.comm.at("dp_cp").bytes == doctest::Approx(expected).epsilon(1e-12));
    }
  }
}

TEST_CASE("dp: persistent Adam, gradient and ZeRO-3 parameter bytes shrink as 1/DP") {
  std::vector<double> peak;  // the step's peak memory at DP 8, by ZeRO stage
  for (int zero : {1, 2, 3}) {
    TrainConfig one = tiny_model(8);
    one.optimizer.zero = zero;
    const RunResult r1 = run_on(one, 1), r8 = run_on(laid_out(one, 1, 1, 1, 8), 1);
    if (world_rank() != 0) continue;
    CAPTURE(zero);
    const int64_t n = r1.padded_params;          // unpadded at DP 1
    const int64_t shard = r8.padded_params / 8;  // ceil(n_unit / 8) summed over units
    CHECK(shard * 8 >= n);
    CHECK(shard * 8 - n < 8 * 6);  // at most 7 padding elements per unit (6 units)
    CHECK(r1.memory.adam == 2 * 4 * n);
    CHECK(r8.memory.adam == 2 * 4 * shard);
    if (zero == 1) {
      CHECK(r8.memory.grads == 4 * (r8.padded_params + shard));  // full grads kept, + shard
    } else {
      CHECK(r8.memory.grads == 4 * shard);
    }
    CHECK(r8.memory.params == (zero == 3 ? 4 * shard : 4 * r8.padded_params));
    peak.push_back(r8.steps.at(0).peak_memory_bytes);
  }
  // The step's peak (activations included) falls with each stage, as the metrics show it.
  if (world_rank() == 0) {
    CHECK(peak[0] > peak[1]);
    CHECK(peak[1] > peak[2]);
  }
}

TEST_CASE("dp: wgrad_beta0 and grad_alias give the plain path's bits over DP, TP, CP, ZeRO 1-3") {
  REQUIRE(world_size() >= 8);
  struct Case {
    int tp, cp, dp, zero, micro_batches;
    bool sp;
    const char* dtype;
  };
  // dp_cp > 1 (only wgrad_beta0 acts) and dp_cp = 1 beside TP (both act; SP sums the norms'
  // gradients over TP in the aliased buffer).
  for (const Case& k : {Case{1, 1, 4, 1, 2, false, "fp32"}, Case{2, 1, 2, 2, 2, true, "bf16"},
                        Case{1, 2, 2, 3, 1, false, "fp32"}, Case{2, 1, 1, 1, 3, true, "bf16"},
                        Case{4, 1, 1, 3, 2, false, "fp32"}, Case{2, 2, 1, 2, 2, false, "fp32"}}) {
    TrainConfig c = laid_out(tiny_model(k.dp * k.micro_batches), k.tp, k.cp, 1, k.dp);
    c.optimizer.zero = k.zero;
    c.layout.sp = k.sp;
    c.device.dtype = k.dtype;
    const std::string diff = grad_fusions_diff(c, 3);
    if (world_rank() != 0) continue;
    CAPTURE(describe(c));
    CHECK_MESSAGE(diff.empty(), diff);
  }
}
