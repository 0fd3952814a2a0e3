#include "layout_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace tetra::test {

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
      Trainer t(parse_train_options(all), sub);
      for (int s = 0; s < steps; ++s) {
        t.backend().alloc_stats.reset_peak();
        r.steps.push_back(t.step());
        r.largest_alloc = std::max(r.largest_alloc, t.backend().alloc_stats.largest);
        r.losses.push_back(r.steps.back().loss);
        if (s == 0) r.grads0 = t.full_grads();
      }
      r.weights = t.full_weights();
      if (t.has_validation()) r.val_loss = t.evaluate();
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

std::string compare(const RunResult& ref, const RunResult& run) {
  std::ostringstream err;
  if (ref.losses.size() != run.losses.size()) return "different step counts";
  for (size_t s = 0; s < ref.losses.size(); ++s) {
    const double rel = std::abs(run.losses[s] - ref.losses[s]) / std::abs(ref.losses[s]);
    if (!(rel <= 1e-5))
      err << "step " << s << " loss " << run.losses[s] << " vs " << ref.losses[s] << " (rel " << rel
          << ")\n";
  }
  // Step-0 gradients: within 1e-5 of each tensor's largest magnitude, elementwise.
  for (const auto& [name, g1] : ref.grads0) {
    auto it = run.grads0.find(name);
    if (it == run.grads0.end() || it->second.size() != g1.size()) {
      err << "gradient " << name << " missing or resized\n";
      continue;
    }
    double max_ref = 0, worst = 0;
    for (float x : g1) max_ref = std::max(max_ref, double(std::abs(x)));
    for (size_t i = 0; i < g1.size(); ++i)
      worst = std::max(worst, double(std::abs(it->second[i] - g1[i])));
    if (!(worst <= 1e-5 * max_ref))
      err << "gradient " << name << ": max diff " << worst << " > 1e-5 * " << max_ref << "\n";
  }
  // Final weights: ||W - W1|| <= 1e-4 ||W1|| per tensor.
  for (const auto& [name, w1] : ref.weights) {
    auto it = run.weights.find(name);
    if (it == run.weights.end() || it->second.size() != w1.size()) {
      err << "weight " << name << " missing or resized\n";
      continue;
    }
    double diff = 0, norm = 0;
    for (size_t i = 0; i < w1.size(); ++i) {
      diff += std::pow(double(it->second[i]) - w1[i], 2);
      norm += double(w1[i]) * w1[i];
    }
    if (!(std::sqrt(diff) <= 1e-4 * std::sqrt(norm)))
      err << "weight " << name << ": ||diff|| " << std::sqrt(diff) << " > 1e-4 * "
          << std::sqrt(norm) << "\n";
  }
  return err.str();
}

}  // namespace tetra::test
