// Pipeline parallelism: every schedule, PP 2 and 4, V 1 and 2, m in {PP, 2PP, 4PP},
// alone and with TP 2 or DP 2 (ZeRO 1, 2, 3), and --pp-balance ends crossed with the other
// dimensions and bf16, against a single rank; the zero-bubble schedules (zb-h1, and zb-v with
// its chunks placed as a V) also crossed with ZeRO 1-3, TP + SP, CP, recompute, fp32 and bf16.
#include <doctest/doctest.h>

#include "layout_check.hpp"
#include "parallel/schedule.hpp"
#include "plan/setup.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

struct Sched {
  const char* name;
  int vpp;
};

// 8 layers, so that PP * V = 8 chunks fit.
TrainConfig eight_layers(int global_batch) {
  TrainConfig c = tiny_model(global_batch);
  c.model.layers = 8;
  return c;
}

}  // namespace

TEST_CASE("pp: gpipe, 1f1b, interleaved (V 1, 2), zb-h1 and zb-v over PP 2 and 4 match one rank") {
  const std::vector<Sched> schedules = {{"gpipe", 1},       {"1f1b", 1},  {"interleaved", 1},
                                        {"interleaved", 2}, {"zb-h1", 1}, {"zb-v", 2}};
  std::map<int, RunResult> reference;  // by global batch
  auto ref = [&](int G) -> const RunResult& {
    if (!reference.count(G)) reference[G] = run_on(eight_layers(G), 4);
    return reference[G];
  };
  int zero = 0;
  for (int pp : {2, 4}) {
    for (const Sched& s : schedules) {
      for (int m : {pp, 2 * pp, 4 * pp}) {
        // Alone for every m; with TP 2 and with DP 2 (cycling ZeRO stages) at m = 2 PP.
        for (const char* with : {"", "tp", "dp"}) {
          if (std::string(with) != "" && m != 2 * pp) continue;
          const int dp = std::string(with) == "dp" ? 2 : 1;
          const int tp = std::string(with) == "tp" ? 2 : 1;
          const int G = m * dp;
          TrainConfig c = laid_out(eight_layers(G), tp, 1, pp, dp);
          c.layout.schedule = s.name;
          c.layout.vpp = s.vpp;
          if (dp > 1) c.optimizer.zero = zero++ % 3 + 1;
          const RunResult& r1 = ref(G);
          const RunResult run = run_on(c, 4);
          if (world_rank() != 0) continue;
          CAPTURE(pp);
          CAPTURE(s.name);
          CAPTURE(s.vpp);
          CAPTURE(m);
          CAPTURE(with);
          CHECK(run.micro_batches == m);
          const std::string diff = compare(r1, run);
          CHECK_MESSAGE(diff.empty(), diff);
          const ScheduleKind kind = parse_schedule(s.name);
          const double formula = bubble_formula(kind, pp, s.vpp, m);
          for (const StepResult& st : run.steps) {
            CHECK(st.bubble_formula == formula);
            CHECK(st.bubble >= 0);
            CHECK(st.bubble < 1);
            // Every chunk's pass costs, and the schedule's bubble at them (never a timing).
            REQUIRE(st.pass_ms.size() == size_t(pp * s.vpp));
            for (const PassCosts& k : st.pass_ms) {
              CHECK((k.f >= 0 && k.b >= 0 && k.w >= 0));
              if (!splits_backward(kind)) CHECK(k.w == 0);  // B is the whole backward
            }
            CHECK(st.bubble_at_measured_costs >= 0);
            CHECK(st.bubble_at_measured_costs < 1);
            CHECK(st.bubble_at_measured_costs == simulate(kind, pp, s.vpp, m, st.pass_ms).bubble());
          }
          for (const StepResult& st : r1.steps) CHECK(st.pass_ms.empty());  // PP 1: none
        }
      }
    }
  }
}

