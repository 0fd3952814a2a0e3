// wgrad_beta0 and grad_alias (backend/fusions.hpp) against the plain path they replace, on one
// rank (MPI_COMM_SELF, so dp_cp is 1 and the shard can be aliased): the same losses, step-0
// gradients and weights bit for bit, in fp32 and bf16, at every ZeRO stage, with one and
// several micro-batches, with recompute; and the aliased layout's memory, measured and as
// `tetra plan` predicts it. tests/mpi/test_dp.cpp and test_pp.cpp do the same over DP and PP.
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "backend/fusions.hpp"
#include "cli/options.hpp"
#include "plan/memory.hpp"
#include "train/trainer.hpp"

using namespace tetra;

namespace {

TrainConfig tiny(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--layers",       "2", "--dim",     "32", "--heads",       "4",
                                   "--kv-heads",     "2", "--ffn-dim", "64", "--seq-len",     "16",
                                   "--steps",        "3", "--warmup",  "2",  "--peak-tflops", "1",
                                   "--global-batch", "4"};
  args.insert(args.end(), extra.begin(), extra.end());
  return parse_train_options(args);
}

struct Run {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> grads0, weights;
  MemoryBytes memory;
  double peak = 0, predicted = 0;  // the last step's peak of backend memory, and tetra plan's
};

// Trains with the fusions of `unfused` off (TETRA_UNFUSED's syntax).
Run train(const TrainConfig& o, const std::string& unfused) {
  set_unfused(unfused);
  Run r;
  {
    Trainer t(o, MPI_COMM_SELF);
    const plan::Setup setup = plan::make_setup(o.run_spec(), t.model(), 1);
    for (int64_t s = 0; s < o.optimizer.steps; ++s) {
      t.backend().alloc_stats.reset_peak();
      r.losses.push_back(t.step().loss);
      r.peak = double(t.backend().alloc_stats.peak);
      if (s == 0) r.grads0 = t.full_grads();
    }
    r.predicted = plan::stage_memory(setup, 0).peak();
    r.weights = t.full_weights();
    r.memory = t.params().persistent_bytes();
  }
  const char* env = std::getenv("TETRA_UNFUSED");
  set_unfused(env ? env : "");
  return r;
}

}  // namespace

TEST_CASE("wgrad_beta0 and grad_alias give the plain path's bits at every ZeRO stage") {
  for (const char* dtype : {"fp32", "bf16"})
    for (const char* zero : {"1", "2", "3"})
      for (const std::vector<std::string>& extra :
           {std::vector<std::string>{"--micro-batch", "4"},
            std::vector<std::string>{"--micro-batch", "1"},
            std::vector<std::string>{"--micro-batch", "2", "--recompute", "full"}}) {
        std::vector<std::string> flags = {"--dtype", dtype, "--zero", zero};
        flags.insert(flags.end(), extra.begin(), extra.end());
        const TrainConfig o = tiny(flags);
        CAPTURE(dtype);
        CAPTURE(zero);
        CAPTURE(extra[1]);
        const Run plain = train(o, "wgrad_beta0,grad_alias");
        for (const char* unfused : {"", "grad_alias", "wgrad_beta0"}) {
          CAPTURE(unfused);
          const Run fused_run = train(o, unfused);
          CHECK(fused_run.losses == plain.losses);
          CHECK(fused_run.grads0 == plain.grads0);
          CHECK(fused_run.weights == plain.weights);
        }
      }
}

TEST_CASE("grad_alias at dp_cp 1 keeps one gradient buffer, and tetra plan predicts it") {
  // With --overlap on the plain path hands the gradients over through the queue even on a
  // group of one (ZeroParams::queues): ZeRO-2/3 then keep a unit's full gradients until the
  // next hand-over, which the plan predicts too; the bound on what aliasing saves is the
  // blocking path's.
  for (const char* overlap : {"off", "on"})
    for (const char* dtype : {"fp32", "bf16"})
      for (const char* zero : {"1", "2", "3"}) {
        CAPTURE(overlap);
        CAPTURE(dtype);
        CAPTURE(zero);
        const TrainConfig o =
            tiny({"--dtype", dtype, "--zero", zero, "--micro-batch", "2", "--overlap", overlap});
        const Run plain = train(o, "grad_alias"), aliased = train(o, "");
        const double grads = double(aliased.memory.grads);  // 4 bytes per parameter, once
        CHECK(grads > 0);
        // The plain path keeps a shard of the same size beside the full gradients: persistent
        // under ZeRO-1, during the backward under ZeRO-2/3.
        CHECK(double(plain.memory.grads) == (std::string(zero) == "1" ? 2 * grads : grads));
        // At the peak: ZeRO-1's whole shard, ZeRO-2/3's full gradients of the units whose
        // backward had begun (the plain path allocates them at a unit's first backward).
        if (std::string(zero) == "1")
          CHECK(plain.peak - aliased.peak == grads);
        else if (std::string(overlap) == "off")
          CHECK((plain.peak > aliased.peak && plain.peak - aliased.peak <= grads));
        else
          CHECK(plain.peak > aliased.peak);
        CHECK(plain.predicted - aliased.predicted == plain.peak - aliased.peak);
        // The plan's walk is exact for this model: the measurement to the byte, both ways.
        CHECK(aliased.peak == aliased.predicted);
        CHECK(plain.peak == plain.predicted);
      }
}
