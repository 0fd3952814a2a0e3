// Pipeline schedules and their simulator; see schedule.hpp for the contract.
//
// GPipe: all m forwards, then all m backwards, both in micro-batch order 0..m-1 (the same
// order as 1F1B, so gradients accumulate identically; reverse order would be just as valid
// for the dependencies, since every rank finishes all forwards before its first backward).
//
// 1F1B (PipeDream-Flush, Megatron's non-interleaved schedule): rank r runs
// W = min(PP - r - 1, m) warm-up forwards, then alternates one forward and one backward,
// then runs the remaining W backwards. PP = 4, m = 8 (F3 = forward of micro-batch 3):
//
//   rank 0: F0 F1 F2 | F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 | B5 B6 B7
//   rank 1: F0 F1    | F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 | B6 B7
//   rank 2: F0       | F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 | B7
//   rank 3:          | F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7
//
// Interleaved 1F1B (Narayanan et al. 2021, Megatron's interleaved schedule): each rank owns
// V chunks and runs V m forwards and V m backwards. The k-th forward of a rank is micro-batch
// (k / (PP V)) PP + k % PP of chunk (k / PP) % V: groups of PP micro-batches sweep through
// chunk 0, then chunk 1, ... The k-th backward is the same micro-batch of chunk
// V - 1 - (k / PP) % V. Warm-up W = min(2 (PP - r - 1) + (V - 1) PP, V m) forwards, then
// forward W + i alternates with backward i, then the remaining backwards. PP = 2, V = 2,
// m = 4, rank 0 (F1.0 = forward of micro-batch 1 on virtual stage 0):
//
//   F0.0 F1.0 F0.1 F1.1 | F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 | B2.1 B3.1 B2.0 B3.0
//
// ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", the schedule with 1F1B's
// memory): 1F1B's order of F and B, each backward split into B and W, and rank r running its
// W passes r micro-batches late: W(i) right after B(i + r), the last r of them at the end.
// The last rank fills its wait for the next activation with W, the first ranks their wait for
// gradients in the cool-down; each rank idles (p - 1)(T_F + T_B - T_W) instead of 1F1B's
// (p - 1)(T_F + T_B + T_W), and holds p micro-batches' activations at most (1F1B's rank 0):
//
//   rank 0: F0 F1 F2 | F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 | B5 W5 B6 W6 B7 W7
//   rank 3:          | F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 ... F7 B7 W4 | W5 W6 W7
//
// Where that holds more than 1F1B's fullest rank the planner lowers the delay to min(r, d)
// (schedule.hpp, weight_delay), or puts each W back inside its B (1F1B's list).
//
// ZB-V (the same paper's V schedule): parallel/schedule_v.cpp.
#include "parallel/schedule.hpp"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

#include "parallel/schedule_v.hpp"
#include "util/error.hpp"