TEST_CASE("pp: layers that PP*V does not divide are spread, none dropped") {
  // 6 layers over 4 stages: chunks of 2, 2, 1, 1 blocks.
  TrainConfig six = tiny_model(4);
  six.model.layers = 6;
  const RunResult ref = run_on(six, 3);
  const RunResult run = run_on(laid_out(six, 1, 1, 4, 1), 3);
  if (world_rank() != 0) return;
  CHECK(run.weights.count("model.layers.5.mlp.down_proj.weight") == 1);
  const std::string diff = compare(ref, run);
  CHECK_MESSAGE(diff.empty(), diff);
}

TEST_CASE("pp: --pp-balance ends (a layer fewer on the first and last chunk) matches one rank") {
  // 6 layers over 4 chunks: 1, 2, 2, 1 blocks (even gives 2, 2, 1, 1); PP 4, and PP 2 x V 2.
  TrainConfig six = tiny_model(8);
  six.model.layers = 6;
  const RunResult ref = run_on(six, 3);
  for (int pp : {4, 2}) {
    TrainConfig c = laid_out(six, 1, 1, pp, 1);
    c.layout.pp_balance = "ends";
    c.layout.vpp = 4 / pp;
    if (pp == 2) c.layout.schedule = "interleaved";
    const RunResult run = run_on(c, 3);
    if (world_rank() != 0) continue;
    CAPTURE(pp);
    const std::string diff = compare(ref, run);
    CHECK_MESSAGE(diff.empty(), diff);
  }
}

TEST_CASE("pp: --pp-balance ends crossed with bf16, TP + SP, CP, ZeRO-3 and 4D") {
  // PP 2 x V 2 with chunks of 2, 3, 2, 1 blocks (even: 2, 2, 2, 2) beside each other
  // dimension, in the dtype the 405B preset trains (bf16) where a reference of that dtype is at
  // hand. Eight layers: the six-layer model above has, at the default seed, one v_proj weight
  // whose first gradient is of the size of Adam's epsilon, so that TP 2's rounding of it (1e-8)
  // moves that one weight by 4.5e-4 after a step: a gap of the optimizer, not of the layout.
  struct Cross {
    int tp, cp, dp, zero;
    bool sp, bf16;
  };
  std::map<bool, RunResult> ref;  // by bf16
  for (const Cross& x : {Cross{2, 1, 1, 1, true, true}, Cross{1, 2, 1, 1, false, false},
                         Cross{1, 1, 2, 3, false, true}, Cross{2, 2, 1, 2, true, false},
                         Cross{1, 2, 2, 2, false, true}}) {
    TrainConfig one = eight_layers(8);
    if (x.bf16) one.device.dtype = "bf16";
    if (!ref.count(x.bf16)) ref[x.bf16] = run_on(one, 3);
    TrainConfig c = laid_out(one, x.tp, x.cp, 2, x.dp);
    c.layout.pp_balance = "ends";
    c.layout.schedule = "interleaved";
    c.layout.vpp = 2;
    c.layout.sp = x.sp;
    c.optimizer.zero = x.zero;
    const RunResult run = run_on(c, 3);
    if (world_rank() != 0) continue;
    CAPTURE(describe(c));
    const std::string diff = compare(ref[x.bf16], run, match_bounds(x.bf16 ? "bf16" : "fp32"));
    CHECK_MESSAGE(diff.empty(), diff);
  }
}

TEST_CASE("pp: wgrad_beta0 and grad_alias give the plain path's bits under every schedule") {
  // A chunk's first backward is not the step's first action; recompute runs forwards between
  // backwards; the DP 2 case reduce-scatters each unit after its last micro-batch.
  struct Case {
    const char* schedule;
    int vpp, pp, dp, zero, micro_batches;
    bool recompute;
  };
  for (const Case& k :
       {Case{"1f1b", 1, 2, 1, 1, 4, false}, Case{"interleaved", 2, 2, 1, 3, 4, true},
        Case{"gpipe", 1, 4, 2, 2, 4, false}, Case{"1f1b", 1, 4, 1, 2, 8, true},
        Case{"zb-h1", 1, 4, 2, 3, 4, true}, Case{"zb-h1", 1, 2, 1, 1, 6, false},
        Case{"zb-v", 2, 2, 2, 3, 4, true}, Case{"zb-v", 2, 4, 1, 1, 5, false}}) {
    TrainConfig c = laid_out(eight_layers(k.dp * k.micro_batches), 1, 1, k.pp, k.dp);
    c.layout.schedule = k.schedule;
    c.layout.vpp = k.vpp;
    c.optimizer.zero = k.zero;
    c.optimizer.recompute = k.recompute;
    const std::string diff = grad_fusions_diff(c, 3);
    if (world_rank() != 0) continue;
    CAPTURE(describe(c));
    CHECK_MESSAGE(diff.empty(), diff);
  }
}

