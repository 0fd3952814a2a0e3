// The optimisation section of a run's configuration: the schedule of steps and learning
// rates, AdamW's decay, clipping, the seed, how the optimizer state is sharded (ZeRO) and
// whether activations are recomputed.
#pragma once
#include <cstdint>

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

}  // namespace tetra