namespace tetra {

ScheduleKind parse_schedule(const std::string& name) {
  for (size_t i = 0; i < kScheduleNames.size(); ++i)
    if (name == kScheduleNames[i]) return ScheduleKind(i);
  std::string names;
  for (size_t i = 0; i < kScheduleNames.size(); ++i)
    names += (i == 0 ? "" : i + 1 == kScheduleNames.size() ? " or " : ", ") + kScheduleNames[i];
  fail("unknown pipeline schedule '", name, "' (`layout.schedule` takes ", names, ")");
}

bool splits_backward(ScheduleKind kind, int weight_delay) {
  return (kind == ScheduleKind::ZeroBubbleH1 && weight_delay >= 0) ||
         kind == ScheduleKind::ZeroBubbleV;
}

Placement placement(ScheduleKind kind) {
  return kind == ScheduleKind::ZeroBubbleV ? Placement::V : Placement::Looped;
}

int chunk_rank(Placement placement, int pp, int vpp, int k) {
  check(k >= 0 && k < pp * vpp, "model chunk ", k, " is outside 0..", pp * vpp - 1);
  if (placement == Placement::V) return k < pp ? k : 2 * pp - 1 - k;
  return k % pp;
}

int chunk_id(Placement placement, int pp, int rank, int v) {
  if (placement == Placement::V) return v == 0 ? rank : 2 * pp - 1 - rank;
  return v * pp + rank;
}

int chunk_virtual_stage(Placement placement, int pp, int k) {
  return placement == Placement::V ? int(k >= pp) : k / pp;
}

int head_rank(Placement placement, int pp) {
  return placement == Placement::V ? 0 : pp - 1;
}

char action_letter(Action::Kind kind) {
  return kind == Action::Forward ? 'F' : kind == Action::Backward ? 'B' : 'W';
}

const char* schedule_name(ScheduleKind kind) {
  return size_t(kind) < kScheduleNames.size() ? kScheduleNames[size_t(kind)].c_str() : "?";
}

void check_schedule(ScheduleKind kind, int pp, int vpp, int m) {
  check(pp >= 1, "`layout.pp` must be at least 1 (got ", pp, ")");
  check(vpp >= 1, "`layout.vpp` must be at least 1 (got ", vpp, ")");
  check(m >= pp,
        "the pipeline needs at least PP micro-batches per step: `batch.global_batch` / (DP * ",
        "micro-batch) = ", m, " micro-batch", m == 1 ? "" : "es", ", fewer than PP = ", pp,
        " stages");
  check(int64_t(vpp) * m <= kMaxPasses, "`batch.global_batch` / (DP * micro-batch) = ", m,
        " micro-batches times `layout.vpp` ", vpp, " is ", int64_t(vpp) * m,
        " passes per stage and step, more than tetra's limit of ", kMaxPasses);
  check(kind != ScheduleKind::ZeroBubbleV || vpp == 2,
        "`layout.schedule` zb-v places two chunks on each rank: `layout.vpp` must be 2 (got ", vpp,
        ")");
  check(vpp == 1 || kind == ScheduleKind::Interleaved || kind == ScheduleKind::ZeroBubbleV,
        "`layout.vpp` ", vpp, " needs `layout.schedule` interleaved (got ", schedule_name(kind),
        ")");
  check(kind != ScheduleKind::Interleaved || m % pp == 0,
        "`layout.schedule` interleaved needs the micro-batch count to be a multiple of PP: ",
        "`batch.global_batch` / (DP * micro-batch) = ", m, " is not a multiple of PP = ", pp);
}

namespace {

void check_rank(int pp, int rank) {
  check(rank >= 0 && rank < pp, "pipeline rank ", rank, " is outside 0..", pp - 1);
}

// Interleaved with V == 1 is plain 1F1B.
bool is_interleaved(ScheduleKind kind, int vpp) {
  return kind == ScheduleKind::Interleaved && vpp > 1;
}

}  // namespace

int warmup_forwards(ScheduleKind kind, int pp, int vpp, int m, int rank) {
  check_schedule(kind, pp, vpp, m);
  check_rank(pp, rank);
  if (kind == ScheduleKind::GPipe) return m;
  if (kind == ScheduleKind::ZeroBubbleV) {
    int w = 0;
    for (const Action& a : zero_bubble_v(pp, m)[size_t(rank)]) {
      if (a.kind != Action::Forward) break;
      ++w;
    }
    return w;
  }
  if (!is_interleaved(kind, vpp)) return std::min(pp - rank - 1, m);
  // Megatron's count: (V - 1) PP forwards for the sweeps through the earlier chunks, then
  // 2 (PP - r - 1) to keep rank r busy while micro-batch 0 runs to the last rank and its
  // gradient comes back. With zero communication time PP - r - 1 would do (the simulator
  // gives the same makespan); the rest is slack for transfer latency.
  return std::min(2 * (pp - rank - 1) + (vpp - 1) * pp, vpp * m);
}

int max_in_flight_bound(ScheduleKind kind, int pp, int vpp, int m, int rank) {
  // 1F1B's warm-up and steady forward, plus the rank W passes it runs late.
  if (kind == ScheduleKind::ZeroBubbleH1) return std::min(pp, m);
  if (kind == ScheduleKind::ZeroBubbleV) return 2 * pp;  // schedule_v.cpp's cap (m >= PP)
  const int total = (kind == ScheduleKind::Interleaved ? vpp : 1) * m;
  const int w = warmup_forwards(kind, pp, vpp, m, rank);
  // Warm-up leaves w in flight; the steady state's forward raises that to w + 1 before its
  // backward lowers it again, unless there is no steady state (w == total).
  return std::min(w + 1, total);
}

std::vector<Action> make_schedule(ScheduleKind kind, int pp, int vpp, int m, int rank,
                                  ScheduleMode mode, int weight_delay) {
  check(weight_delay >= kWeightInBackward, "make_schedule: a W delay below -1: ", weight_delay);
  const int w = warmup_forwards(kind, pp, vpp, m, rank);
  const int v = vpp;
  const int total = v * m;  // forwards (and backwards) on this rank; v == 1 unless interleaved
  // k-th forward / backward of this rank. For v == 1 both reduce to micro-batch k, chunk 0.
  auto forward = [&](int k) {
    return Action{Action::Forward, (k / (pp * v)) * pp + k % pp, (k / pp) % v};
  };
  auto backward = [&](int k) {
    return Action{Action::Backward, (k / (pp * v)) * pp + k % pp, v - 1 - (k / pp) % v};
  };
  std::vector<Action> out;
  out.reserve((splits_backward(kind, weight_delay) ? 3 : 2) * total);
  if (mode == ScheduleMode::ForwardOnly) {  // the training list's forwards, in its order
    if (kind == ScheduleKind::ZeroBubbleV) {
      for (const Action& a : make_schedule(kind, pp, vpp, m, rank))
        if (a.kind == Action::Forward) out.push_back(a);
      return out;
    }
    for (int k = 0; k < total; ++k) out.push_back(forward(k));
    return out;
  }
  if (kind == ScheduleKind::ZeroBubbleV) {
    return zero_bubble_v(pp, m)[size_t(rank)];  // warmup_forwards checked the rank
  }
  if (kind == ScheduleKind::ZeroBubbleH1 && weight_delay >= 0) {  // 1F1B's, W(i) after B(i + d)
    const int delay = std::min(rank, weight_delay);
    int b = 0, wp = 0;
    auto backward_then_late_weight = [&] {
      out.push_back({Action::Backward, b++, 0});
      if (b - wp > delay) out.push_back({Action::Weight, wp++, 0});
    };
    for (int k = 0; k < w; ++k) out.push_back(forward(k));
    for (int i = 0; i < m - w; ++i) out.push_back(forward(w + i)), backward_then_late_weight();
    while (b < m) backward_then_late_weight();
    while (wp < m) out.push_back({Action::Weight, wp++, 0});
    return out;
  }
  // exercise(pp_1f1b_order) begin
  for (int k = 0; k < w; ++k) out.push_back(forward(k));
  for (int i = 0; i < total - w; ++i) {
    out.push_back(forward(w + i));
    out.push_back(backward(i));
  }
  for (int k = total - w; k < total; ++k) out.push_back(backward(k));
  // exercise(pp_1f1b_order) end
  return out;
}

bool weight_delay_capped(ScheduleKind kind, int pp, int weight_delay) {
  return kind == ScheduleKind::ZeroBubbleH1 && weight_delay < pp - 1;
}

std::string weight_delay_text(int weight_delay) {
  if (weight_delay == kWeightInBackward) return "each block's W inside its B, as 1f1b runs it";
  if (weight_delay == 0) return "each W right after its own B";
  const std::string d = std::to_string(weight_delay);
  return "its W at most " + d + " micro-batch" + (weight_delay == 1 ? "" : "es") +
         " late (rank r min(r, " + d + "))";
}

BubbleForms bubble_forms(ScheduleKind kind, int pp, int vpp, int m, int weight_delay) {
  check_schedule(kind, pp, vpp, m);
  if (weight_delay_capped(kind, pp, weight_delay)) {
    const double of_step =
        simulate(kind, pp, vpp, m, 1, 1, ScheduleMode::Train, 1, weight_delay).bubble();
    return {of_step, of_step / (1 - of_step)};
  }
  // Step = compute + idle, in units of one (F + B + W) per micro-batch per chunk, with F, B and
  // W equal: idle (p - 1) of those units, or (p - 1) / 3 of them where the backward is split
  // (ZB-H1, and ZB-V with its V = 2 chunks of half a stage).
  const double units = double(vpp) * m * (splits_backward(kind) ? 3 : 1);
  return {(pp - 1) / (units + pp - 1), (pp - 1) / units};
}

const char* bubble_formula_text(ScheduleKind kind) {
  if (kind == ScheduleKind::Interleaved) return "(p-1)/(V*m+p-1)";
  if (kind == ScheduleKind::ZeroBubbleH1) return "(p-1)/(3m+p-1)";
  if (kind == ScheduleKind::ZeroBubbleV) return "(p-1)/(6m+p-1)";
  return "(p-1)/(m+p-1)";
}

double bubble_formula(ScheduleKind kind, int pp, int vpp, int m, int weight_delay) {
  return bubble_forms(kind, pp, vpp, m, weight_delay).of_step;
}

std::string to_string(const std::vector<Action>& actions) {
  std::ostringstream os;
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    os << (i ? " " : "") << action_letter(a.kind) << a.micro_batch << '.' << a.chunk;
  }
  return os.str();
}

