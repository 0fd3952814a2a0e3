// ZB-V (parallel/schedule_v.cpp): the V placement, the exact lists of a small case, and the
// simulation of every rank for PP 1..8 and m from PP to 4 PP + 2 (the p in {2, 3, 4, 8},
// m in {p, 2p, 3p + 1} among them): each pass once, each chunk's F, B and W in micro-batch order,
// every dependency met (checked here on the timeline, not only by the simulator's own waits), no
// deadlock at any costs, at most 1F1B's activations, and the bubble equal to the formula.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "parallel/schedule.hpp"
#include "util/error.hpp"

using tetra::Action;
using tetra::make_schedule;
using tetra::Placement;
using tetra::ScheduleKind;

namespace {

constexpr ScheduleKind kV = ScheduleKind::ZeroBubbleV;

doctest::Contains has(const std::string& part) {
  return doctest::Contains(part.c_str());
}

struct Case {
  int pp, m;
};

std::vector<Case> v_cases() {
  std::vector<Case> out;
  for (int pp = 1; pp <= 8; ++pp)
    for (int m = pp; m <= 4 * pp + 2; ++m) out.push_back({pp, m});
  return out;
}

}  // namespace

TEST_CASE("schedule: zb-v places the chunks as a V") {
  CHECK(tetra::parse_schedule("zb-v") == kV);
  CHECK(tetra::schedule_name(kV) == std::string("zb-v"));
  CHECK(tetra::splits_backward(kV));
  CHECK(tetra::placement(kV) == Placement::V);
  for (auto k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
                 ScheduleKind::ZeroBubbleH1})
    CHECK(tetra::placement(k) == Placement::Looped);
  // PP 4: chunks 0..7 on ranks 0 1 2 3 3 2 1 0.
  const std::vector<int> ranks = {0, 1, 2, 3, 3, 2, 1, 0};
  for (int k = 0; k < 8; ++k) {
    INFO("chunk ", k);
    const int r = tetra::chunk_rank(Placement::V, 4, 2, k),
              v = tetra::chunk_virtual_stage(Placement::V, 4, k);
    CHECK(r == ranks[k]);
    CHECK(v == (k < 4 ? 0 : 1));
    CHECK(tetra::chunk_id(Placement::V, 4, r, v) == k);
    // Looped, for comparison: k % PP, k / PP, and back.
    CHECK(tetra::chunk_rank(Placement::Looped, 4, 2, k) == k % 4);
    CHECK(tetra::chunk_id(Placement::Looped, 4, k % 4, k / 4) == k);
  }
  CHECK(tetra::head_rank(Placement::V, 4) == 0);
  CHECK(tetra::head_rank(Placement::Looped, 4) == 3);
  CHECK_THROWS_AS(tetra::chunk_rank(Placement::V, 4, 2, 8), tetra::Error);
  // Two chunks per rank, no more and no fewer.
  CHECK_THROWS_WITH_AS(tetra::check_schedule(kV, 4, 1, 8), has("`layout.vpp` must be 2 (got 1)"),
                       tetra::Error);
  CHECK_THROWS_WITH_AS(tetra::check_schedule(kV, 4, 3, 8), has("`layout.vpp` must be 2 (got 3)"),
                       tetra::Error);
  CHECK_THROWS_WITH_AS(make_schedule(kV, 4, 2, 3, 0), has("fewer than PP = 4"), tetra::Error);
  CHECK_THROWS_WITH_AS(make_schedule(kV, 2, 2, 4, 2), has("rank 2 is outside 0..1"), tetra::Error);
}