TEST_CASE("pp: overlap on gives overlap off's bits under every schedule beside DP 2") {
  // Interleaved chunks walk several units per rank in both directions: ZeRO-3's prefetch
  // guesses the next unit, and a wrong guess is dropped.
  struct Case {
    const char* schedule;
    int vpp, zero;
    const char* dtype;
  };
  for (const Case& k : {Case{"gpipe", 1, 2, "fp32"}, Case{"1f1b", 1, 3, "bf16"},
                        Case{"interleaved", 2, 3, "fp32"}, Case{"interleaved", 2, 1, "bf16"},
                        Case{"zb-v", 2, 3, "fp32"}, Case{"zb-v", 2, 2, "bf16"}}) {
    TrainConfig c = laid_out(eight_layers(2 * 4), 1, 1, 2, 2);
    c.layout.schedule = k.schedule;
    c.layout.vpp = k.vpp;
    c.optimizer.zero = k.zero;
    c.device.dtype = k.dtype;
    const std::string diff = overlap_diff(c, 3);
    if (world_rank() != 0) continue;
    CAPTURE(describe(c));
    CHECK_MESSAGE(diff.empty(), diff);
  }
}

// ZB-H1 and ZB-V run each backward as B and W apart (W up to PP - 1 micro-batches late), so
// each unit's gradients are written by its first W and handed over after its last: crossed with
// what shards, splits or recomputes around those passes, in fp32 and bf16 (the bf16 bounds
// against one rank in bf16), as the feature matrix crosses the other schedules. ZB-V also puts
// the embedding and the head on rank 0 and turns at rank PP - 1 without a message.
TEST_CASE("pp: zb-h1 and zb-v with ZeRO 1-3, TP + SP, CP and recompute match one rank") {
  struct Case {
    int tp, cp, pp, dp, zero;
    bool sp, recompute, bf16;
  };
  const Case cases[] = {
      {1, 1, 4, 2, 1, false, false, false}, {1, 1, 2, 2, 2, false, true, true},
      {1, 2, 2, 2, 3, false, false, true},  {2, 1, 2, 2, 1, true, false, false},
      {2, 1, 4, 1, 1, true, true, true},    {1, 2, 2, 1, 1, false, true, false},
      {2, 1, 2, 2, 3, true, false, false},  {1, 1, 2, 4, 2, false, false, false},
  };
  std::map<std::pair<bool, bool>, RunResult> reference;  // one rank, by (bf16, recompute)
  for (const char* schedule : {"zb-h1", "zb-v"})
    for (const Case& k : cases) {
      TrainConfig common = eight_layers(8);
      if (k.bf16) common.device.dtype = "bf16";
      common.optimizer.recompute = k.recompute;
      if (!reference.count({k.bf16, k.recompute}))  // on every rank: run_on is collective
        reference[{k.bf16, k.recompute}] = run_on(common, 3);
      const RunResult& ref = reference[{k.bf16, k.recompute}];
      TrainConfig c = laid_out(common, k.tp, k.cp, k.pp, k.dp);
      c.layout.schedule = schedule;
      c.layout.vpp = std::string(schedule) == "zb-v" ? 2 : 1;
      c.layout.sp = k.sp;
      c.optimizer.zero = k.zero;
      c.optimizer.recompute = k.recompute;
      const RunResult run = run_on(c, 3);
      if (world_rank() != 0) continue;
      CAPTURE(describe(c));
      const std::string diff = compare(ref, run, k.bf16 ? kBf16Bound : match_bounds("fp32"));
      CHECK_MESSAGE(diff.empty(), diff);
    }
}

