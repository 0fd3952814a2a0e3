// The configuration of a training run, in the sections of tetra train's help: each section is
// defined in the layer that consumes it (the layout, batch and device in parallel/, the model
// in model/, the optimizer in optim/, the data in data/, checkpoints in checkpoint/) and each
// consumer receives its own sections only; the run and output sections are the trainer's.
// Each section's settings are declared once, after its struct (util/settings.hpp).
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <type_traits>

#include "checkpoint/config.hpp"
#include "data/config.hpp"
#include "model/config.hpp"
#include "optim/config.hpp"
#include "parallel/config.hpp"
#include "plan/setup.hpp"

namespace tetra {

// The run as a whole: the preset it starts from and the watchdog's limit.
struct RunConfig {
  std::string preset;    // the named run the flags start from (plan/preset.hpp), if any
  double timeout = 300;  // seconds a collective may block before the job aborts (0: forever)
};
inline const settings::Table<RunConfig> kRunKeys{
    "run",
    "Run",
    {.resume = settings::Resume::Free},
    {settings::choice(&RunConfig::preset, "preset",
                      {"llama3-8b", "llama3-70b", "llama3-405b", "demo", "bench"},
                      "a whole run: model, layout, batch, optimizer, dtype (and tetra plan's "
                      "machine and tokens); each flag given beside it replaces its part"),
     settings::key(&RunConfig::timeout, "timeout", "SECONDS",
                   "abort the job when a collective blocks this long (0: never)",
                   settings::non_negative())}};

struct OutputConfig {
  std::string metrics;      // append one JSON object per step
  std::string tensorboard;  // a directory: rank 0 writes a TensorBoard event file into it
  std::string trace;        // a Chrome trace of trace_steps steps after the first
  int64_t trace_steps = 5;
  std::string export_;                // the final weights: a model directory or a file
  std::string export_dtype = "fp32";  // fp32, or bf16 (rounded master weights)
  double peak_tflops = 0;             // per device for MFU (0: a GPU table, else a probe)
  int64_t sample_every = 0;           // a sample from rank 0 every N steps (0: never)
};
// A run's outputs are its own: a sweep writes each run's metrics itself and passes no other
// file on; only the peak for MFU is the machine's.
inline const settings::Table<OutputConfig> kOutputKeys{
    "output",
    "Output",
    {.resume = settings::Resume::Free, .swept = false},
    {settings::key(&OutputConfig::metrics, "metrics", "FILE", "append one JSON object per step"),
     settings::key(&OutputConfig::tensorboard, "tensorboard", "DIR",
                   "write the metrics as TensorBoard scalars (and the configuration as text) "
                   "into a new event file in DIR"),
     settings::key(&OutputConfig::trace, "trace", "FILE",
                   "write a Chrome trace (Perfetto) of compute, comm and waits per rank"),
     settings::key(&OutputConfig::trace_steps, "trace_steps", "N",
                   "steps to trace, after the first (warm-up) step", settings::at_least_1()),
     settings::key(&OutputConfig::export_, "export", "PATH",
                   "write the final weights as a Hugging Face model directory (config.json, "
                   "model.safetensors, the tokenizer), or as one file when PATH ends in "
                   ".safetensors"),
     settings::choice(&OutputConfig::export_dtype, "export_dtype", {"fp32", "bf16"},
                      "precision of the exported weights (the fp32 master weights, or rounded "
                      "to bf16)"),
     settings::key(&OutputConfig::peak_tflops, "peak_tflops", "X",
                   "peak per device for MFU (0: a table of known GPUs, else a CPU probe)",
                   settings::non_negative())
         .sweep(true),
     settings::key(&OutputConfig::sample_every, "sample_every", "N",
                   "print a short greedy sample from a fixed prompt every N steps (0: never)",
                   settings::non_negative())}};

struct TrainConfig {
  RunConfig run;
  LayoutConfig layout;
  ModelConfig model;
  BatchConfig batch;
  OptimizerConfig optimizer;
  DataConfig data;
  CheckpointConfig checkpoint;
  OutputConfig output;
  DeviceConfig device;
  // The settings the user gave, by key ("model.heads"), on the command line or in a --config
  // file: to check them against --init-from's shapes, and to tell a default from a chosen
  // value (cli/config_file.hpp keeps it across --print-config and --config).
  std::set<std::string> given;
  // The --config file ("" for none) and the keys of `given` it gave: how messages word each
  // setting they name (settings::worded), as the user gave it; and an input no output of the
  // run may replace (train/outputs.hpp).
  settings::Origin origin;

  bool was_given(const std::string& key) const { return given.count(key) > 0; }
  // What tetra plan's models read of it.
  plan::RunSpec run_spec() const { return {layout, batch, optimizer, device}; }
};

// Calls f(section, table) for each section of `c`, in --help's order. The one list of the
// sections: flags, TOML, JSON, presets and argument lists all walk it.
template <typename C, typename F>
requires std::is_same_v<std::remove_const_t<C>, TrainConfig>
void for_each_section(C& c, F&& f) {
  f(c.run, kRunKeys);
  f(c.layout, kLayoutKeys);
  f(c.model, kModelKeys);
  f(c.batch, kBatchKeys);
  f(c.optimizer, kOptimizerKeys);
  f(c.data, kDataKeys);
  f(c.device, kDeviceKeys);
  f(c.checkpoint, kCheckpointKeys);
  f(c.output, kOutputKeys);
}

// Every setting as JSON, by section ({"layout": {"tp": 1, ...}, ...}); `given` and `origin`
// are how the values were chosen, not part of them. from_json reads the keys `v` has, under
// their current names (current_key); others keep their values.
void to_json(json& v, const TrainConfig& c);
void from_json(const json& v, TrainConfig& c);

// A setting's key as it is now, for the key an older tetra recorded or read it under
// ("data.init_from" -> "model.init_from"); any other key as it is.
std::string current_key(const std::string& key);

// Fills what the other values imply: min_lr lr/10 when not given, the interleaved schedule
// for vpp above 1 without a schedule given, vpp 2 for zb-v without a vpp given, the model's
// padded vocabulary. Then checks the
// values against each other (comm nccl needs device cuda, ckpt_every needs ckpt_dir, ...).
// Throws tetra::Error naming the settings (settings::worded). Idempotent.
void resolve(TrainConfig& c);

}  // namespace tetra
