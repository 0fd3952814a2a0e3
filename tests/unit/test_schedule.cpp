// Pipeline schedules: exact orders for small cases, structural properties and a simulation
// of every rank for all PP 1..8, V 1..4 and many m, training and forward only, the bubble
// against the formula, and the errors for bad input.
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
using tetra::ScheduleKind;
using tetra::simulate;
using tetra::to_string;

namespace {

doctest::Contains has(const std::string& part) {
  return doctest::Contains(part.c_str());
}

struct Case {
  ScheduleKind kind;
  int pp, vpp, m;
};

// Every valid (kind, PP, V, m) with PP <= 8 and V <= 4: m from PP to 3 PP + 2 for gpipe and
// 1f1b, m = PP, 2 PP, 3 PP, 4 PP for interleaved.
std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (int pp = 1; pp <= 8; ++pp) {
    for (int m = pp; m <= 3 * pp + 2; ++m) {
      out.push_back({ScheduleKind::GPipe, pp, 1, m});
      out.push_back({ScheduleKind::OneFOneB, pp, 1, m});
    }
    for (int v = 1; v <= 4; ++v)
      for (int g = 1; g <= 4; ++g) out.push_back({ScheduleKind::Interleaved, pp, v, g * pp});
  }
  return out;
}

std::string name(const Case& c) {
  return std::string(tetra::schedule_name(c.kind)) + " PP=" + std::to_string(c.pp) +
         " V=" + std::to_string(c.vpp) + " m=" + std::to_string(c.m);
}

}  // namespace

TEST_CASE("schedule: names") {
  CHECK(tetra::parse_schedule("gpipe") == ScheduleKind::GPipe);
  CHECK(tetra::parse_schedule("1f1b") == ScheduleKind::OneFOneB);
  CHECK(tetra::parse_schedule("interleaved") == ScheduleKind::Interleaved);
  for (auto k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved})
    CHECK(tetra::parse_schedule(tetra::schedule_name(k)) == k);
  for (const char* bad : {"", "GPipe", "1F1B", "pipedream", "interleave"})
    CHECK_THROWS_WITH_AS(tetra::parse_schedule(bad), has("gpipe, 1f1b, interleaved, zb-h1 or zb-v"),
                         tetra::Error);
}

TEST_CASE("schedule: bad input is refused with a clear message") {
  using K = ScheduleKind;
  for (auto k : {K::GPipe, K::OneFOneB, K::Interleaved}) {
    CHECK_THROWS_WITH_AS(make_schedule(k, 4, 1, 3, 0), has("3 micro-batches, fewer than PP = 4"),
                         tetra::Error);
    CHECK_THROWS_WITH_AS(tetra::simulate(k, 8, 1, 1, 1, 2), has("1 micro-batch, fewer"),
                         tetra::Error);
    CHECK_THROWS_WITH_AS(tetra::bubble_formula(k, 2, 1, 1), has("fewer than PP = 2"), tetra::Error);
    CHECK_THROWS_AS(make_schedule(k, 0, 1, 4, 0), tetra::Error);
    CHECK_THROWS_AS(make_schedule(k, 2, 0, 4, 0), tetra::Error);
    CHECK_THROWS_WITH_AS(make_schedule(k, 2, 1, 4, 2), has("rank 2 is outside 0..1"), tetra::Error);
    CHECK_THROWS_AS(make_schedule(k, 2, 1, 4, -1), tetra::Error);
  }
  CHECK_THROWS_WITH_AS(make_schedule(K::Interleaved, 4, 2, 6, 0),
                       has("6 is not a multiple of PP = 4"), tetra::Error);
  // The rule does not depend on V, even though V == 1 runs the 1F1B order.
  CHECK_THROWS_AS(make_schedule(K::Interleaved, 4, 1, 6, 0), tetra::Error);
  CHECK_THROWS_WITH_AS(make_schedule(K::OneFOneB, 4, 2, 8, 0),
                       has("`layout.vpp` 2 needs `layout.schedule` interleaved (got 1f1b)"),
                       tetra::Error);
  CHECK_THROWS_WITH_AS(tetra::bubble_formula(K::GPipe, 2, 3, 8),
                       has("`layout.vpp` 3 needs `layout.schedule` interleaved (got gpipe)"),
                       tetra::Error);
}