double SimResult::bubble() const {
  if (idle.empty() || makespan <= 0) return 0;
  double sum = 0;
  for (double i : idle) sum += i / makespan;
  return sum / double(idle.size());
}

SimResult simulate(ScheduleKind kind, int pp, int vpp, int m, const std::vector<PassCosts>& costs,
                   ScheduleMode mode, int weight_delay) {
  check_schedule(kind, pp, vpp, m);
  std::vector<std::vector<Action>> ranks;
  for (int r = 0; r < pp; ++r)
    ranks.push_back(make_schedule(kind, pp, vpp, m, r, mode, weight_delay));
  return simulate(ranks, vpp, m, costs, mode, placement(kind));
}

SimResult simulate(ScheduleKind kind, int pp, int vpp, int m, double tf, double tb,
                   ScheduleMode mode, double tw, int weight_delay) {
  check_schedule(kind, pp, vpp, m);  // before PP V costs are allocated
  return simulate(kind, pp, vpp, m, std::vector<PassCosts>(size_t(pp) * vpp, {tf, tb, tw}), mode,
                  weight_delay);
}

SimResult simulate(const std::vector<std::vector<Action>>& ranks, int vpp, int m, double tf,
                   double tb, ScheduleMode mode, double tw, Placement place) {
  // (V below 1 is refused by the simulation, before these costs are read.)
  const std::vector<PassCosts> costs(ranks.size() * size_t(std::max(vpp, 1)), {tf, tb, tw});
  return simulate(ranks, vpp, m, costs, mode, place);
}

