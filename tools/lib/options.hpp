// The command line of `tetra` (the CLI contract of docs/design.md): the options of each subcommand
// and the one CLI11 app that parses them and prints their --help.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace CLI {
class App;
}

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
  // Input. Validation: --val-data, or the last val_split of --data's tokens (0: none);
  // evaluated every eval_every steps (0: after the last only) on eval_batches global batches.
  std::string data = "synthetic", init_from, val_data;
  double val_split = 0;
  int64_t eval_every = 0;
  int eval_batches = 4;
  // Tokenizer of text data: "" (bytes), "bpe:N" (train a BPE model of N pieces on --data) or
  // a SentencePiece .model file; text is tokenized into .bin shards cached beside it.
  std::string tokenizer;
  int64_t sample_every = 0;  // print a sample from rank 0 every N steps (0: never)
  // Device.
  std::string device = "cpu", dtype = "fp32", comm = "auto";
  // Checkpoints and faults. resume: "auto" (newest complete checkpoint in ckpt_dir that
  // verifies, if any), "never", or a checkpoint directory.
  std::string ckpt_dir, resume = "auto", inject_failure;
  int64_t ckpt_every = 0;  // with ckpt_dir: also every N steps (0: only after the last)
  // Settings a resumed run may change from the checkpoint's run (kChangeable names).
  std::set<std::string> allow_change;
  int keep = 3;
  double timeout = 300;
  // Output. trace_steps: steps traced after the run's first (warm-up) step.
  std::string metrics, export_path, export_dtype = "fp32", trace;
  int64_t trace_steps = 5;
  double peak_tflops = 0;
  // Which flags the user gave, by long name ("--heads"): to check them against
  // --init-from's shapes, and to tell a default --schedule from a chosen one.
  std::set<std::string> given;
};

// The settings of a run that --allow-change may name: resuming with any other value than the
// checkpoint's run had is refused unless allowed.
inline const std::vector<std::string> kChangeable = {"data",  "lr",   "min-lr",       "warmup",
                                                     "steps", "clip", "weight-decay", "dtype"};

// `tetra launch [--restarts N] [--quiet] -- COMMAND ARGS...`.
struct LaunchOptions {
  int restarts = 3;
  bool quiet = false;
  std::vector<std::string> command;  // everything after the first "--"
};

// `tetra ckpt inspect|verify DIR`.
struct CkptOptions {
  std::string action;  // "inspect" or "verify"
  std::string dir;
};

// `tetra plan [train flags] [--preset NAME] [--gpu NAME] ...`: the model, the layout and
// the batch as tetra train takes them, and the machine.
struct PlanOptions {
  TrainOptions train;
  std::string preset, gpu = "h100";
  // Overrides of the machine (0: the --gpu's); --peak-tflops is train's.
  double memory_gb = 0, nvlink_gbs = 0, network_gbs = 0;
  int gpus_per_node = 0;
  double tokens = 0;           // D of 6ND (0: none)
  double achieved_tflops = 0;  // a measured rate per GPU, for the time of D tokens
  double mfu = 0;              // percent, where one MFU point is valued (0: the estimate)
  std::string compare, draw;   // a metrics file to check; an SVG file to draw the schedule to
};

// `tetra plot`: exactly one of loss, trace, barrier (input files) or schedule (a kind, drawn
// for pp, vpp and micro_batches; 0 micro-batches: 2 * PP), written as SVG to out.
struct PlotOptions {
  std::string loss, trace, barrier, schedule, out;
  int pp = 4, vpp = 1, micro_batches = 0;
  int64_t step = -1;  // --trace: the first traced step; --barrier: the last with a straggler
};

// `tetra generate --init-from DIR --prompt TEXT ...`: text from a model on one rank.
struct GenerateOptions {
  std::string init_from, prompt, device = "cpu";
  int tokens = 64, top_k = 0;
  double temperature = 0;
  uint64_t seed = 1234;
};

struct CommandLine {
  // "train", "plan", "launch", "ckpt", "plot" or "generate"; empty when help was asked for
  std::string command;
  std::string help;  // the --help text asked for, else empty
  TrainOptions train;
  PlanOptions plan;
  LaunchOptions launch;
  CkptOptions ckpt;
  PlotOptions plot;
  GenerateOptions generate;
};

// Parses tetra's arguments (argv without the program name). Throws tetra::Error with a
// one-line message naming the flag for an unknown flag, a missing, repeated or malformed
// value, a value out of range, or flags that contradict each other.
CommandLine parse_command_line(std::vector<std::string> args);

// parse_command_line({"train", args...}).train, for callers that build flag lists.
TrainOptions parse_train_options(const std::vector<std::string>& args);

// The CLI11 app behind parse_command_line: subcommands train, plan, launch, ckpt (inspect,
// verify) and plot, whose options write into `into`. Tests walk it to check every flag's --help.
std::unique_ptr<CLI::App> make_app(CommandLine& into);

}  // namespace tetra
