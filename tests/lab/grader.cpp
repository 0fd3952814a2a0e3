// The grader of `tetra lab --check` (jobs/lab_exercise.hpp): the layout tests' comparison with
// one rank (tests/mpi/layout_check.hpp) on the layouts that run an exercise's function, naming
// the first tensor that differs.
//
//   lab_grader reference EXERCISE FILE   on one rank: the one-rank runs that the layouts are
//                                        compared with, into FILE (safetensors), with the
//                                        number of ranks grading takes
//   lab_grader grade EXERCISE FILE       under mpirun with that many ranks: the checks that
//                                        need no run, then each layout against FILE, in order,
//                                        up to the first that differs
//
// tetra lab --check runs the first from tetra's own build, whose sources are whole (a wrong
// function must not be compared with itself on one rank: ColumnParallelLinear runs at TP 1
// too), and the second from the copy the learner edits. Rank 0 prints a line per layout and
// then "passes: ..." (exit 0) or "fails ..." (exit 1).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "../mpi/layout_check.hpp"
#include "checkpoint/safetensors.hpp"
#include "parallel/cp.hpp"
#include "parallel/schedule.hpp"
#include "util/error.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

constexpr int kSteps = 3;

struct Layout {
  std::string name;  // "TP 2 x SP"
  TrainConfig config;
};

// What grades one exercise: the ranks, the layouts (each on the tiny model of the layout tests,
// G sequences of one per micro-batch), and the checks that need no run.
struct Grading {
  int ranks = 0;
  std::vector<Layout> layouts;
  bool schedules = false;   // every schedule's lists through the simulator first
  bool cp_balance = false;  // every CP rank's positions: all once, equal causal work
};

struct Shape {
  int tp = 1, cp = 1, pp = 1, dp = 1, zero = 1;
  bool sp = false;
  const char* schedule = "1f1b";
  int vpp = 1;
};

Layout layout(const std::string& name, int global_batch, const Shape& s) {
  TrainConfig c = laid_out(tiny_model(global_batch), s.tp, s.cp, s.pp, s.dp);
  c.optimizer.zero = s.zero;
  c.layout.sp = s.sp;
  c.layout.schedule = s.schedule;
  c.layout.vpp = s.vpp;
  // The exercises are the blocking path (the ring of sends and receives, the hand-over), which
  // --overlap's queued collectives would go around.
  c.device.overlap = false;
  return {name, c};
}

Grading grading(const std::string& exercise) {
  if (exercise == "ring_reduce_scatter")
    return {4,
            {layout("DP 2, ZeRO-1", 4, {.dp = 2}), layout("DP 4, ZeRO-1", 4, {.dp = 4}),
             layout("CP 2 x DP 2, ZeRO-2", 4, {.cp = 2, .dp = 2, .zero = 2})}};
  if (exercise == "tp_column_backward")
    return {4,
            {layout("TP 2", 4, {.tp = 2}), layout("TP 2 x SP", 4, {.tp = 2, .sp = true}),
             layout("TP 4 x SP", 4, {.tp = 4, .sp = true}),
             layout("TP 2 x DP 2, ZeRO-3", 4, {.tp = 2, .dp = 2, .zero = 3})}};
  if (exercise == "cp_chunks")
    return {4,
            {layout("CP 2", 4, {.cp = 2}), layout("CP 4", 4, {.cp = 4}),
             layout("TP 2 x CP 2 x SP", 4, {.tp = 2, .cp = 2, .sp = true})},
            false,
            true};
  if (exercise == "pp_1f1b_order")
    return {4,
            {layout("PP 2, 1F1B", 4, {.pp = 2}), layout("PP 4, 1F1B", 8, {.pp = 4}),
             layout("PP 2, GPipe", 4, {.pp = 2, .schedule = "gpipe"}),
             layout("PP 2, interleaved V 2", 4, {.pp = 2, .schedule = "interleaved", .vpp = 2})},
            true};
  if (exercise == "zero2_reduce_scatter")
    return {4,
            {layout("DP 2, ZeRO-2", 4, {.dp = 2, .zero = 2}),
             layout("DP 4, ZeRO-2", 4, {.dp = 4, .zero = 2}),
             layout("TP 2 x DP 2 x SP, ZeRO-2", 4, {.tp = 2, .dp = 2, .zero = 2, .sp = true}),
             layout("DP 2, ZeRO-3", 4, {.dp = 2, .zero = 3})}};
  fail("lab_grader: no exercise '", exercise, "'");
}

// The one-rank run each layout is compared with, by global batch.
std::string prefix(int global_batch) {
  return std::string("G").append(std::to_string(global_batch)).append("/");
}

