// ZB-V: the order comes from running the V-placed pipeline with unit costs, T_F = T_B = T_W = 1
// per chunk, and letting every rank that is free at time t take, of the passes whose inputs
// exist at t, in this order:
//
//   1. a forward, the one of virtual stage 1 first (it is nearer the loss, so its backward
//      comes sooner), unless the rank already holds 2 PP activations (the memory cap below);
//   2. a W, when a forward is ready but held back by the cap (W is what frees an activation);
//   3. a B, virtual stage 0's first (its gradient leaves the rank, the other's stays for the
//      turn at rank PP - 1 or for the loss);
//   4. a W (the rest fill what would be idle);
//   5. nothing: the rank idles until t + 1.
//
// Each chunk takes its micro-batches in order for each kind of pass (F(i) before F(i + 1), and
// the same for B and W), so weight gradients accumulate in the same order under every
// schedule. The activations of (micro-batch, chunk) live from F to W, and a chunk is half a
// stage: the cap of 2 PP is PP micro-batches of a whole stage, what 1F1B's rank 0 holds.
//
// What this gives, with equal costs: rank p - 1 starts at t = p - 1 (its first input is p - 1
// forwards away) and no rank idles after its start but where the others wait for the same
// tail, so the step takes 6 m + p - 1 and every rank idles p - 1 chunk passes: a bubble of
// (p - 1) / (6 m + p - 1) of the step, the floor of any order on this placement (the first
// forward of rank p - 1 cannot start earlier). tests/unit/test_schedule_v.cpp simulates it
// for p <= 8 and m from p to 4 p + 2. With unequal costs the lists stay valid (an order that
// cannot deadlock at one set of costs cannot at any), only the bubble differs.
//
// PP 2, m 2 (F0.1 = forward of micro-batch 0 on virtual stage 1, rank r's chunk 2 PP - 1 - r;
// rank 0 idles at t = 2, waiting for F0 of chunk 2, rank 1 at t = 0 and at the end):
//
//   rank 0: F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 W0.0 B1.0 W1.0 W0.1 W1.1
//   rank 1: F0.0 F0.1 F1.0 F1.1 B0.1 B0.0 B1.1 B1.0 W0.0 W1.0 W0.1 W1.1
#include "parallel/schedule_v.hpp"

#include <climits>
#include <string>

#include "util/error.hpp"

namespace tetra {

namespace {

// The lists of one (PP, m): make_schedule asks rank by rank, so the last answer is kept.
struct Lists {
  int pp = 0, m = 0;
  std::vector<std::vector<Action>> ranks;
};

std::vector<std::vector<Action>> run_greedy(int pp, int m) {
  const int K = 2 * pp, cap = 2 * pp;
  // End times of F(mb, k) and B(mb, k), INT_MAX until they ran.
  std::vector<int> f_end(size_t(m) * K, INT_MAX), b_end(size_t(m) * K, INT_MAX);
  const auto at = [&](std::vector<int>& t, int mb, int k) -> int& { return t[size_t(mb) * K + k]; };
  struct Rank {
    int next[3][2] = {};  // [kind][virtual stage]: the next micro-batch of that pass
    int in_flight = 0;    // forwards whose W has not run
  };
  std::vector<Rank> ranks(pp);
  std::vector<std::vector<Action>> lists(pp);
  int left = 6 * m * pp;
  for (int t = 0; left > 0; ++t) {
    // Decide every rank's pass at t from the state at t, then record them (a pass started at
    // t ends at t + 1 and is no one's input before then).
    std::vector<std::pair<int, Action>> started;
    for (int r = 0; r < pp; ++r) {
      Rank& s = ranks[r];
      const auto ready = [&](Action::Kind kind, int v) {
        const int mb = s.next[kind][v], k = chunk_id(Placement::V, pp, r, v);
        if (mb >= m) return false;
        if (kind == Action::Forward) return k == 0 || at(f_end, mb, k - 1) <= t;
        if (kind == Action::Backward)
          return at(f_end, mb, k) <= t && (k == K - 1 || at(b_end, mb, k + 1) <= t);
        return at(b_end, mb, k) <= t;
      };
      const auto first = [&](Action::Kind kind, int v0) -> int {
        for (int v : {v0, 1 - v0})
          if (ready(kind, v)) return v;
        return -1;
      };
      const int f = first(Action::Forward, 1), b = first(Action::Backward, 0),
                w = first(Action::Weight, 0);
      Action::Kind kind;
      int v;
      if (f >= 0 && s.in_flight < cap)
        kind = Action::Forward, v = f;
      else if (f >= 0 && w >= 0)
        kind = Action::Weight, v = w;
      else if (b >= 0)
        kind = Action::Backward, v = b;
      else if (w >= 0)
        kind = Action::Weight, v = w;
      else
        continue;
      started.push_back({r, Action{kind, s.next[kind][v]++, v}});
    }
    check(!started.empty(), "zb-v: no rank can move at t = ", t, " (PP ", pp, ", m ", m, ")");
    for (const auto& [r, a] : started) {
      const int k = chunk_id(Placement::V, pp, r, a.chunk);
      if (a.kind == Action::Forward) at(f_end, a.micro_batch, k) = t + 1, ++ranks[r].in_flight;
      if (a.kind == Action::Backward) at(b_end, a.micro_batch, k) = t + 1;
      if (a.kind == Action::Weight) --ranks[r].in_flight;
      lists[r].push_back(a);
      --left;
    }
  }
  return lists;
}

}  // namespace

const std::vector<std::vector<Action>>& zero_bubble_v(int pp, int m) {
  check_schedule(ScheduleKind::ZeroBubbleV, pp, 2, m);
  thread_local Lists last;
  if (last.pp != pp || last.m != m) last = {pp, m, run_greedy(pp, m)};
  return last.ranks;
}

}  // namespace tetra