TEST_CASE("schedule: zb-v's lists at PP 2, m 2 and PP 4, m 8") {
  CHECK(tetra::to_string(make_schedule(kV, 2, 2, 2, 0)) ==
        "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 W0.0 B1.0 W1.0 W0.1 W1.1");
  CHECK(tetra::to_string(make_schedule(kV, 2, 2, 2, 1)) ==
        "F0.0 F0.1 F1.0 F1.1 B0.1 B0.0 B1.1 B1.0 W0.0 W1.0 W0.1 W1.1");
  // Rank 3 turns each micro-batch around at once: F of chunk 3, then of chunk 4, locally.
  CHECK(tetra::to_string(make_schedule(kV, 4, 2, 8, 3)) ==
        "F0.0 F0.1 F1.0 F1.1 F2.0 F2.1 F3.0 F3.1 B0.1 W0.1 F4.0 B0.0 W0.0 F4.1 B1.1 W1.1 F5.0 "
        "B1.0 W1.0 F5.1 B2.1 W2.1 F6.0 B2.0 W2.0 F6.1 B3.1 W3.1 F7.0 B3.0 W3.0 F7.1 B4.1 B4.0 "
        "B5.1 B5.0 B6.1 B6.0 B7.1 B7.0 W4.0 W5.0 W6.0 W7.0 W4.1 W5.1 W6.1 W7.1");
  CHECK(tetra::warmup_forwards(kV, 4, 2, 8, 0) == 8);
  CHECK(tetra::warmup_forwards(kV, 4, 2, 8, 3) == 8);
}

TEST_CASE("schedule: zb-v's lists hold every pass once, each chunk's in micro-batch order") {
  for (const Case& c : v_cases()) {
    for (int r = 0; r < c.pp; ++r) {
      INFO("PP ", c.pp, " m ", c.m, " rank ", r);
      const std::vector<Action> acts = make_schedule(kV, c.pp, 2, c.m, r);
      REQUIRE(int(acts.size()) == 6 * c.m);
      int next[3][2] = {};
      std::map<std::tuple<int, int, int>, int> pos;  // (kind, mb, v) -> index
      std::vector<Action> forwards;
      for (int i = 0; i < int(acts.size()); ++i) {
        const Action& a = acts[i];
        REQUIRE((a.chunk == 0 || a.chunk == 1));
        CHECK(a.micro_batch == next[a.kind][a.chunk]++);
        pos[{a.kind, a.micro_batch, a.chunk}] = i;
        if (a.kind == Action::Forward) forwards.push_back(a);
      }
      for (int mb = 0; mb < c.m; ++mb)
        for (int v = 0; v < 2; ++v) {
          CHECK(pos.at({Action::Forward, mb, v}) < pos.at({Action::Backward, mb, v}));
          CHECK(pos.at({Action::Backward, mb, v}) < pos.at({Action::Weight, mb, v}));
        }
      CHECK(make_schedule(kV, c.pp, 2, c.m, r, tetra::ScheduleMode::ForwardOnly) == forwards);
    }
  }
}

