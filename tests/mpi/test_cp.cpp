// Context parallelism alone and composed with TP, PP and DP, up to the full
// TP 2 x CP 2 x PP 2 x DP 2 on 16 ranks, against a single rank.
#include <doctest/doctest.h>

#include <array>

#include "backend/fusions.hpp"
#include "layout_check.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

// A layout and what it turns on: ZeRO stage, SP, --recompute full, the schedule and V.
struct Layout4 {
  int tp, cp, pp, dp;
  int zero = 1;
  bool sp = false, recompute = false;
  const char* schedule = "1f1b";
  int vpp = 1;
};

}  // namespace

TEST_CASE("cp: CP 2 and 4, alone and in 4D layouts, match one rank") {
  const std::vector<Layout4> layouts = {
      {1, 2, 1, 1},
      {1, 4, 1, 1},
      {2, 2, 1, 1, 1, true},
      {1, 2, 1, 2, 3},
      {1, 2, 2, 1, 1, false, false, "1f1b"},
      {2, 4, 1, 1, 1, true, true},
      {1, 4, 2, 2, 2},
      {2, 2, 2, 2, 1},
      {2, 2, 2, 2, 3, true, true},
      {2, 2, 2, 2, 1, false, false, "interleaved", 2},
      {1, 2, 2, 2, 3, false, true, "interleaved", 2},
  };
  std::map<int, RunResult> reference;  // by global batch
  for (const Layout4& l : layouts) {
    const int m = 2 * l.pp;  // micro-batches per DP rank: PP for 1f1b, a multiple for interleaved
    const int G = l.dp * m;
    if (!reference.count(G)) reference[G] = run_on(tiny_model(G), 5);
    TrainConfig c = laid_out(tiny_model(G), l.tp, l.cp, l.pp, l.dp);
    c.optimizer.zero = l.zero;
    c.layout.sp = l.sp;
    c.optimizer.recompute = l.recompute;
    c.layout.schedule = l.schedule;
    c.layout.vpp = l.vpp;
    const RunResult run = run_on(c, 5);
    if (world_rank() != 0) continue;
    const std::string name = describe(c);
    CAPTURE(name);
    double worst = 0;
    for (size_t s = 0; s < run.losses.size(); ++s)
      worst = std::max(worst, std::abs(run.losses[s] - reference[G].losses[s]) /
                                  std::abs(reference[G].losses[s]));
    MESSAGE(name << ": largest relative loss difference " << worst);
    const std::string diff = compare(reference[G], run);
    CHECK_MESSAGE(diff.empty(), diff);
  }
}

TEST_CASE("cp: the validation loss of 4D layouts equals one rank's") {
  // Forward only through each layout's pipeline schedule, on the held-out quarter of the
  // data; after two steps, so that the weights are trained ones.
  TrainConfig text = tiny_model(8);
  text.data.val_split = 0.25;
  text.data.eval_batches = 2;
  const RunResult ref = run_on(text, 2);
  const std::vector<Layout4> layouts = {
      {2, 2, 2, 2, 3},
      {2, 2, 2, 2, 1, true, false, "interleaved", 2},
      {1, 1, 4, 2, 1, false, false, "gpipe"},
  };
  for (const Layout4& l : layouts) {
    TrainConfig c = laid_out(text, l.tp, l.cp, l.pp, l.dp);
    c.optimizer.zero = l.zero;
    c.layout.sp = l.sp;
    c.layout.schedule = l.schedule;
    c.layout.vpp = l.vpp;
    const RunResult run = run_on(c, 2);
    if (world_rank() != 0) continue;
    const std::string name = describe(c);
    CAPTURE(name);
    REQUIRE(ref.val_loss > 0);
    const double rel = loss_gap(ref.val_loss, run.val_loss);
    MESSAGE(name << ": validation loss " << run.val_loss << " vs one rank's " << ref.val_loss
                 << ", relative difference " << rel);
    CHECK(rel <= match_bounds("fp32").loss);
  }
}

TEST_CASE("cp: RoPE in place gives bitwise the split copies' run, CP 1 and 2, fp32 and bf16") {
  // Fusion::RopeInPlace (at CP 1 q, k, v read from qkv; at CP 2 q, with k and v copied out of
  // it for the gather and their gradients copied back into dqkv) against the copies it
  // replaces: the same arithmetic, so the same bits (every bound 0).
  const std::vector<std::array<int, 2>> layouts = {{1, 1}, {1, 2}, {2, 2}};  // TP x CP
  for (const char* dtype : {"fp32", "bf16"})
    for (const auto& [tp, cp] : layouts) {
      TrainConfig c = laid_out(tiny_model(2), tp, cp, 1, 1);
      c.device.dtype = dtype;
      set_unfused("rope_in_place");
      const RunResult split = run_on(c, 3);
      set_unfused("");
      const RunResult in_place = run_on(c, 3);
      if (world_rank() != 0) continue;
      const std::string name = describe(c);
      CAPTURE(name);
      const std::string diff = compare(split, in_place, Gaps{});
      CHECK_MESSAGE(diff.empty(), diff);
    }
}

TEST_CASE("cp: overlap on gives overlap off's bits under CP 2 x DP 2 and 4D, fp32 and bf16") {
  // dp_cp spans CP and DP: the queued collectives run over both.
  for (const char* dtype : {"fp32", "bf16"})
    for (const Layout4& k : {Layout4{1, 2, 1, 2, 3}, Layout4{2, 2, 2, 2, 2, true}}) {
      TrainConfig c = laid_out(tiny_model(4), k.tp, k.cp, k.pp, k.dp);
      c.optimizer.zero = k.zero;
      c.layout.sp = k.sp;
      c.device.dtype = dtype;
      const std::string diff = overlap_diff(c, 3);
      if (world_rank() != 0) continue;
      CAPTURE(describe(c));
      CHECK_MESSAGE(diff.empty(), diff);
    }
}
