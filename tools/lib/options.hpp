// `tetra train` flags (design.md's CLI contract) and their parsing.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace tetra {

struct TrainOptions {
  // Layout: TP * CP * PP * DP ranks; dp 0 means "the rest of the ranks".
  int tp = 1, cp = 1, pp = 1, dp = 0, vpp = 1;
  bool sp = false;  // Megatron sequence parallelism inside the TP group
  std::string schedule = "1f1b";
  // Model (vocab is the data's vocabulary; the model pads it, see padded_vocab).
  ModelConfig model;
  int64_t data_vocab = 256;
  // Batch: global_batch sequences per step, micro_batch sequences per micro-batch
  // (0: the largest that gives every pipeline stage PP micro-batches, see trainer.cpp).
  int global_batch = 8, micro_batch = 0;
  // Optimisation.
  int64_t steps = 200, warmup = 10;
  double lr = 3e-3, min_lr = -1, weight_decay = 0.1, clip = 1.0;
  uint64_t seed = 1234;
  int zero = 1;
  bool recompute = false;
  // Input.
  std::string data = "synthetic", init_from;
  // Device.
  std::string device = "cpu", dtype = "fp32", comm = "auto";
  // Checkpoints and faults. resume: "auto" (newest complete checkpoint in ckpt_dir that
  // verifies, if any), "never", or a checkpoint directory.
  std::string ckpt_dir, resume = "auto", inject_failure;
  int64_t ckpt_every = 0;
  int keep = 3;
  double timeout = 300;
  // Output. trace_steps: steps traced after the run's first (warm-up) step.
  std::string metrics, export_path, trace;
  int64_t trace_steps = 5;
  double peak_tflops = 0;
  // Which flags the user gave (to check them against --init-from's shapes).
  std::set<std::string> given;
};

// Parses the flags after `tetra train`. Throws tetra::Error for an unknown flag, a missing
// or malformed value, or a value out of range.
TrainOptions parse_train_options(const std::vector<std::string>& args);
std::string train_help();

}  // namespace tetra
