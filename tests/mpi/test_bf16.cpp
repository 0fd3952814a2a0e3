// bf16 mixed precision on every layout class (DP with ZeRO 1, 2, 3; TP with and without
// SP; each pipeline schedule; CP; 4D), each against one rank training in bf16, within the
// bounds the closing note of [8/13] justifies; the validation loss under each pipeline
// schedule likewise; and bf16 against fp32 on one rank.
#include <doctest/doctest.h>

#include <cstdio>

#include "layout_check.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

// A layout and what it turns on: ZeRO stage, SP, the schedule and V.
struct Case {
  int tp, cp, pp, dp;
  int zero = 1;
  bool sp = false;
  const char* schedule = "1f1b";
  int vpp = 1;
};

// common laid out as the case says.
TrainConfig laid_out(const TrainConfig& common, const Case& l) {
  TrainConfig c = tetra::test::laid_out(common, l.tp, l.cp, l.pp, l.dp);
  c.optimizer.zero = l.zero;
  c.layout.sp = l.sp;
  c.layout.schedule = l.schedule;
  c.layout.vpp = l.vpp;
  return c;
}

}  // namespace

TEST_CASE("bf16: every layout class matches one rank in bf16") {
  const std::vector<Case> cases = {
      {1, 1, 1, 4, 1},
      {1, 1, 1, 4, 2},
      {1, 1, 1, 4, 3},
      {2, 1, 1, 1},
      {4, 1, 1, 1, 1, true},
      {1, 1, 2, 1, 1, false, "gpipe"},
      {1, 1, 4, 1, 1, false, "1f1b"},
      {1, 1, 2, 1, 1, false, "interleaved", 2},
      {1, 2, 1, 1},
      {2, 2, 1, 2, 3},
      {2, 2, 2, 2, 2, true},
  };
  TrainConfig common = tiny_model(8);
  common.device.dtype = "bf16";
  const RunResult ref = run_on(common, 4);
  Gaps worst;
  for (const Case& l : cases) {
    const TrainConfig c = laid_out(common, l);
    const RunResult run = run_on(c, 4);
    if (world_rank() != 0) continue;
    const std::string layout = describe(c);
    CAPTURE(layout);
    const Gaps g = gaps(ref, run);
    std::printf("bf16 %-55s loss %.2e  grad %.2e  weight %.2e\n", layout.c_str(), g.loss, g.grad,
                g.weight);
    worst = {std::max(worst.loss, g.loss), std::max(worst.grad, g.grad),
             std::max(worst.weight, g.weight)};
    const std::string diff = compare(ref, run, kBf16Bound);
    CHECK_MESSAGE(diff.empty(), diff);
  }
  if (world_rank() == 0)
    std::printf("bf16 largest gaps: loss %.2e  grad %.2e  weight %.2e\n", worst.loss, worst.grad,
                worst.weight);
}

TEST_CASE("bf16: the validation loss under each pipeline schedule matches one rank in bf16") {
  // Evaluation runs each schedule forward only and sends bf16 activations between stages, as
  // training does (it once sent fp32 ones, which the next stage cannot receive). After two
  // steps, so that the weights are trained ones.
  TrainConfig common = tiny_model(8);
  common.device.dtype = "bf16";
  common.data.val_split = 0.25;
  common.data.eval_batches = 2;
  const RunResult ref = run_on(common, 2);
  const std::vector<Case> cases = {
      {1, 1, 2, 1, 1, false, "gpipe"},
      {1, 1, 4, 1, 1, false, "1f1b"},
      {1, 1, 2, 1, 1, false, "interleaved", 2},
      {2, 1, 2, 2, 1, true, "interleaved", 2},
      {1, 1, 2, 1, 1, false, "zb-v", 2},
  };
  for (const Case& l : cases) {
    const TrainConfig c = laid_out(common, l);
    const RunResult run = run_on(c, 2);
    if (world_rank() != 0) continue;
    const std::string layout = describe(c);
    CAPTURE(layout);
    REQUIRE(ref.val_loss > 0);
    const double rel = loss_gap(ref.val_loss, run.val_loss);
    std::printf("bf16 validation %-45s %.6f vs one rank's %.6f (rel %.2e)\n", layout.c_str(),
                run.val_loss, ref.val_loss, rel);
    CHECK(rel <= kBf16Bound.loss);
    const std::string diff = compare(ref, run, kBf16Bound);
    CHECK_MESSAGE(diff.empty(), diff);
  }
}

TEST_CASE("bf16: one rank stays near fp32, and is not fp32") {
  const TrainConfig fp32 = tiny_model(8, 2);
  TrainConfig bf16 = fp32;
  bf16.device.dtype = "bf16";
  const RunResult a = run_on(fp32, 4), b = run_on(bf16, 4);
  if (world_rank() != 0) return;
  const Gaps g = gaps(a, b);
  std::printf("bf16 vs fp32, one rank: loss %.2e  grad %.2e  weight %.2e\n", g.loss, g.grad,
              g.weight);
  CHECK(g.loss > 0);  // bf16 really rounds
  CHECK(g.loss < 1e-2);
  // One rank, ZeRO-1: fp32 keeps 4 bytes a parameter; bf16 2 (weights) + 4 (master).
  CHECK(b.memory.params * 2 == a.memory.params * 3);
}