// ZB-H1 holds no more than 1F1B (docs/design.md): a micro-batch awaiting its W keeps only
// what the weight gradients read, no more than it kept awaiting B (under --sp the Row layers'
// output gradients on the local rows, gathered again in W), and rank r has r fewer of them
// awaiting B than rank 0; under ZeRO-3 with --overlap its backward walk prefetches nothing;
// and a rank frees each message it sent once a later one of its peer proves it received
// (parallel/retire.hpp), so a middle stage does not pile up 2m of them. The fullest rank's
// peak of backend memory, measured (run_on also holds each rank's to tetra plan's
// prediction), alone, with TP 2 + SP and with DP 2 under ZeRO-3 with overlap at m 8, at
// m 16 with 128 tokens, where a middle stage holding its sends to the step's end passed
// 1F1B's rank 0 (6.05 MB against 5.93 planned), and under ZeRO-2 with overlap at m 4, where
// the last stage's head gradients, in flight until the next hand-over, sat beside its
// pending W (1.6495 MB against 1.6476 measured) until its W passes waited for them
// (ZeroParams::begin_weight_pass). Those run the paper's delays. Where the paper's delays
// cannot hold the bound the planner lowers them (plan::zb_weight_delay), and the run is still
// one rank's: one block a stage whose W state is nearly its B state, with the head on the
// last (4 layers, DP 2, ZeRO-3: 1.084 MB at the paper's delays against 1.071, delay 2), and
// --recompute full with two blocks a stage (W inside B: 1.92 MB against 1.60 planned).
TEST_CASE(
    "pp: zb-h1's measured peak memory is at most 1f1b's (PP 4, m 8; alone, TP 2 + SP, "
    "ZeRO-3 with overlap; m 16 at 128 tokens; ZeRO-2 with overlap at m 4; W delays lowered "
    "for the head and for recompute)") {
  struct Case {
    int tp, dp;
    bool sp;
    int m = 8, seq = 16, zero = 3, layers = 8;
    bool recompute = false;
    int delay = kPaperWeightDelay;  // the planner's choice
  };
  for (const Case& k :
       {Case{1, 1, false}, Case{2, 1, true}, Case{1, 2, false}, Case{1, 1, false, 16, 128},
        Case{1, 2, false, 4, 16, 2}, Case{1, 2, false, 8, 16, 3, 4, false, 2},
        Case{1, 1, false, 8, 16, 3, 8, true, kWeightInBackward}}) {
    std::map<std::string, double> peak;
    TrainConfig c = laid_out(eight_layers(k.m * k.dp), k.tp, 1, 4, k.dp);
    c.model.layers = k.layers;
    c.model.seq_len = k.seq;
    c.layout.sp = k.sp;
    c.optimizer.recompute = k.recompute;
    if (k.dp > 1) c.optimizer.zero = k.zero, c.device.overlap = true;
    RunResult zb;
    for (const char* schedule : {"1f1b", "zb-h1"}) {
      c.layout.schedule = schedule;
      RunResult r = run_on(c, 2);
      for (const StepResult& s : r.steps)
        peak[schedule] = std::max(peak[schedule], s.peak_memory_bytes);
      zb = std::move(r);
    }
    const bool lowered = k.delay != kPaperWeightDelay;
    RunResult one;
    if (lowered) {  // on every rank: run_on is collective
      TrainConfig single = c;
      single.layout = {};
      single.optimizer.zero = 1;
      single.device.overlap = false;
      one = run_on(single, 2);
    }
    if (world_rank() != 0) continue;
    CAPTURE(describe(c));
    CAPTURE(peak["1f1b"]);
    CAPTURE(peak["zb-h1"]);
    CHECK(plan::make_setup(c.run_spec(), c.model, 0).run.weight_delay == k.delay);
    CHECK(peak["1f1b"] > 0);
    CHECK(peak["zb-h1"] <= peak["1f1b"]);
    if (lowered) {
      const std::string diff = compare(one, zb);
      CHECK_MESSAGE(diff.empty(), diff);
    }
  }
}