TEST_CASE("schedule: exact orders of small cases") {
  // The examples in schedule.cpp's header comment.
  const std::vector<std::string> onef1b = {
      "F0.0 F1.0 F2.0 F3.0 B0.0 F4.0 B1.0 F5.0 B2.0 F6.0 B3.0 F7.0 B4.0 B5.0 B6.0 B7.0",
      "F0.0 F1.0 F2.0 B0.0 F3.0 B1.0 F4.0 B2.0 F5.0 B3.0 F6.0 B4.0 F7.0 B5.0 B6.0 B7.0",
      "F0.0 F1.0 B0.0 F2.0 B1.0 F3.0 B2.0 F4.0 B3.0 F5.0 B4.0 F6.0 B5.0 F7.0 B6.0 B7.0",
      "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 F3.0 B3.0 F4.0 B4.0 F5.0 B5.0 F6.0 B6.0 F7.0 B7.0"};
  for (int r = 0; r < 4; ++r)
    CHECK(to_string(make_schedule(ScheduleKind::OneFOneB, 4, 1, 8, r)) == onef1b[r]);
  CHECK(to_string(make_schedule(ScheduleKind::GPipe, 2, 1, 3, 1)) ==
        "F0.0 F1.0 F2.0 B0.0 B1.0 B2.0");
  CHECK(to_string(make_schedule(ScheduleKind::Interleaved, 2, 2, 4, 0)) ==
        "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  CHECK(to_string(make_schedule(ScheduleKind::Interleaved, 2, 2, 4, 1)) ==
        "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
  // Interleaved with V == 1 is exactly 1F1B.
  for (int r = 0; r < 4; ++r)
    CHECK(make_schedule(ScheduleKind::Interleaved, 4, 1, 8, r) ==
          make_schedule(ScheduleKind::OneFOneB, 4, 1, 8, r));
}

TEST_CASE("schedule: each rank runs every action once, in warm-up / 1F1B / cool-down shape") {
  for (const Case& c : all_cases()) {
    INFO(name(c));
    const int v = c.kind == ScheduleKind::Interleaved ? c.vpp : 1, total = v * c.m;
    for (int r = 0; r < c.pp; ++r) {
      INFO("rank ", r);
      const auto acts = make_schedule(c.kind, c.pp, c.vpp, c.m, r);
      REQUIRE(int(acts.size()) == 2 * total);
      // Exactly once each, forward before backward.
      std::map<std::tuple<int, int, int>, int> pos;
      for (int i = 0; i < int(acts.size()); ++i) {
        const Action& a = acts[i];
        REQUIRE(a.micro_batch >= 0);
        REQUIRE(a.micro_batch < c.m);
        REQUIRE(a.chunk >= 0);
        REQUIRE(a.chunk < v);
        CHECK(pos.emplace(std::tuple(int(a.kind), a.micro_batch, a.chunk), i).second);
      }
      CHECK(int(pos.size()) == 2 * total);
      for (int mb = 0; mb < c.m; ++mb)
        for (int ch = 0; ch < v; ++ch)
          CHECK(pos[{Action::Forward, mb, ch}] < pos[{Action::Backward, mb, ch}]);
      // Per chunk, forwards and backwards in increasing micro-batch order.
      std::map<std::pair<int, int>, int> last;  // (kind, chunk) -> last micro-batch
      for (const Action& a : acts) {
        auto [it, fresh] = last.emplace(std::pair(int(a.kind), a.chunk), a.micro_batch);
        if (!fresh) CHECK(a.micro_batch == it->second + 1);
        it->second = a.micro_batch;
      }
      // Shape: W forwards, then F B pairs, then W backwards; forwards and backwards follow
      // the interleaved order (V == 1: micro-batch k, chunk 0).
      const int w = tetra::warmup_forwards(c.kind, c.pp, c.vpp, c.m, r);
      CHECK(w == (c.kind == ScheduleKind::GPipe ? c.m
                  : v == 1                      ? std::min(c.pp - r - 1, c.m)
                           : std::min(2 * (c.pp - r - 1) + (v - 1) * c.pp, total)));
      int nf = 0, nb = 0;
      for (int i = 0; i < int(acts.size()); ++i) {
        const bool steady = i >= w && i < 2 * total - w;
        const bool want_f = i < w || (steady && (i - w) % 2 == 0);
        const Action& a = acts[i];
        CHECK((a.kind == Action::Forward) == want_f);
        int& k = want_f ? nf : nb;
        const int group = (k / c.pp) % v;
        CHECK(a.micro_batch == (k / (c.pp * v)) * c.pp + k % c.pp);
        CHECK(a.chunk == (want_f ? group : v - 1 - group));
        ++k;
      }
    }
  }
}

TEST_CASE("schedule: simulation runs without deadlock and respects every dependency") {
  for (const Case& c : all_cases()) {
    INFO(name(c));
    const tetra::SimResult s = simulate(c.kind, c.pp, c.vpp, c.m, 1.0, 2.0);
    CHECK_FALSE(s.deadlock);
    CHECK(s.in_order);
    const int v = c.vpp, chunks = c.pp * v;
    // End time of every (kind, micro-batch, model chunk), from the timeline.
    std::map<std::tuple<int, int, int>, double> end;
    for (int r = 0; r < c.pp; ++r) {
      const auto acts = make_schedule(c.kind, c.pp, c.vpp, c.m, r);
      REQUIRE(s.timeline[r].size() == acts.size());
      double free_at = 0;
      for (size_t i = 0; i < acts.size(); ++i) {
        const tetra::TimedAction& t = s.timeline[r][i];
        CHECK(t.action == acts[i]);  // in list order, one at a time
        CHECK(t.start >= free_at);
        CHECK(t.end == t.start + (t.action.kind == Action::Forward ? 1.0 : 2.0));
        free_at = t.end;
        end[{int(t.action.kind), t.action.micro_batch, t.action.chunk * c.pp + r}] = t.end;
      }
    }
    for (int r = 0; r < c.pp; ++r) {
      for (const tetra::TimedAction& t : s.timeline[r]) {
        const int k = t.action.chunk * c.pp + r, mb = t.action.micro_batch;
        if (t.action.kind == Action::Forward) {
          if (k > 0) CHECK(t.start >= end.at({Action::Forward, mb, k - 1}));
        } else {
          CHECK(t.start >= end.at({Action::Forward, mb, k}));
          if (k + 1 < chunks) CHECK(t.start >= end.at({Action::Backward, mb, k + 1}));
        }
      }
    }
  }
}

// Evaluation runs the same schedule forward only (Megatron's forward_only): the training
// list's forwards in their order. It keeps the properties that make the executor safe (no
// deadlock, every link in receive order), and with equal stage costs it has no bubble but
// the fill: the last rank starts after PP - 1 chunk forwards and then computes V m of them.
TEST_CASE("schedule: forward-only is the training list's forwards and runs without deadlock") {
  using tetra::ScheduleMode;
  for (const Case& c : all_cases()) {
    INFO(name(c));
    const int v = c.vpp, chunks = c.pp * v;
    for (int r = 0; r < c.pp; ++r) {
      INFO("rank ", r);
      std::vector<Action> forwards;
      for (const Action& a : make_schedule(c.kind, c.pp, v, c.m, r))
        if (a.kind == Action::Forward) forwards.push_back(a);
      const auto only = make_schedule(c.kind, c.pp, v, c.m, r, ScheduleMode::ForwardOnly);
      CHECK(int(only.size()) == v * c.m);
      CHECK(only == forwards);
    }
    const double f = 12.0 / v;  // a stage's forward costs 12, split into V chunks
    const tetra::SimResult s = simulate(c.kind, c.pp, v, c.m, f, 99.0, ScheduleMode::ForwardOnly);
    CHECK_FALSE(s.deadlock);
    CHECK(s.in_order);
    CHECK(std::abs(s.makespan - (v * c.m + c.pp - 1) * f) <= 1e-9 * s.makespan);
    std::map<std::pair<int, int>, double> end;  // (micro-batch, model chunk) -> end of F
    for (int r = 0; r < c.pp; ++r) {
      CHECK(s.max_in_flight[r] == 0);  // each forward's activations are dropped at once
      CHECK(std::abs(s.busy[r] - v * c.m * f) <= 1e-9 * s.makespan);
      REQUIRE(int(s.timeline[r].size()) == v * c.m);
      for (const tetra::TimedAction& t : s.timeline[r])
        end[{t.action.micro_batch, t.action.chunk * c.pp + r}] = t.end;
    }
    for (int r = 0; r < c.pp; ++r)
      for (const tetra::TimedAction& t : s.timeline[r]) {
        const int k = t.action.chunk * c.pp + r;
        if (k > 0) CHECK(t.start >= end.at({t.action.micro_batch, k - 1}));
      }
    CHECK(int(end.size()) == c.m * chunks);
  }
}

TEST_CASE("schedule: in-flight micro-batches stay within the schedule's bound") {
  for (const Case& c : all_cases()) {
    INFO(name(c));
    const tetra::SimResult s = simulate(c.kind, c.pp, c.vpp, c.m, 1.0, 2.0);
    for (int r = 0; r < c.pp; ++r) {
      INFO("rank ", r);
      const int bound = tetra::max_in_flight_bound(c.kind, c.pp, c.vpp, c.m, r);
      CHECK(s.max_in_flight[r] == bound);  // the bound is reached, never exceeded
      switch (c.kind) {
        case ScheduleKind::GPipe:
          CHECK(bound == c.m);
          break;
        case ScheduleKind::OneFOneB:
          CHECK(bound == c.pp - r);
          break;
        case ScheduleKind::Interleaved:
          // V == 1 is 1F1B; otherwise Megatron's warm-up plus one, at most (V + 1) PP - 1.
          if (c.vpp == 1) {
            CHECK(bound == c.pp - r);
          } else {
            CHECK(bound == std::min(2 * (c.pp - r - 1) + (c.vpp - 1) * c.pp + 1, c.vpp * c.m));
            CHECK(bound <= (c.vpp + 1) * c.pp - 1);
          }
          break;
        case ScheduleKind::ZeroBubbleH1:  // its own cases, below and in test_schedule_v.cpp
        case ScheduleKind::ZeroBubbleV:
          FAIL("all_cases holds no zero-bubble case");
          break;
      }
    }
  }
}

// With equal stages, rank PP-1 cannot start before micro-batch 0 crossed PP-1 chunks
// ((PP-1) f with per-chunk forward cost f), then computes V m (f + b), and the gradient of
// its last backward still has PP-1 chunks to cross ((PP-1) b). So the step takes at least
// V m (f + b) + (PP-1)(f + b); all three schedules reach that bound exactly, for any ratio of
// b to f. Every rank computes V m (f + b), so each idles (PP-1)(f + b): with stage costs
// tf = V f and tb = V b that is idle / step = (PP-1) / (m + PP-1) for V = 1 and
// idle / compute = (PP-1) / (V m) for interleaved, the formulas of parallel/schedule.hpp.
TEST_CASE("schedule: simulated bubble equals the formula with equal stage costs") {
  for (double ratio : {2.0, 1.0, 3.0, 0.5}) {
    for (const Case& c : all_cases()) {
      INFO(name(c), " tb/tf=", ratio);
      const int v = c.vpp;
      // Stage costs 12 and 12 ratio split into V chunks: exact in binary for V <= 4.
      const double tf = 12.0, tb = 12.0 * ratio, f = tf / v, b = tb / v;
      const tetra::SimResult s = simulate(c.kind, c.pp, v, c.m, f, b);
      REQUIRE_FALSE(s.deadlock);
      const double compute = c.m * (tf + tb), idle = (c.pp - 1) * (f + b);
      CHECK(std::abs(s.makespan - (compute + idle)) <= 1e-9 * s.makespan);
      if (c.kind != ScheduleKind::Interleaved)
        CHECK(std::abs(s.makespan - (c.m + c.pp - 1) * (tf + tb)) <= 1e-9 * s.makespan);
      const tetra::BubbleForms forms = tetra::bubble_forms(c.kind, c.pp, v, c.m);
      const double formula = tetra::bubble_formula(c.kind, c.pp, v, c.m);
      for (int r = 0; r < c.pp; ++r) {
        INFO("rank ", r);
        CHECK(std::abs(s.busy[r] - compute) <= 1e-9 * compute);
        CHECK(std::abs(s.idle[r] - idle) <= 1e-9 * s.makespan);
        CHECK(std::abs(s.idle[r] / s.makespan - forms.of_step) <= 1e-9);
        CHECK(std::abs(s.idle[r] / s.busy[r] - forms.of_compute) <= 1e-9);
        // The one bubble tetra reports, for every schedule: the idle share of the step.
        CHECK(std::abs(s.idle[r] / s.makespan - formula) <= 1e-9);
      }
    }
  }
  // Spot values: PP = 4, m = 8.
  CHECK(tetra::bubble_formula(ScheduleKind::OneFOneB, 4, 1, 8) == doctest::Approx(3.0 / 11));
  CHECK(tetra::bubble_formula(ScheduleKind::GPipe, 4, 1, 8) == doctest::Approx(3.0 / 11));
  CHECK(tetra::bubble_formula(ScheduleKind::Interleaved, 4, 2, 8) == doctest::Approx(3.0 / 19));
  CHECK(tetra::bubble_forms(ScheduleKind::Interleaved, 4, 2, 8).of_compute ==
        doctest::Approx(3.0 / 16));
}

TEST_CASE("schedule: the simulator reports deadlocks, out-of-order links and bad lists") {
  auto F = [](int mb) { return Action{Action::Forward, mb, 0}; };
  auto B = [](int mb) { return Action{Action::Backward, mb, 0}; };
  // Rank 0 waits in B0 for rank 1's B0; rank 1 waits in F1 for rank 0's F1: a cycle.
  const tetra::SimResult dead =
      simulate({{F(0), B(0), F(1), B(1)}, {F(1), F(0), B(0), B(1)}}, 1, 2, 1.0, 2.0);
  CHECK(dead.deadlock);
  CHECK(dead.timeline[0].size() == 1);
  CHECK(dead.timeline[1].empty());
  // Runs, but rank 1 needs activation 1 before activation 0, which rank 0 sends first.
  const tetra::SimResult swapped =
      simulate({{F(0), F(1), B(0), B(1)}, {F(1), B(1), F(0), B(0)}}, 1, 2, 1.0, 2.0);
  CHECK_FALSE(swapped.deadlock);
  CHECK_FALSE(swapped.in_order);
  // A backward listed before its own forward on the last rank can never run.
  CHECK(simulate({{B(0), F(0)}}, 1, 1, 1.0, 1.0).deadlock);
  CHECK_THROWS_WITH_AS(simulate({{F(0), F(0), B(0), B(1)}}, 1, 2, 1.0, 1.0), has("twice"),
                       tetra::Error);
  CHECK_THROWS_WITH_AS(simulate({{F(0), B(0)}}, 1, 2, 1.0, 1.0), has("not 2 * V * m = 4"),
                       tetra::Error);
  CHECK_THROWS_WITH_AS(simulate({{F(0), B(2)}}, 1, 1, 1.0, 1.0), has("out of range"), tetra::Error);
  // Forward only: the forwards and nothing else.
  const auto fwd_only = tetra::ScheduleMode::ForwardOnly;
  CHECK_FALSE(simulate({{F(0), F(1)}, {F(0), F(1)}}, 1, 2, 1.0, 2.0, fwd_only).deadlock);
  CHECK_THROWS_WITH_AS(simulate({{F(0), B(0)}}, 1, 1, 1.0, 1.0, fwd_only),
                       has("runs B0.0 in a forward-only step"), tetra::Error);
  CHECK_THROWS_WITH_AS(simulate({{F(0)}}, 1, 2, 1.0, 1.0, fwd_only), has("not V * m = 2"),
                       tetra::Error);
  CHECK_THROWS_WITH_AS(simulate({{F(0), F(1)}}, 1, 2, 1.0, 1.0), has("not 2 * V * m = 4"),
                       tetra::Error);
}

TEST_CASE("schedule: schedule_problem names what keeps a list from running, before it runs") {
  using K = ScheduleKind;
  for (const Case& c : all_cases()) {
    CAPTURE(name(c));
    CHECK(tetra::schedule_problem(c.kind, c.pp, c.vpp, c.m) == "");
  }
  auto F = [](int mb) { return Action{Action::Forward, mb, 0}; };
  auto B = [](int mb) { return Action{Action::Backward, mb, 0}; };
  using tetra::schedule_problem;
  CHECK(schedule_problem({{}, {}}, K::OneFOneB, 1, 2) ==
        "1f1b PP 2, m 2: simulate: rank 0 runs 0 actions, not 2 * V * m = 4");
  CHECK(schedule_problem({{F(0), B(0), F(1), B(1)}, {F(1), F(0), B(0), B(1)}}, K::OneFOneB, 1, 2) ==
        "1f1b PP 2, m 2: deadlock: rank 0 stops at B0.0, waiting for B0.0 of rank 1; rank 1 "
        "stops at F1.0, waiting for F1.0 of rank 0 (no rank can move on)");
  CHECK(schedule_problem({{B(0), F(0)}}, K::OneFOneB, 1, 1) ==
        "1f1b PP 1, m 1: deadlock: rank 0 stops at B0.0, waiting for its own F0.0 (no rank can "
        "move on)");
  CHECK(schedule_problem({{F(0), F(1), B(0), B(1)}, {F(1), B(1), F(0), B(0)}}, K::OneFOneB, 1, 2) ==
        "1f1b PP 2, m 2: messages out of order: rank 0 sends rank 1 the activation of F0 for "
        "chunk 1 where rank 1 takes the activation of F1 for chunk 1 next");
  // GPipe's order under 1F1B's name: it runs, but holds every micro-batch on rank 0.
  CHECK(
      schedule_problem({{F(0), F(1), F(2), B(0), B(1), B(2)}, {F(0), F(1), F(2), B(0), B(1), B(2)}},
                       K::OneFOneB, 1, 3) ==
      "1f1b PP 2, m 3: rank 0 holds the activations of 3 forwards at once (their backwards not "
      "yet run), more than the schedule's 2: its backwards start too late");
}

namespace {

// The zero-bubble schedules' cases: PP 1, 2, 3, 4, 8 with m = PP, 2 PP, 3 PP + 1.
std::vector<Case> zero_bubble_cases() {
  std::vector<Case> out;
  for (int pp : {1, 2, 3, 4, 8})
    for (int m : {pp, 2 * pp, 3 * pp + 1}) out.push_back({ScheduleKind::ZeroBubbleH1, pp, 1, m});
  return out;
}

}  // namespace

TEST_CASE("schedule: zb-h1 is 1F1B's order of F and B, each W its rank's count late") {
  CHECK(tetra::parse_schedule("zb-h1") == ScheduleKind::ZeroBubbleH1);
  CHECK(tetra::splits_backward(ScheduleKind::ZeroBubbleH1));
  for (auto k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved})
    CHECK_FALSE(tetra::splits_backward(k));
  CHECK(to_string(make_schedule(ScheduleKind::ZeroBubbleH1, 4, 1, 8, 0)) ==
        "F0.0 F1.0 F2.0 F3.0 B0.0 W0.0 F4.0 B1.0 W1.0 F5.0 B2.0 W2.0 F6.0 B3.0 W3.0 F7.0 B4.0 "
        "W4.0 B5.0 W5.0 B6.0 W6.0 B7.0 W7.0");
  CHECK(to_string(make_schedule(ScheduleKind::ZeroBubbleH1, 4, 1, 8, 3)) ==
        "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 F3.0 B3.0 W0.0 F4.0 B4.0 W1.0 F5.0 B5.0 W2.0 F6.0 B6.0 "
        "W3.0 F7.0 B7.0 W4.0 W5.0 W6.0 W7.0");
  for (const Case& c : zero_bubble_cases()) {
    INFO(name(c));
    for (int r = 0; r < c.pp; ++r) {
      INFO("rank ", r);
      const auto acts = make_schedule(c.kind, c.pp, 1, c.m, r);
      REQUIRE(int(acts.size()) == 3 * c.m);
      std::vector<Action> fb, onef1b = make_schedule(ScheduleKind::OneFOneB, c.pp, 1, c.m, r);
      std::map<std::pair<int, int>, int> pos;  // (kind, micro-batch) -> index
      int next_w = 0;
      for (int i = 0; i < int(acts.size()); ++i) {
        const Action& a = acts[i];
        CHECK(a.chunk == 0);
        CHECK(pos.emplace(std::pair(int(a.kind), a.micro_batch), i).second);
        if (a.kind != Action::Weight) {
          fb.push_back(a);
          continue;
        }
        CHECK(a.micro_batch == next_w++);  // in micro-batch order
        // Right after B(w + r), or in the tail once every B has run.
        const Action& before = acts[i - 1];
        if (a.micro_batch + r < c.m)
          CHECK(before == Action{Action::Backward, a.micro_batch + r, 0});
        else
          CHECK(before.kind == Action::Weight);
      }
      CHECK(fb == onef1b);
      for (int mb = 0; mb < c.m; ++mb) {
        CHECK(pos.at({Action::Forward, mb}) < pos.at({Action::Backward, mb}));
        CHECK(pos.at({Action::Backward, mb}) < pos.at({Action::Weight, mb}));
      }
      // Forward-only: the forwards, as every schedule.
      std::vector<Action> forwards;
      for (const Action& a : acts)
        if (a.kind == Action::Forward) forwards.push_back(a);
      CHECK(make_schedule(c.kind, c.pp, 1, c.m, r, tetra::ScheduleMode::ForwardOnly) == forwards);
    }
  }
}

