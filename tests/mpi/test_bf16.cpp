// bf16 mixed precision on every layout class (DP with ZeRO 1, 2, 3; TP with and without
// SP; each pipeline schedule; CP; 4D), each against one rank training in bf16, within the
// bounds the closing note of [8/13] justifies; the validation loss under each pipeline
// schedule likewise; and bf16 against fp32 on one rank.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>

#include "layout_check.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

// bf16 keeps 8 significant bits, so one rounding moves a value by up to 2^-9 = 2e-3
// relative. A layout changes which partial sums get rounded (TP all-reduces bf16 partial
// sums, CP reduce-scatters bf16 dK/dV), so its activations differ from one rank's by a few
// roundings, as bf16's do from fp32's. Adam then spreads such differences into the weights:
// in its first steps each weight moves by about lr whatever its gradient's size, so where a
// gradient is near zero a rounding can flip the move. The bounds are twice the largest gaps
// measured over these layouts, which are the size of bf16's own gaps from fp32 on one rank
// (the second test case prints both): loss 1.4e-3, gradient 1.8e-2, weights 5.7e-2. A real
// fault (a missing reduction, a wrong slice) moves the loss by orders of magnitude more.
const Gaps kBf16Bound{3e-3, 4e-2, 1.2e-1};

struct Case {
  int ranks;
  std::vector<std::string> args;
};

}  // namespace

TEST_CASE("bf16: every layout class matches one rank in bf16") {
  const std::vector<Case> cases = {
      {4, {"--dp", "4", "--zero", "1"}},
      {4, {"--dp", "4", "--zero", "2"}},
      {4, {"--dp", "4", "--zero", "3"}},
      {2, {"--tp", "2"}},
      {4, {"--tp", "4", "--sp"}},
      {2, {"--pp", "2", "--schedule", "gpipe"}},
      {4, {"--pp", "4", "--schedule", "1f1b"}},
      {2, {"--pp", "2", "--schedule", "interleaved", "--vpp", "2"}},
      {2, {"--cp", "2"}},
      {8, {"--cp", "2", "--dp", "2", "--tp", "2", "--zero", "3"}},
      {16, {"--tp", "2", "--cp", "2", "--pp", "2", "--dp", "2", "--zero", "2", "--sp"}},
  };
  const std::vector<std::string> common = {"--dtype", "bf16",          "--global-batch",
                                           "8",       "--micro-batch", "1"};
  const RunResult ref = run_on(1, common, 4);
  Gaps worst;
  for (const Case& c : cases) {
    std::vector<std::string> args = common;
    args.insert(args.end(), c.args.begin(), c.args.end());
    const RunResult run = run_on(c.ranks, args, 4);
    if (world_rank() != 0) continue;
    std::string layout;
    for (const std::string& a : c.args) layout += a + " ";
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
  const std::vector<std::string> common = {"--dtype",        "bf16", "--global-batch", "8",
                                           "--micro-batch",  "1",    "--val-split",    "0.25",
                                           "--eval-batches", "2"};
  const RunResult ref = run_on(1, common, 2);
  const std::vector<Case> cases = {
      {2, {"--pp", "2", "--schedule", "gpipe"}},
      {4, {"--pp", "4", "--schedule", "1f1b"}},
      {2, {"--pp", "2", "--schedule", "interleaved", "--vpp", "2"}},
      {8,
       {"--pp", "2", "--dp", "2", "--tp", "2", "--sp", "--schedule", "interleaved", "--vpp", "2"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = common;
    args.insert(args.end(), c.args.begin(), c.args.end());
    const RunResult run = run_on(c.ranks, args, 2);
    if (world_rank() != 0) continue;
    std::string layout;
    for (const std::string& a : c.args) layout += a + " ";
    CAPTURE(layout);
    REQUIRE(ref.val_loss > 0);
    const double rel = std::abs(run.val_loss - ref.val_loss) / ref.val_loss;
    std::printf("bf16 validation %-45s %.6f vs one rank's %.6f (rel %.2e)\n", layout.c_str(),
                run.val_loss, ref.val_loss, rel);
    CHECK(rel <= kBf16Bound.loss);
    const std::string diff = compare(ref, run, kBf16Bound);
    CHECK_MESSAGE(diff.empty(), diff);
  }
}

TEST_CASE("bf16: one rank stays near fp32, and is not fp32") {
  const std::vector<std::string> batch = {"--global-batch", "8", "--micro-batch", "2"};
  std::vector<std::string> bf16 = batch;
  bf16.insert(bf16.end(), {"--dtype", "bf16"});
  const RunResult a = run_on(1, batch, 4), b = run_on(1, bf16, 4);
  if (world_rank() != 0) return;
  const Gaps g = gaps(a, b);
  std::printf("bf16 vs fp32, one rank: loss %.2e  grad %.2e  weight %.2e\n", g.loss, g.grad,
              g.weight);
  CHECK(g.loss > 0);  // bf16 really rounds
  CHECK(g.loss < 1e-2);
  // One rank, ZeRO-1: fp32 keeps 4 bytes a parameter; bf16 2 (weights) + 4 (master).
  CHECK(b.memory.params * 2 == a.memory.params * 3);
}
