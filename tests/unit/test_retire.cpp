// Which sends a pipeline receive retires (parallel/retire.hpp), for every schedule: each
// retired message is one the rank sent to another rank, retired once; the receive that
// retires it comes, in a simulation with any costs, after the peer has received it; and the
// messages a rank holds sent do not grow with m (but under GPipe, whose forwards get nothing
// back before the backwards).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "parallel/retire.hpp"
#include "parallel/schedule.hpp"

using tetra::Action;
using tetra::PipeMessage;
using tetra::ScheduleKind;
using tetra::ScheduleMode;

namespace {

struct Case {
  ScheduleKind kind;
  int pp, vpp, m;
};

using Key = std::tuple<bool, int, int>;  // gradient, receiving chunk, micro-batch
Key key(const PipeMessage& x) {
  return {x.gradient, x.chunk, x.micro_batch};
}

// Per rank: the message each action receives from another rank (with the action's index) and
// the messages it sends to another rank, by the placement's chunk ranks.
struct Traffic {
  std::vector<std::map<Key, size_t>> receives;  // [rank]: message -> action index
  std::vector<std::map<Key, int>> sends;        // [rank]: message -> index of its send
  std::vector<std::vector<int>> sent_at;        // [rank][action]: sends made there (0 or 1)
};

Traffic traffic(const Case& c, ScheduleMode mode) {
  const tetra::Placement place = tetra::placement(c.kind);
  const int K = c.pp * c.vpp;
  Traffic t;
  t.receives.resize(c.pp);
  t.sends.resize(c.pp);
  t.sent_at.resize(c.pp);
  for (int r = 0; r < c.pp; ++r) {
    const auto acts = tetra::make_schedule(c.kind, c.pp, c.vpp, c.m, r, mode);
    t.sent_at[r].assign(acts.size(), 0);
    for (size_t i = 0; i < acts.size(); ++i) {
      const Action& a = acts[i];
      const int k = tetra::chunk_id(place, c.pp, r, a.chunk);
      const auto rank_of = [&](int chunk) { return tetra::chunk_rank(place, c.pp, c.vpp, chunk); };
      if (a.kind == Action::Forward) {
        if (k > 0 && rank_of(k - 1) != r) t.receives[r][{false, k, a.micro_batch}] = i;
        if (k + 1 < K && rank_of(k + 1) != r) {
          t.sends[r][{false, k + 1, a.micro_batch}] = int(i);
          t.sent_at[r][i] = 1;
        }
      } else if (a.kind == Action::Backward) {
        if (k + 1 < K && rank_of(k + 1) != r) t.receives[r][{true, k, a.micro_batch}] = i;
        if (k > 0 && rank_of(k - 1) != r) {
          t.sends[r][{true, k - 1, a.micro_batch}] = int(i);
          t.sent_at[r][i] = 1;
        }
      }
    }
  }
  return t;
}

// The most messages `rank` holds sent, over its list: made and not yet retired.
int most_held(const Case& c, int rank) {
  const Traffic t = traffic(c, ScheduleMode::Train);
  const auto retired = tetra::retired_sends(c.kind, c.pp, c.vpp, c.m, rank);
  int held = 0, most = 0;
  for (size_t i = 0; i + 1 < retired.first.size(); ++i) {
    held -= int(retired.at(i).size());  // the receive comes first in the action
    held += t.sent_at[rank][i];
    most = std::max(most, held);
  }
  return most;
}

std::string name(const Case& c) {
  return std::string(tetra::schedule_name(c.kind)) + " PP=" + std::to_string(c.pp) +
         " V=" + std::to_string(c.vpp) + " m=" + std::to_string(c.m);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int p : {2, 3, 4, 8})
    for (int m : {p, 2 * p, 3 * p + 1, 4 * p + 2}) {
      out.push_back({ScheduleKind::GPipe, p, 1, m});
      out.push_back({ScheduleKind::OneFOneB, p, 1, m});
      out.push_back({ScheduleKind::ZeroBubbleH1, p, 1, m});
      out.push_back({ScheduleKind::ZeroBubbleV, p, 2, m});
      const int whole = m / p * p;  // interleaved needs p | m
      out.push_back({ScheduleKind::Interleaved, p, 2, whole});
      out.push_back({ScheduleKind::Interleaved, p, 3, whole});
    }
  return out;
}

}  // namespace