// ZB-H1's claim (Qi et al. 2023): with T_W <= T_F each rank idles (p - 1)(T_F + T_B - T_W)
// against 1F1B's (p - 1)(T_F + T_B + T_W), and holds no more activations than 1F1B's fullest
// rank. The simulation checks every dependency (F after the previous chunk's F, B after its
// own F and the next chunk's B, W after its own B), the links' order, and both claims.
TEST_CASE("schedule: zb-h1 simulated: dependencies met, bubble as the formula, 1F1B's memory") {
  struct Costs {
    double tf, tb, tw;
  };
  for (const Costs& k : {Costs{1, 1, 1}, Costs{1, 1, 0.5}, Costs{1, 2, 1}, Costs{2, 2, 1},
                         Costs{1, 1.5, 1}, Costs{3, 2, 0}}) {
    for (const Case& c : zero_bubble_cases()) {
      INFO(name(c), " costs F ", k.tf, " B ", k.tb, " W ", k.tw);
      const tetra::SimResult s =
          simulate(c.kind, c.pp, 1, c.m, k.tf, k.tb, tetra::ScheduleMode::Train, k.tw);
      REQUIRE_FALSE(s.deadlock);
      CHECK(s.in_order);
      CHECK(tetra::schedule_problem(c.kind, c.pp, 1, c.m) == "");
      std::map<std::tuple<int, int, int>, double> end, start;  // (kind, mb, chunk)
      for (int r = 0; r < c.pp; ++r)
        for (const tetra::TimedAction& t : s.timeline[r]) {
          const auto key = std::tuple(int(t.action.kind), t.action.micro_batch, r);
          const double cost = t.action.kind == Action::Forward    ? k.tf
                              : t.action.kind == Action::Backward ? k.tb
                                                                  : k.tw;
          CHECK(t.end == t.start + cost);
          end[key] = t.end, start[key] = t.start;
        }
      for (const auto& [key, t0] : start) {
        const auto [kind, mb, r] = key;
        if (kind == Action::Forward && r > 0) CHECK(t0 >= end.at({Action::Forward, mb, r - 1}));
        if (kind == Action::Backward) {
          CHECK(t0 >= end.at({Action::Forward, mb, r}));
          if (r + 1 < c.pp) CHECK(t0 >= end.at({Action::Backward, mb, r + 1}));
        }
        if (kind == Action::Weight) CHECK(t0 >= end.at({Action::Backward, mb, r}));
      }
      const double compute = c.m * (k.tf + k.tb + k.tw), idle = (c.pp - 1) * (k.tf + k.tb - k.tw);
      const tetra::SimResult onef1b = simulate(ScheduleKind::OneFOneB, c.pp, 1, c.m, k.tf, k.tb,
                                               tetra::ScheduleMode::Train, k.tw);
      const int onef1b_most =
          *std::max_element(onef1b.max_in_flight.begin(), onef1b.max_in_flight.end());
      for (int r = 0; r < c.pp; ++r) {
        INFO("rank ", r);
        CHECK(std::abs(s.busy[r] - compute) <= 1e-9 * compute);
        CHECK(std::abs(s.idle[r] - idle) <= 1e-9 * s.makespan);
        CHECK(s.idle[r] <= onef1b.idle[r] + 1e-9);
        CHECK(s.max_in_flight[r] == tetra::max_in_flight_bound(c.kind, c.pp, 1, c.m, r));
        CHECK(s.max_in_flight[r] <= onef1b_most);
      }
      // The formula tetra reports assumes equal costs.
      if (k.tf == k.tb && k.tb == k.tw)
        for (int r = 0; r < c.pp; ++r)
          CHECK(std::abs(s.idle[r] / s.makespan - tetra::bubble_formula(c.kind, c.pp, 1, c.m)) <=
                1e-9);
    }
  }
  // The numbers: PP 4, m 8, equal costs.
  CHECK(tetra::bubble_formula(ScheduleKind::ZeroBubbleH1, 4, 1, 8) == doctest::Approx(3.0 / 27));
  CHECK(tetra::bubble_forms(ScheduleKind::ZeroBubbleH1, 4, 1, 8).of_compute ==
        doctest::Approx(3.0 / 24));
}