SimResult simulate(const std::vector<std::vector<Action>>& ranks, int vpp, int m,
                   const std::vector<PassCosts>& costs, ScheduleMode mode, Placement place) {
  const int pp = int(ranks.size());
  check(pp >= 1 && vpp >= 1 && m >= 1, "simulate: need PP, V and m at least 1");
  const int chunks = pp * vpp;
  check(int(costs.size()) == chunks, "simulate: ", costs.size(), " chunks' costs for ", chunks,
        " chunks");
  for (const PassCosts& c : costs)
    check(c.f >= 0 && c.b >= 0 && c.w >= 0, "simulate: costs must not be negative");
  // Every list must hold F and B (and W where split; ForwardOnly: F) of each (micro-batch,
  // own chunk) exactly once.
  const bool train = mode == ScheduleMode::Train;
  bool split = false;
  for (const std::vector<Action>& list : ranks)
    for (const Action& a : list) split = split || a.kind == Action::Weight;
  const int kinds = train ? (split ? 3 : 2) : 1;
  for (int r = 0; r < pp; ++r) {
    std::vector<int> seen(size_t(kinds) * m * vpp, 0);
    for (const Action& a : ranks[r]) {
      check(a.micro_batch >= 0 && a.micro_batch < m && a.chunk >= 0 && a.chunk < vpp,
            "simulate: rank ", r, " has an action out of range: ", to_string({a}));
      check(train || a.kind == Action::Forward, "simulate: rank ", r, " runs ", to_string({a}),
            " in a forward-only step");
      check(++seen[(size_t(a.kind) * m + a.micro_batch) * vpp + a.chunk] == 1, "simulate: rank ", r,
            " runs ", to_string({a}), " twice");
    }
    check(ranks[r].size() == seen.size(), "simulate: rank ", r, " runs ", ranks[r].size(),
          " actions, not ",
          !train  ? "V * m = "
          : split ? "3 * V * m = "
                  : "2 * V * m = ",
          seen.size());
  }

  // End times of F(mb, k) and B(mb, k) by model chunk k, or kNotYet.
  constexpr double kNotYet = -1;
  std::vector<double> f_end(size_t(m) * chunks, kNotYet), b_end(size_t(m) * chunks, kNotYet);
  // What action a of model chunk k costs: B is the whole backward where no W is apart.
  auto cost = [&](Action::Kind a, int k) {
    const PassCosts& c = costs[size_t(k)];
    return a == Action::Forward ? c.f : a == Action::Weight ? c.w : split ? c.b : c.b + c.w;
  };
  auto at = [&](std::vector<double>& t, int mb, int k) -> double& {
    return t[size_t(mb) * chunks + k];
  };

  SimResult res;
  res.busy.assign(pp, 0);
  res.idle.assign(pp, 0);
  res.max_in_flight.assign(pp, 0);
  res.timeline.assign(pp, {});
  std::vector<size_t> next(pp, 0);
  std::vector<double> clock(pp, 0);
  std::vector<int> in_flight(pp, 0);

  // Each rank runs its list in order; an action starts when the rank is free and its input
  // is done. Start times depend only on those two, so sweeping the ranks until nobody can
  // move gives the same timeline as a time-ordered event queue.
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < pp; ++r) {
      while (next[r] < ranks[r].size()) {
        const Action& a = ranks[r][next[r]];
        const int k = chunk_id(place, pp, r, a.chunk);
        double ready = 0;
        if (a.kind == Action::Forward) {
          ready = k > 0 ? at(f_end, a.micro_batch, k - 1) : 0;
        } else if (a.kind == Action::Weight) {
          ready = at(b_end, a.micro_batch, k);  // its own B
        } else {
          ready = k + 1 < chunks ? at(b_end, a.micro_batch, k + 1) : at(f_end, a.micro_batch, k);
          // The rank's own forward too: a list may put B(mb, k) before F(mb, k).
          if (at(f_end, a.micro_batch, k) == kNotYet) ready = kNotYet;
        }
        if (ready == kNotYet) break;
        const bool fwd = a.kind == Action::Forward;
        const double start = std::max(clock[r], ready), end = start + cost(a.kind, k);
        if (a.kind != Action::Weight) at(fwd ? f_end : b_end, a.micro_batch, k) = end;
        clock[r] = end;
        res.busy[r] += end - start;
        res.timeline[r].push_back({a, start, end});
        // Activations are kept from F until the backward's last pass (W where split).
        if (train && (fwd || a.kind == (split ? Action::Weight : Action::Backward)))
          in_flight[r] += fwd ? 1 : -1;
        res.max_in_flight[r] = std::max(res.max_in_flight[r], in_flight[r]);
        ++next[r];
        moved = true;
      }
    }
  }
  for (int r = 0; r < pp; ++r) {
    res.deadlock = res.deadlock || next[r] < ranks[r].size();
    res.makespan = std::max(res.makespan, clock[r]);
  }
  for (int r = 0; r < pp; ++r) res.idle[r] = res.makespan - res.busy[r];

  // Message order per link: the sender's send order against the receiver's order of the
  // actions that consume them. A message is (0 activation / 1 gradient, micro-batch,
  // receiving chunk); both kinds share the link, so one FIFO per link is enough.
  using Message = std::tuple<int, int, int>;
  std::map<std::pair<int, int>, std::vector<Message>> sent, used;  // by (from rank, to rank)
  for (int r = 0; r < pp; ++r) {
    for (const Action& a : ranks[r]) {
      const int k = chunk_id(place, pp, r, a.chunk), mb = a.micro_batch;
      const auto rank_of = [&](int chunk) { return chunk_rank(place, pp, vpp, chunk); };
      if (a.kind == Action::Forward) {
        if (k + 1 < chunks) sent[{r, rank_of(k + 1)}].push_back({0, mb, k + 1});
        if (k > 0) used[{rank_of(k - 1), r}].push_back({0, mb, k});
      } else if (a.kind == Action::Backward) {
        if (k > 0) sent[{r, rank_of(k - 1)}].push_back({1, mb, k - 1});
        if (k + 1 < chunks) used[{rank_of(k + 1), r}].push_back({1, mb, k});
      }
    }
  }
  res.in_order = sent == used;
  auto show = [](const Message& msg) {
    const auto [gradient, mb, chunk] = msg;
    return std::string(gradient ? "the gradient of B" : "the activation of F") +
           std::to_string(mb) + " for chunk " + std::to_string(chunk);
  };
  for (const auto& [link, messages] : sent) {
    const std::vector<Message>& taken = used[link];
    const auto [s, t] = std::mismatch(messages.begin(), messages.end(), taken.begin(), taken.end());
    if (s == messages.end() && t == taken.end()) continue;
    std::ostringstream os;
    os << "rank " << link.first << " sends rank " << link.second << " "
       << (s == messages.end() ? "nothing more" : show(*s)) << " where rank " << link.second
       << " takes " << (t == taken.end() ? "nothing more" : show(*t)) << " next";
    res.order_problem = os.str();
    break;
  }
  return res;
}