// The claims of schedule_v.cpp, simulated: with T_F = T_B = T_W the step is 6 m + p - 1 chunk
// passes, so each rank idles (p - 1) / (6 m + p - 1) of it (bubble_formula); every dependency
// holds on the timeline; each rank holds at most 2 p chunks' activations, p micro-batches of a
// whole stage, the most 1F1B holds (its rank 0); other costs run the same lists without
// deadlock, and forward-only too.
TEST_CASE("schedule: zb-v simulated: dependencies met, bubble as the formula, 1F1B's memory") {
  for (const Case& c : v_cases()) {
    INFO("PP ", c.pp, " m ", c.m);
    const int K = 2 * c.pp;
    const tetra::SimResult s =
        tetra::simulate(kV, c.pp, 2, c.m, 1, 1, tetra::ScheduleMode::Train, 1);
    REQUIRE_FALSE(s.deadlock);
    CHECK(tetra::schedule_problem(kV, c.pp, 2, c.m) == "");
    std::map<std::tuple<int, int, int>, tetra::TimedAction> ran;  // (kind, mb, model chunk)
    for (int r = 0; r < c.pp; ++r)
      for (const tetra::TimedAction& t : s.timeline[r]) {
        const int k = tetra::chunk_id(Placement::V, c.pp, r, t.action.chunk);
        CHECK(tetra::chunk_rank(Placement::V, c.pp, 2, k) == r);
        CHECK(t.end == t.start + 1);
        CHECK(ran.emplace(std::tuple(int(t.action.kind), t.action.micro_batch, k), t).second);
      }
    REQUIRE(int(ran.size()) == 3 * c.m * K);
    for (const auto& [key, t] : ran) {
      const auto [kind, mb, k] = key;
      const auto end = [&](int kd, int chunk) { return ran.at({kd, mb, chunk}).end; };
      if (kind == Action::Forward && k > 0) CHECK(t.start >= end(Action::Forward, k - 1));
      if (kind == Action::Backward) {
        CHECK(t.start >= end(Action::Forward, k));
        if (k + 1 < K) CHECK(t.start >= end(Action::Backward, k + 1));
      }
      if (kind == Action::Weight) CHECK(t.start >= end(Action::Backward, k));
    }
    const tetra::SimResult onef1b = tetra::simulate(ScheduleKind::OneFOneB, c.pp, 1, c.m, 1, 2);
    const int onef1b_most =
        *std::max_element(onef1b.max_in_flight.begin(), onef1b.max_in_flight.end());
    CHECK(s.makespan == 6 * c.m + c.pp - 1);
    for (int r = 0; r < c.pp; ++r) {
      INFO("rank ", r);
      CHECK(s.busy[r] == 6 * c.m);
      CHECK(std::abs(s.idle[r] / s.makespan - tetra::bubble_formula(kV, c.pp, 2, c.m)) <= 1e-12);
      CHECK(s.max_in_flight[r] <= tetra::max_in_flight_bound(kV, c.pp, 2, c.m, r));
      // Chunk activations are half a stage's: 2 of them weigh one of 1F1B's.
      CHECK(s.max_in_flight[r] <= 2 * onef1b_most);
    }
    // Unequal costs: the same lists never deadlock, and the bubble is no worse than ZB-H1's.
    struct Costs {
      double tf, tb, tw;
    };
    for (const Costs& k : {Costs{1, 2, 1}, Costs{2, 2, 1}, Costs{1, 1, 0.5}, Costs{3, 2, 0}}) {
      INFO("costs F ", k.tf, " B ", k.tb, " W ", k.tw);
      const tetra::SimResult u =
          tetra::simulate(kV, c.pp, 2, c.m, k.tf, k.tb, tetra::ScheduleMode::Train, k.tw);
      CHECK_FALSE(u.deadlock);
      for (int r = 0; r < c.pp; ++r)
        CHECK(u.busy[r] == doctest::Approx(2 * c.m * (k.tf + k.tb + k.tw)));
    }
    const tetra::SimResult f =
        tetra::simulate(kV, c.pp, 2, c.m, 1, 1, tetra::ScheduleMode::ForwardOnly, 1);
    CHECK_FALSE(f.deadlock);
  }
  // The formula's numbers: PP 4, m 8: 3 / 51 of the step, against zb-h1's 3 / 27 and 1f1b's 3 / 11.
  CHECK(tetra::bubble_formula(kV, 4, 2, 8) == doctest::Approx(3.0 / 51));
  CHECK(tetra::bubble_forms(kV, 4, 2, 8).of_compute == doctest::Approx(3.0 / 48));
  CHECK(tetra::bubble_formula_text(kV) == std::string("(p-1)/(6m+p-1)"));
}

TEST_CASE("schedule: the simulator follows the V: a wrong order is a deadlock named by rank") {
  // PP 2, m 2: rank 1 taking B of chunk 1 (its virtual stage 0) before chunk 2's B exists:
  // chunk 2 is rank 1's own virtual stage 1, so it waits for itself.
  std::vector<std::vector<Action>> ranks = {make_schedule(kV, 2, 2, 2, 0),
                                            make_schedule(kV, 2, 2, 2, 1)};
  std::vector<Action>& r1 = ranks[1];
  const auto b00 = std::find(r1.begin(), r1.end(), Action{Action::Backward, 0, 0});
  const auto b01 = std::find(r1.begin(), r1.end(), Action{Action::Backward, 0, 1});
  std::iter_swap(b00, b01);
  const std::string problem = tetra::schedule_problem(ranks, kV, 2, 2);
  CHECK(problem.find("deadlock") != std::string::npos);
  CHECK(problem.find("rank 1 stops at B0.0, waiting for B0.1 of rank 1") != std::string::npos);
}