// ZB-H1 at a lower W delay d (the planner's choice where the paper's delays would hold more
// than 1F1B's fullest rank): rank r runs W(i) right after B(i + min(r, d)); at
// kWeightInBackward its list is 1F1B's. Each delay keeps 1F1B's F and B order, meets every
// dependency, holds PP - r + min(r, d) micro-batches on rank r, and idles no more than a
// smaller delay; the bubble tetra reports at a lowered delay is the equal-cost simulation.
TEST_CASE("schedule: zb-h1 at lower W delays: 1F1B's order, fewer held, the bubble between") {
  const ScheduleKind zb = ScheduleKind::ZeroBubbleH1;
  CHECK_FALSE(tetra::splits_backward(zb, tetra::kWeightInBackward));
  CHECK(tetra::splits_backward(zb, 0));
  CHECK_FALSE(tetra::weight_delay_capped(zb, 4, 3));
  CHECK(tetra::weight_delay_capped(zb, 4, 2));
  CHECK_FALSE(tetra::weight_delay_capped(ScheduleKind::OneFOneB, 4, 0));
  CHECK(to_string(make_schedule(zb, 4, 1, 8, 3, tetra::ScheduleMode::Train, 1)) ==
        "F0.0 B0.0 F1.0 B1.0 W0.0 F2.0 B2.0 W1.0 F3.0 B3.0 W2.0 F4.0 B4.0 W3.0 F5.0 B5.0 W4.0 "
        "F6.0 B6.0 W5.0 F7.0 B7.0 W6.0 W7.0");
  CHECK_THROWS_WITH(make_schedule(zb, 4, 1, 8, 0, tetra::ScheduleMode::Train, -2),
                    has("W delay below -1"));
  for (const Case& c : zero_bubble_cases()) {
    double previous = 1;  // the bubble at the next smaller delay
    for (int d = tetra::kWeightInBackward; d < c.pp; ++d) {
      INFO(name(c), " W delay ", d);
      const tetra::SimResult s = simulate(zb, c.pp, 1, c.m, 1, 1, tetra::ScheduleMode::Train, 1, d);
      REQUIRE_FALSE(s.deadlock);
      CHECK(s.in_order);
      for (int r = 0; r < c.pp; ++r) {
        INFO("rank ", r);
        const auto acts = make_schedule(zb, c.pp, 1, c.m, r, tetra::ScheduleMode::Train, d);
        const auto onef1b = make_schedule(ScheduleKind::OneFOneB, c.pp, 1, c.m, r);
        if (d == tetra::kWeightInBackward) {
          CHECK(acts == onef1b);
          continue;
        }
        std::vector<Action> fb;
        for (size_t i = 0; i < acts.size(); ++i) {
          if (acts[i].kind != Action::Weight) {
            fb.push_back(acts[i]);
            continue;
          }
          const int late = std::min(r, d), w = acts[i].micro_batch;
          if (w + late < c.m)
            CHECK(acts[i - 1] == Action{Action::Backward, w + late, 0});
          else
            CHECK(acts[i - 1].kind == Action::Weight);
        }
        CHECK(fb == onef1b);
        CHECK(s.max_in_flight[r] == std::min(c.pp - r + std::min(r, d), c.m));
      }
      CHECK(s.bubble() <= previous + 1e-12);
      previous = s.bubble();
      CHECK(tetra::bubble_formula(zb, c.pp, 1, c.m, d) == doctest::Approx(s.bubble()));
      if (d == tetra::kWeightInBackward)
        CHECK(s.bubble() ==
              doctest::Approx(tetra::bubble_formula(ScheduleKind::OneFOneB, c.pp, 1, c.m)));
    }
    // At PP - 1 it is the paper's schedule, whose bubble has the closed form.
    CHECK(previous == doctest::Approx(tetra::bubble_formula(zb, c.pp, 1, c.m)));
    for (int r = 0; r < c.pp; ++r)
      CHECK(make_schedule(zb, c.pp, 1, c.m, r, tetra::ScheduleMode::Train, c.pp - 1) ==
            make_schedule(zb, c.pp, 1, c.m, r));
  }
}

