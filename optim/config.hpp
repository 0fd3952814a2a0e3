// The optimisation section of a run's configuration: the schedule of steps and learning
// rates, AdamW's decay, clipping, the seed, how the optimizer state is sharded (ZeRO) and
// whether activations are recomputed.
#pragma once
#include <cstdint>

#include "util/settings.hpp"

namespace tetra {

struct OptimizerConfig {
  int64_t steps = 200, warmup = 10;
  double lr = 3e-3;
  double min_lr = -1;  // the cosine's end; < 0: lr / 10 (resolved with the configuration)
  double weight_decay = 0.1, clip = 1.0;
  uint64_t seed = 1234;    // of the weights and the synthetic data
  int zero = 1;            // ZeRO stage: Adam state (1), + gradients (2), + weights (3) sharded
  bool recompute = false;  // --recompute full: each block's forward again during backward
};
// The schedule, the decay and the clip may change on resume where --allow-change names them
// (to extend or fine-tune a run); the seed fixes it; any ZeRO stage and recomputation give
// the same numbers.
inline const settings::Table<OptimizerConfig> kOptimizerKeys{
    "optimizer",
    "Optimisation",
    {.resume = settings::Resume::Fixed},
    {settings::key(&OptimizerConfig::steps, "steps", "N", "optimizer steps", settings::positive())
         .on_resume(settings::Resume::Changeable),
     settings::key(&OptimizerConfig::lr, "lr", "X", "peak learning rate", settings::positive())
         .on_resume(settings::Resume::Changeable),
     settings::key(&OptimizerConfig::min_lr, "min_lr", "X", "final learning rate of the cosine",
                   settings::non_negative())
         .shown("lr/10")
         .on_resume(settings::Resume::Changeable),
     settings::key(&OptimizerConfig::warmup, "warmup", "N", "linear warmup steps",
                   settings::non_negative())
         .on_resume(settings::Resume::Changeable),
     settings::key(&OptimizerConfig::weight_decay, "weight_decay", "X",
                   "AdamW decay on 2-D tensors", settings::non_negative())
         .on_resume(settings::Resume::Changeable),
     settings::key(&OptimizerConfig::clip, "clip", "X", "global gradient-norm clip (0: off)",
                   settings::non_negative())
         .on_resume(settings::Resume::Changeable),
     settings::key(&OptimizerConfig::seed, "seed", "N",
                   "seed of the weights and the synthetic data"),
     settings::key(
         &OptimizerConfig::zero, "zero", "1|2|3",
         "ZeRO stage: shard Adam state (1), + gradients (2), + weights (3)",
         settings::number_rule([](double x) { return x >= 1 && x <= 3; }, "must be 1, 2 or 3"))
         .on_resume(settings::Resume::Free)
         .sweep(false),
     settings::choice(&OptimizerConfig::recompute, "recompute", {"none", "full"},
                      "recompute each block's forward during backward")
         .on_resume(settings::Resume::Free)}};

}  // namespace tetra