// The model's tensors in the order backward computes their gradients (the head first, the
// embedding last), with their shapes: the first that differs is nearest the fault.
std::vector<std::pair<std::string, std::vector<int64_t>>> backward_order() {
  TrainConfig c = tiny_model(1);
  resolve(c);
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const UnitSpec& u : make_units(c.model, 1, 0))
    for (const ParamInfo& p : u.params) out.push_back({p.name, p.shape});
  std::reverse(out.begin(), out.end());
  return out;
}

// "[12, 4]": flat element i of a tensor of this shape.
std::string element(size_t i, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = int64_t(i) % shape[d];
    i /= size_t(shape[d]);
  }
  std::string out = "[";
  for (size_t d = 0; d < index.size(); ++d) out += (d ? ", " : "") + std::to_string(index[d]);
  return out + "]";
}

std::string number(double x, const char* format = "%.4g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

int write_reference(const Grading& g, const std::string& path) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  check(size == 1, "lab_grader reference runs on one rank (got ", size, ")");
  st::Writer out;
  std::map<int, bool> done;
  for (const Layout& l : g.layouts) {
    const int G = l.config.batch.global_batch;
    if (done[G]) continue;
    done[G] = true;
    const RunResult r = run_on(tiny_model(G), kSteps);
    json losses = json::array();
    for (double x : r.losses) losses.push_back(x);
    out.set_metadata(prefix(G) + "losses", losses.dump());
    for (const auto& [name, v] : r.grads0)
      out.add(prefix(G) + "grad/" + name, {int64_t(v.size())}, v.data());
    for (const auto& [name, v] : r.weights)
      out.add(prefix(G) + "weight/" + name, {int64_t(v.size())}, v.data());
  }
  out.set_metadata("ranks", std::to_string(g.ranks));
  out.write(path);
  std::printf("one rank's runs written to %s; grading takes %d ranks\n", path.c_str(), g.ranks);
  return 0;
}

// The first way a layout's run differs from one rank's beyond the layout tests' bounds: a
// step-0 gradient (in backward order), a step's loss, a final weight; "" when none does.
std::string first_difference(const st::Reader& ref, int global_batch, const RunResult& run) {
  const Gaps bound = match_bounds("fp32");
  const std::string at = prefix(global_batch);
  const auto order = backward_order();
  for (const auto& [name, shape] : order) {
    const std::vector<float> a = ref.read(at + "grad/" + name);
    const auto it = run.grads0.find(name);
    if (it == run.grads0.end() || it->second.size() != a.size())
      return name + ": no gradient of its size";
    const TensorGap g = grad_gap(a, it->second);
    if (!(g.gap <= bound.grad))
      return name + ": gradient differs from one rank by " + number(g.gap, "%.1e") + " at " +
             element(g.at, shape) + " (one rank " + number(a[g.at]) + ", this layout " +
             number(it->second[g.at]) + "; the bound is " + number(bound.grad, "%.0e") +
             " of the tensor's largest magnitude)";
  }
  const json losses = json::parse(ref.metadata().at(at + "losses"));
  for (size_t s = 0; s < losses.size() && s < run.losses.size(); ++s) {
    const double gap = loss_gap(losses[s].get<double>(), run.losses[s]);
    if (!(gap <= bound.loss))
      return "the loss of step " + std::to_string(s) + " differs from one rank's by " +
             number(gap, "%.1e") + " (one rank " + number(losses[s].get<double>(), "%.6f") +
             ", this layout " + number(run.losses[s], "%.6f") + ")";
  }
  for (const auto& [name, shape] : order) {
    const std::vector<float> a = ref.read(at + "weight/" + name);
    const auto it = run.weights.find(name);
    if (it == run.weights.end() || it->second.size() != a.size())
      return name + ": no weights of its size";
    const TensorGap g = weight_gap(a, it->second);
    if (!(g.gap <= bound.weight))
      return name + ": its weights after " + std::to_string(kSteps) +
             " steps differ from one rank's by " + number(g.gap, "%.1e") + " in norm, most at " +
             element(g.at, shape) + " (one rank " + number(a[g.at]) + ", this layout " +
             number(it->second[g.at]) + ")";
  }
  return "";
}

// On rank 0, the first non-empty text of any rank, in rank order; "" elsewhere. Collective.
std::string first_of_ranks(const std::string& mine) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int n = int(mine.size());
  std::vector<int> sizes(size), offsets(size);
  MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (int r = 1; r < size; ++r) offsets[r] = offsets[r - 1] + sizes[r - 1];
  std::string all(rank == 0 ? size_t(offsets[size - 1] + sizes[size - 1]) : 0, '\0');
  MPI_Gatherv(mine.data(), n, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, 0,
              MPI_COMM_WORLD);
  for (int r = 0; r < size && rank == 0; ++r)
    if (sizes[r] > 0) return all.substr(size_t(offsets[r]), size_t(sizes[r]));
  return "";
}