TEST_CASE("schedule: the simulator holds W to its own B and counts it in the lists") {
  auto F = [](int mb) { return Action{Action::Forward, mb, 0}; };
  auto B = [](int mb) { return Action{Action::Backward, mb, 0}; };
  auto W = [](int mb) { return Action{Action::Weight, mb, 0}; };
  CHECK(simulate({{F(0), W(0), B(0)}}, 1, 1, 1.0, 1.0).deadlock);
  CHECK(tetra::schedule_problem({{F(0), W(0), B(0)}}, ScheduleKind::ZeroBubbleH1, 1, 1)
            .find("waiting for its own B0.0") != std::string::npos);
  CHECK_FALSE(simulate({{F(0), B(0), W(0)}}, 1, 1, 1.0, 1.0).deadlock);
  CHECK_THROWS_WITH_AS(simulate({{F(0), B(0), W(0), F(1), B(1)}}, 1, 2, 1.0, 1.0),
                       has("not 3 * V * m = 6"), tetra::Error);
  // Activations stay until W: two forwards before the first W are two in flight.
  CHECK(simulate({{F(0), B(0), F(1), W(0), B(1), W(1)}}, 1, 2, 1.0, 1.0).max_in_flight[0] == 2);
  CHECK_THROWS_WITH_AS(tetra::check_schedule(ScheduleKind::ZeroBubbleH1, 2, 2, 4),
                       has("needs `layout.schedule` interleaved"), tetra::Error);
}
