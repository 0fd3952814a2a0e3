// The configuration of a training run, in the sections of tetra train's help: each section is
// defined in the layer that consumes it (the layout, batch and device in parallel/, the model
// in model/, the optimizer in optim/, the data in data/, checkpoints in checkpoint/) and each
// consumer receives its own sections only; the output section is the trainer's.
#pragma once
#include <cstdint>
#include <set>
#include <string>

#include "checkpoint/config.hpp"
#include "data/config.hpp"
#include "model/config.hpp"
#include "optim/config.hpp"
#include "parallel/config.hpp"
#include "plan/setup.hpp"

namespace tetra {

struct OutputConfig {
  std::string metrics;  // append one JSON object per step
  std::string trace;    // a Chrome trace of trace_steps steps after the first
  int64_t trace_steps = 5;
  std::string export_path;            // the final weights: a model directory or a file
  std::string export_dtype = "fp32";  // fp32, or bf16 (rounded master weights)
  double peak_tflops = 0;             // per device for MFU (0: a GPU table, else a probe)
  int64_t sample_every = 0;           // a sample from rank 0 every N steps (0: never)
};

struct TrainConfig {
  LayoutConfig layout;
  ModelConfig model{.vocab = 256, .data_vocab = 256};  // --vocab: data_vocab; vocab pads it
  BatchConfig batch;
  OptimizerConfig optimizer;
  DataConfig data;
  CheckpointConfig checkpoint;
  OutputConfig output;
  DeviceConfig device;
  // The flags the user gave, by long name ("--heads"): to check them against --init-from's
  // shapes, and to tell a default from a chosen value.
  std::set<std::string> given;

  bool was_given(const std::string& flag) const { return given.count(flag) > 0; }
  // What tetra plan's models read of it.
  plan::RunSpec run_spec() const { return {layout, batch, optimizer, device}; }
};

// Fills what the other values imply: --min-lr lr/10 when not given, the interleaved schedule
// for --vpp above 1 without --schedule, the model's padded vocabulary. Then checks the
// values against each other (--comm nccl needs --device cuda, --ckpt-every needs --ckpt-dir,
// ...). Throws tetra::Error naming the flags. Idempotent.
void resolve(TrainConfig& c);

}  // namespace tetra