TEST_CASE("retire: each receive retires only sends its peer has received, each once") {
  // Costs (forward, B, W): equal, a slow backward, a slow forward. The simulator starts each
  // action once its input exists, so a retiring action starting before the peer's receive of
  // what it retires has ended would be caught under some costs.
  const std::vector<std::tuple<double, double, double>> costs = {
      {1, 1, 1}, {1, 3, 0.5}, {2.5, 1, 0.25}};
  for (const Case& c : cases())
    for (ScheduleMode mode : {ScheduleMode::Train, ScheduleMode::ForwardOnly}) {
      INFO(name(c), mode == ScheduleMode::Train ? " train" : " forward only");
      const Traffic t = traffic(c, mode);
      for (const auto& [tf, tb, tw] : costs) {
        const tetra::SimResult s = tetra::simulate(c.kind, c.pp, c.vpp, c.m, tf, tb, mode, tw);
        REQUIRE_FALSE(s.deadlock);
        for (int r = 0; r < c.pp; ++r) {
          const auto retired = tetra::retired_sends(c.kind, c.pp, c.vpp, c.m, r, mode);
          REQUIRE(retired.first.size() == s.timeline[r].size() + 1);
          std::map<Key, int> times;  // how often each message is retired
          for (size_t i = 0; i < s.timeline[r].size(); ++i)
            for (const PipeMessage& x : retired.at(i)) {
              CAPTURE(r);
              CAPTURE(i);
              REQUIRE(t.sends[r].count(key(x)));  // a message this rank sends to another
              CHECK(t.sends[r].at(key(x)) < int(i));
              ++times[key(x)];
              // Its receiver: the rank whose receives hold it.
              int peer = -1;
              for (int q = 0; q < c.pp; ++q)
                if (t.receives[q].count(key(x))) peer = q;
              REQUIRE(peer >= 0);
              CHECK(s.timeline[r][i].start >= s.timeline[peer][t.receives[peer].at(key(x))].end);
            }
          for (const auto& [k, n] : times) CHECK(n == 1);
        }
      }
    }
}

// to_peer, the order the executor posts each link's messages in: for every peer, exactly the
// messages this rank sends it, sorted by the index of the peer's action that receives each.
TEST_CASE("retire: each link's messages in the order its receiver takes them") {
  const tetra::Placement looped = tetra::Placement::Looped;
  for (const Case& c : cases())
    for (ScheduleMode mode : {ScheduleMode::Train, ScheduleMode::ForwardOnly}) {
      INFO(name(c), mode == ScheduleMode::Train ? " train" : " forward only");
      const Traffic t = traffic(c, mode);
      for (int r = 0; r < c.pp; ++r) {
        std::map<int, std::vector<std::pair<size_t, Key>>> expect;  // peer -> (its index, msg)
        for (const auto& [k, sent] : t.sends[r])
          for (int q = 0; q < c.pp; ++q)
            if (t.receives[q].count(k)) expect[q].push_back({t.receives[q].at(k), k});
        const auto retired = tetra::retired_sends(c.kind, c.pp, c.vpp, c.m, r, mode);
        std::map<int, std::vector<Key>> got;
        for (const auto& [q, messages] : retired.to_peer) {
          CHECK(q != r);
          for (const PipeMessage& x : messages) got[q].push_back(key(x));
          if (got[q].empty()) got.erase(q);
        }
        std::map<int, std::vector<Key>> want;
        for (auto& [q, list] : expect) {
          std::sort(list.begin(), list.end());
          for (const auto& [i, k] : list) want[q].push_back(k);
        }
        CAPTURE(r);
        CHECK(got == want);
        // The looped schedules make them in that order too (SimResult::in_order).
        if (tetra::placement(c.kind) == looped)
          for (const auto& [q, keys] : want) {
            std::vector<std::pair<int, Key>> made;
            for (const Key& k : keys) made.push_back({t.sends[r].at(k), k});
            CHECK(std::is_sorted(made.begin(), made.end()));
          }
      }
    }
}

TEST_CASE("retire: the messages a rank holds sent do not grow with m, but under GPipe") {
  for (int p : {2, 3, 4, 8})
    for (int r = 0; r < p; ++r) {
      CAPTURE(p);
      CAPTURE(r);
      for (const auto& [kind, vpp] :
           std::vector<std::pair<ScheduleKind, int>>{{ScheduleKind::OneFOneB, 1},
                                                     {ScheduleKind::ZeroBubbleH1, 1},
                                                     {ScheduleKind::Interleaved, 2},
                                                     {ScheduleKind::ZeroBubbleV, 2}}) {
        const int at_2p = most_held({kind, p, vpp, 2 * p}, r);
        const int at_4p = most_held({kind, p, vpp, 4 * p}, r);
        CAPTURE(std::string(tetra::schedule_name(kind)));
        CHECK(at_4p == at_2p);
        // No more than the chunk activations the schedule's fullest rank holds in flight: p
        // for 1f1b and zb-h1, 2p for zb-v, (V + 1) p - 1 for interleaved.
        CHECK(at_4p <= tetra::max_in_flight_bound(kind, p, vpp, 4 * p, 0));
      }
      // GPipe: every forward's activation until the first gradient comes back, then every
      // gradient to the previous rank, which sends nothing more: m either way.
      const int m = 4 * p + 2;
      CHECK(most_held({ScheduleKind::GPipe, p, 1, m}, r) == m);
    }
}