// Every schedule's lists for PP 1 to 4 through the simulator: the first problem, else "".
std::string schedule_problems() {
  for (int pp = 1; pp <= 4; ++pp) {
    for (int m = pp; m <= 3 * pp + 1; ++m)
      for (ScheduleKind k : {ScheduleKind::OneFOneB, ScheduleKind::GPipe})
        if (std::string p = schedule_problem(k, pp, 1, m); !p.empty()) return p;
    for (int v = 2; v <= 3; ++v)
      for (int m = pp; m <= 3 * pp; m += pp)
        if (std::string p = schedule_problem(ScheduleKind::Interleaved, pp, v, m); !p.empty())
          return p;
  }
  return "";
}

// Every CP rank's positions for CP 1 to 4: each position of the sequence held once, chunk c's
// before its mirror's, and the same causal work on every rank. The first problem, else "".
std::string cp_problems() {
  for (int cp = 1; cp <= 4; ++cp) {
    for (int64_t S : {int64_t(2 * cp), int64_t(8 * cp)}) {
      const std::string where = "CP " + std::to_string(cp) + ", S " + std::to_string(S) + ": ";
      std::vector<std::vector<int32_t>> held(cp);
      std::vector<int32_t> all;
      for (int c = 0; c < cp; ++c) {
        held[c] = cp_positions(S, cp, c);
        all.insert(all.end(), held[c].begin(), held[c].end());
      }
      std::vector<int> holders(size_t(S), 0);
      for (int32_t p : all) {
        if (p < 0 || p >= S)
          return where + "a rank holds position " + std::to_string(p) + ", outside 0.." +
                 std::to_string(S - 1);
        ++holders[size_t(p)];
      }
      for (int64_t p = 0; p < S; ++p)
        if (holders[size_t(p)] != 1)
          return where + "position " + std::to_string(p) + " is held by " +
                 std::to_string(holders[size_t(p)]) +
                 " ranks: each position of the sequence must be held by exactly one";
      std::string shown;
      for (int c = 0; c < cp; ++c) {
        shown += (c ? ", rank " : "rank ") + std::to_string(c) + " " +
                 std::to_string(causal_pairs(held[c], all));
      }
      for (int c = 1; c < cp; ++c)
        if (causal_pairs(held[c], all) != causal_pairs(held[0], all))
          return where + "the ranks score unequal numbers of causal query-key pairs (" + shown +
                 "): the causal work is not balanced";
    }
  }
  return "";
}

int grade(const Grading& g, const std::string& path) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  check(size >= g.ranks, "lab_grader grade needs ", g.ranks, " ranks (got ", size, ")");
  // The checks that need no run: every rank finds the same.
  std::string before = g.schedules ? schedule_problems() : "";
  if (before.empty() && g.cp_balance) before = cp_problems();
  if (!before.empty()) {
    if (rank == 0) std::printf("fails before running anything: %s\n", before.c_str());
    return 1;
  }
  std::unique_ptr<st::Reader> ref;
  if (rank == 0) ref = std::make_unique<st::Reader>(path);
  std::string names;
  for (const Layout& l : g.layouts) {
    const RunResult run = run_on(l.config, kSteps);
    std::string problem = first_of_ranks(run.plan_diff);
    if (rank == 0) {
      const std::string diff = first_difference(*ref, l.config.batch.global_batch, run);
      if (!diff.empty())
        problem = diff;
      else if (!problem.empty())
        problem = "equal to one rank, but not as tetra plan predicts: " + problem;
    }
    int failed = !problem.empty();
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (failed) {
      if (rank == 0) std::printf("fails on %s: %s\n", l.name.c_str(), problem.c_str());
      return 1;
    }
    if (rank == 0) std::printf("%s: equal to one rank\n", l.name.c_str());
    std::fflush(stdout);
    names += (names.empty() ? "" : "; ") + l.name;
  }
  if (rank == 0)
    std::printf(
        "passes: equal to one rank on %s (%d steps: the losses, step 0's gradients and the "
        "final weights; the bytes sent and the peak memory as tetra plan predicts)\n",
        names.c_str(), kSteps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &threads);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // run_on's plan checks are doctest assertions, here outside any test: a failed one is
  // recorded in RunResult::plan_diff, which grade() reports.
  doctest::Context ctx;
  ctx.setAsDefaultForAssertsOutOfTestCases();
  ctx.setAssertHandler([](const doctest::AssertData&) {});
  int rc = 0;
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    check(argc == 4 && (mode == "reference" || mode == "grade"),
          "usage: lab_grader reference|grade EXERCISE FILE");
    const Grading g = grading(argv[2]);
    rc = mode == "reference" ? write_reference(g, argv[3]) : grade(g, argv[3]);
  } catch (const std::exception& e) {
    // One rank's error (another rank may be waiting in a collective): it reports and ends the
    // job.
    std::fprintf(stderr, "tetra: error: lab_grader rank %d: %s\n", rank, error_text(e).c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_status_of(e));
  }
  std::fflush(stdout);
  MPI_Finalize();
  return rc;
}
