#include "layout_check.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "tools/lib/plan/memory.hpp"
#include "tools/lib/plan/traffic.hpp"

namespace tetra::test {

namespace {

// The plan (tools/lib/plan) against this rank's step: bytes per group equal to the counters,
// peak memory within 10% of the backend's. Returns what disagrees, else "".
std::string check_plan(const plan::Setup& s, int stage, const StepResult& r, double peak) {
  std::ostringstream err;
  for (const auto& [group, bytes] : plan::bytes_by_group(plan::step_traffic(s, stage))) {
    const auto it = r.comm.find(group);
    const int64_t got = it == r.comm.end() ? -1 : std::llround(it->second.bytes);
    if (got != std::llround(bytes))
      err << "group " << group << ": predicted " << std::llround(bytes) << " B, measured " << got
          << " B\n";
  }
  const double want = plan::stage_memory(s, stage).peak();
  if (!(std::abs(peak - want) <= 0.10 * want))
    err << "peak memory: predicted " << want << " B, measured " << peak << " B\n";
  return err.str();
}

}  // namespace

std::vector<std::string> tiny_model() {
  return {"--layers",      "4", "--dim",     "64",   "--heads",   "8",
          "--kv-heads",    "4", "--ffn-dim", "128",  "--seq-len", "16",
          "--peak-tflops", "1", "--lr",      "1e-2", "--warmup",  "2"};
}

RunResult run_on(int ranks, const std::vector<std::string>& args, int steps) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm sub;
  MPI_Comm_split(MPI_COMM_WORLD, rank < ranks ? 0 : MPI_UNDEFINED, rank, &sub);
  RunResult r;
  if (sub != MPI_COMM_NULL) {
    // The tiny model's flags less those the layout sets itself (a flag may be given once).
    std::vector<std::string> all;
    const std::vector<std::string> model = tiny_model();
    for (size_t i = 0; i + 1 < model.size(); i += 2)
      if (std::find(args.begin(), args.end(), model[i]) == args.end())
        all.insert(all.end(), {model[i], model[i + 1]});
    all.insert(all.end(), args.begin(), args.end());
    // TETRA_TEST_ARGS adds flags to every layout and its reference: tools/gpu_check.sh runs the
    // layouts on the GPU with "--device cuda --comm mpi".
    if (const char* extra = std::getenv("TETRA_TEST_ARGS")) {
      std::istringstream words(extra);
      for (std::string w; words >> w;) all.push_back(w);
    }
    all.insert(all.end(), {"--steps", std::to_string(steps)});
    {
      const TrainOptions opt = parse_train_options(all);
      Trainer t(opt, sub);
      const plan::Setup setup = plan::make_setup(opt, t.model(), ranks);
      for (int s = 0; s < steps; ++s) {
        t.backend().alloc_stats.reset_peak();
        r.steps.push_back(t.step());
        const std::string plan_diff = check_plan(setup, t.grid().coord.pp, r.steps.back(),
                                                 double(t.backend().alloc_stats.peak));
        CHECK_MESSAGE(plan_diff.empty(), "rank ", rank, " step ", s, ": ", plan_diff);
        r.largest_alloc = std::max(r.largest_alloc, t.backend().alloc_stats.largest);
        r.losses.push_back(r.steps.back().loss);
        if (s == 0) r.grads0 = t.full_grads();
      }
      r.weights = t.full_weights();
      r.memory = t.params().persistent_bytes();
      r.micro_batches = t.micro_batches();
      r.micro_batch = t.micro_batch();
      r.tokens_per_micro_batch = int64_t(t.micro_batch()) * t.model().seq_len / t.grid().layout.cp;
      for (int u = 0; u < t.params().size(); ++u) {
        const int64_t n = t.params().layout(u).numel, N = t.grid().dp_cp->size();
        r.padded_params += (n + N - 1) / N * N;
      }
    }
    MPI_Comm_free(&sub);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return r;
}

namespace {

// Calls f(name, reference values, run values) for every tensor of ref, or reports it missing.
template <typename F>
void each_tensor(const std::map<std::string, std::vector<float>>& ref,
                 const std::map<std::string, std::vector<float>>& run, std::ostringstream& err,
                 const char* what, F f) {
  for (const auto& [name, a] : ref) {
    auto it = run.find(name);
    if (it == run.end() || it->second.size() != a.size()) {
      err << what << " " << name << " missing or resized\n";
      continue;
    }
    f(name, a, it->second);
  }
}

double loss_gap(double ref, double run) {
  return std::abs(run - ref) / std::abs(ref);
}
// max |b - a| / max |a|
double grad_gap(const std::vector<float>& a, const std::vector<float>& b) {
  double max_ref = 0, worst = 0;
  for (float x : a) max_ref = std::max(max_ref, double(std::abs(x)));
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::abs(b[i] - a[i])));
  return worst / max_ref;
}
// ||b - a|| / ||a||
double weight_gap(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += std::pow(double(b[i]) - a[i], 2);
    norm += double(a[i]) * a[i];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

}  // namespace

Gaps gaps(const RunResult& ref, const RunResult& run) {
  Gaps g;
  std::ostringstream ignored;
  for (size_t s = 0; s < ref.losses.size() && s < run.losses.size(); ++s)
    g.loss = std::max(g.loss, loss_gap(ref.losses[s], run.losses[s]));
  each_tensor(ref.grads0, run.grads0, ignored, "gradient",
              [&](auto&, auto& a, auto& b) { g.grad = std::max(g.grad, grad_gap(a, b)); });
  each_tensor(ref.weights, run.weights, ignored, "weight",
              [&](auto&, auto& a, auto& b) { g.weight = std::max(g.weight, weight_gap(a, b)); });
  return g;
}

std::string compare(const RunResult& ref, const RunResult& run, const Gaps& bound) {
  std::ostringstream err;
  if (ref.losses.size() != run.losses.size()) return "different step counts";
  for (size_t s = 0; s < ref.losses.size(); ++s) {
    const double rel = loss_gap(ref.losses[s], run.losses[s]);
    if (!(rel <= bound.loss))
      err << "step " << s << " loss " << run.losses[s] << " vs " << ref.losses[s] << " (rel " << rel
          << ")\n";
  }
  each_tensor(ref.grads0, run.grads0, err, "gradient", [&](auto& name, auto& a, auto& b) {
    const double g = grad_gap(a, b);
    if (!(g <= bound.grad))
      err << "gradient " << name << ": max diff " << g << " of the largest magnitude > "
          << bound.grad << "\n";
  });
  each_tensor(ref.weights, run.weights, err, "weight", [&](auto& name, auto& a, auto& b) {
    const double g = weight_gap(a, b);
    if (!(g <= bound.weight))
      err << "weight " << name << ": ||diff|| / ||w|| " << g << " > " << bound.weight << "\n";
  });
  return err.str();
}

}  // namespace tetra::test