std::string schedule_problem(ScheduleKind kind, int pp, int vpp, int m) {
  check_schedule(kind, pp, vpp, m);
  std::vector<std::vector<Action>> ranks;
  for (int r = 0; r < pp; ++r) ranks.push_back(make_schedule(kind, pp, vpp, m, r));
  return schedule_problem(ranks, kind, vpp, m);
}

std::string schedule_problem(const std::vector<std::vector<Action>>& ranks, ScheduleKind kind,
                             int vpp, int m) {
  const int pp = int(ranks.size());
  check_schedule(kind, pp, vpp, m);
  const std::string where = std::string(schedule_name(kind)) + " PP " + std::to_string(pp) +
                            (vpp > 1 ? " V " + std::to_string(vpp) : "") + ", m " +
                            std::to_string(m) + ": ";
  SimResult sim;
  try {
    sim = simulate(ranks, vpp, m, 1, 2, ScheduleMode::Train, 0, placement(kind));
  } catch (const Error& e) {
    return where + e.what();
  }
  std::ostringstream os;
  if (sim.deadlock) {
    os << "deadlock:";
    for (int r = 0; r < pp; ++r) {
      if (sim.timeline[r].size() == ranks[r].size()) continue;
      const Action a = ranks[r][sim.timeline[r].size()];
      const Placement place = placement(kind);
      const int k = chunk_id(place, pp, r, a.chunk);
      const auto where_is = [&](int chunk) {
        return std::to_string(chunk_virtual_stage(place, pp, chunk)) + " of rank " +
               std::to_string(chunk_rank(place, pp, vpp, chunk)) + ";";
      };
      const bool own_forward_done =
          std::any_of(sim.timeline[r].begin(), sim.timeline[r].end(), [&](const TimedAction& t) {
            return t.action == Action{Action::Forward, a.micro_batch, a.chunk};
          });
      os << " rank " << r << " stops at " << to_string({a}) << ", waiting for ";
      if (a.kind == Action::Weight)
        os << "its own B" << a.micro_batch << '.' << a.chunk << ";";
      else if (a.kind == Action::Backward && !own_forward_done)
        os << "its own F" << a.micro_batch << '.' << a.chunk << ";";
      else if (a.kind == Action::Forward)
        os << "F" << a.micro_batch << '.' << where_is(k - 1);
      else
        os << "B" << a.micro_batch << '.' << where_is(k + 1);
    }
    std::string text = os.str();
    text.back() = ' ';
    return where + text + "(no rank can move on)";
  }
  if (!sim.in_order && placement(kind) == Placement::Looped)
    return where + "messages out of order: " + sim.order_problem;
  for (int r = 0; r < pp; ++r) {
    const int bound = max_in_flight_bound(kind, pp, vpp, m, r);
    if (sim.max_in_flight[r] > bound)
      return where + "rank " + std::to_string(r) + " holds the activations of " +
             std::to_string(sim.max_in_flight[r]) +
             " forwards at once (their backwards not yet run), more than the schedule's " +
             std::to_string(bound) + ": its backwards start too late";
  }
  return "";
}

}  // namespace tetra
