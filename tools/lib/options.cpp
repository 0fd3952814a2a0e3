#include "tools/lib/options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "model/error.hpp"
#include "tools/lib/plan/machine.hpp"

namespace tetra {
namespace {

// Value checks, as CLI11 validators that word a refusal the way tetra always has. CLI11
// reports it as "--flag: <words>"; reworded() below makes that "--flag <words>".

// Whole numbers in base 10 that fit T. The value goes on to CLI11 spelled canonically:
// CLI11's own conversion would read "010" as octal and "0x10" as hexadecimal.
template <typename T>
CLI::Validator integer() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        T x{};
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
        if (ec == std::errc::result_out_of_range)
          return "takes an integer (got '" + s + "', out of range)";
        if (ec != std::errc() || end != s.data() + s.size())
          return "takes an integer (got '" + s + "')";
        s = std::to_string(x);
        return {};
      },
      "");
}

// Finite numbers, read as CLI11 then reads them.
CLI::Validator finite() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        double x = 0;
        if (!s.empty() && CLI::detail::lexical_cast(s, x) && std::isfinite(x)) return {};
        return "takes a finite number (got '" + s + "')";
      },
      "");
}

// What `v` (a CLI11 range) accepts; a refusal reads "must be positive (got 0)".
CLI::Validator rule(const CLI::Validator& v, const std::string& words) {
  return CLI::Validator(
      [v, words](std::string& s) -> std::string {
        return v(std::as_const(s)).empty() ? std::string() : words + " (got " + s + ")";
      },
      "");
}

// One of `values` (CLI::IsMember); a refusal lists them: "takes none or full (got 'x')".
CLI::Validator one_of(const std::vector<std::string>& values) {
  std::string list;
  for (size_t i = 0; i < values.size(); ++i)
    list += (i == 0 ? "" : i + 1 < values.size() ? ", " : " or ") + values[i];
  return CLI::Validator(
      [member = CLI::IsMember(values), list](std::string& s) -> std::string {
        return member(std::as_const(s)).empty() ? std::string()
                                                : "takes " + list + " (got '" + s + "')";
      },
      "");
}

// "a,b,,c" -> {"a", "b", "", "c"}.
std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= s.size();) {
    const size_t comma = std::min(s.find(',', at), s.size());
    out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

const CLI::Validator kPositive = rule(CLI::PositiveNumber, "must be positive");
const CLI::Validator kNonNegative = rule(CLI::NonNegativeNumber, "must not be negative");
const CLI::Validator kAtLeast1 =
    rule(CLI::Range(1.0, std::numeric_limits<double>::max()), "must be at least 1");

// Adds `--name METAVAR` writing into `field`, its value checked against the field's type and
// its default read off the field for --help ("" for an empty string: the option is off).
template <typename T>
CLI::Option* add(CLI::App& app, const std::string& name, T& field, const std::string& metavar,
                 const std::string& help) {
  CLI::Option* opt = app.add_option(name, field, help)->type_name(metavar)->capture_default_str();
  if constexpr (std::is_floating_point_v<T>) {
    opt->check(finite());
  } else if constexpr (std::is_integral_v<T>) {
    // An unsigned field (the seed) takes any int64, a negative one wrapping around.
    opt->transform(integer<std::make_signed_t<T>>());
  }
  if (opt->get_default_str().empty()) opt->default_str("\"\"");
  return opt;
}

// Adds `--name a|b|c` taking one of `values`.
CLI::Option* add_choice(CLI::App& app, const std::string& name, std::string& field,
                        const std::vector<std::string>& values, const std::string& help) {
  std::string metavar;
  for (const std::string& v : values) metavar += (metavar.empty() ? "" : "|") + v;
  return add(app, name, field, metavar, help)->check(one_of(values));
}

// Adds a switch: given once, without a value, it turns `field` on.
CLI::Option* add_switch(CLI::App& app, const std::string& name, bool& field,
                        const std::string& help) {
  return app.add_flag(name, field, help)
      ->multi_option_policy(CLI::MultiOptionPolicy::Throw)
      ->disable_flag_override()
      ->default_str("off");
}

void add_train_options(CLI::App& app, TrainOptions& o) {
  app.option_defaults()->group("Layout");
  add(app, "--tp", o.tp, "N", "tensor-parallel ranks (Megatron column/row splits)")
      ->check(kAtLeast1);
  add(app, "--cp", o.cp, "N", "context-parallel ranks (sequence cut into 2*CP chunks)")
      ->check(kAtLeast1);
  add(app, "--pp", o.pp, "N", "pipeline stages")->check(kAtLeast1);
  add(app, "--dp", o.dp, "N", "data-parallel ranks (0: world / (TP*CP*PP))")->check(kNonNegative);
  add_switch(app, "--sp", o.sp,
             "sequence parallelism: norms and residuals split over TP along the tokens");
  add(app, "--vpp", o.vpp, "V", "virtual pipeline stages per rank (interleaved schedule)")
      ->check(kAtLeast1);
  add_choice(app, "--schedule", o.schedule, {"gpipe", "1f1b", "interleaved"}, "pipeline schedule");

  app.option_defaults()->group("Model");
  add(app, "--layers", o.model.layers, "L", "transformer blocks")->check(kPositive);
  add(app, "--dim", o.model.dim, "D", "model width")->check(kPositive);
  add(app, "--heads", o.model.heads, "H", "attention heads")->check(kPositive);
  add(app, "--kv-heads", o.model.kv_heads, "K", "key/value heads (grouped-query attention)")
      ->check(kPositive);
  add(app, "--ffn-dim", o.model.ffn_dim, "F", "SwiGLU hidden width")->check(kPositive);
  add(app, "--seq-len", o.model.seq_len, "S", "tokens per sequence")->check(kPositive);
  add(app, "--rope-theta", o.model.rope_theta, "X", "RoPE base")->check(kPositive);

  app.option_defaults()->group("Batch");
  add(app, "--micro-batch", o.micro_batch, "B", "sequences per micro-batch (0: G / (DP*PP))")
      ->check(kNonNegative);
  add(app, "--global-batch", o.global_batch, "G",
      "sequences per step, over all data-parallel ranks")
      ->check(kPositive);
  add(app, "--vocab", o.data_vocab, "V",
      "token vocabulary of the data (the model pads it to a multiple of 128; the padding "
      "takes no part in the softmax)")
      ->check(kPositive);

  app.option_defaults()->group("Optimisation");
  add(app, "--steps", o.steps, "N", "optimizer steps")->check(kPositive);
  add(app, "--lr", o.lr, "X", "peak learning rate")->check(kPositive);
  add(app, "--min-lr", o.min_lr, "X", "final learning rate of the cosine")
      ->check(kNonNegative)
      ->default_str("lr/10");
  add(app, "--warmup", o.warmup, "N", "linear warmup steps")->check(kNonNegative);
  add(app, "--weight-decay", o.weight_decay, "X", "AdamW decay on 2-D tensors")
      ->check(kNonNegative);
  add(app, "--clip", o.clip, "X", "global gradient-norm clip (0: off)")->check(kNonNegative);
  add(app, "--seed", o.seed, "N", "seed of the weights and the synthetic data");
  add(app, "--zero", o.zero, "1|2|3",
      "ZeRO stage: shard Adam state (1), + gradients (2), + weights (3)")
      ->check(rule(CLI::Range(1, 3), "must be 1, 2 or 3"));
  app.add_option_function<std::string>(
         "--recompute", [&o](const std::string& v) { o.recompute = v == "full"; },
         "recompute each block's forward during backward")
      ->type_name("none|full")
      ->check(one_of({"none", "full"}))
      ->default_str(o.recompute ? "full" : "none");

  app.option_defaults()->group("Input");
  add(app, "--data", o.data, "SRC", "synthetic, a text file, or an llm.c .bin token shard");
  add(app, "--val-data", o.val_data, "SRC", "validation data (as --data)");
  add(app, "--val-split", o.val_split, "F",
      "validate on the last fraction F of --data's tokens and train on the rest");
  add(app, "--eval-every", o.eval_every, "N",
      "validation loss every N steps and after the last (0: after the last only)")
      ->check(kNonNegative);
  add(app, "--eval-batches", o.eval_batches, "N",
      "global batches of validation sequences, the same ones at every evaluation")
      ->check(kAtLeast1);
  add(app, "--tokenizer", o.tokenizer, "bpe:N|FILE",
      "tokenize text data: bpe:N trains a SentencePiece BPE model of N pieces on --data, FILE "
      "is a SentencePiece .model (default: bytes); the tokens are cached beside the data");
  add(app, "--init-from", o.init_from, "PATH",
      "start from a Hugging Face Llama model: a directory (config.json, model.safetensors or a "
      "sharded index) or one safetensors file");

  app.option_defaults()->group("Device");
  add_choice(app, "--device", o.device, {"cpu", "cuda", "guarded-cpu"},
             "where each rank computes; guarded-cpu: the CPU backend with memory host code "
             "cannot touch, a test configuration");
  add_choice(app, "--dtype", o.dtype, {"fp32", "bf16"},
             "compute precision: bf16 weights and activations over fp32 master weights, "
             "gradients and Adam state");
  add_choice(app, "--comm", o.comm, {"auto", "nccl", "mpi"},
             "device collectives: auto = NCCL for groups whose ranks each have a GPU of their "
             "own, else MPI through host memory");

  app.option_defaults()->group("Checkpoints and faults");
  add(app, "--ckpt-dir", o.ckpt_dir, "DIR",
      "write sharded checkpoints here, after the last step at least; lock it while running");
  add(app, "--ckpt-every", o.ckpt_every, "N",
      "checkpoint every N steps too (0: only after the last)")
      ->check(kNonNegative);
  add(app, "--keep", o.keep, "K", "keep the newest K checkpoints")->check(kAtLeast1);
  add(app, "--resume", o.resume, "auto|never|DIR",
      "auto: continue from the newest checkpoint in --ckpt-dir that verifies")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return s.empty() ? "takes auto, never or a checkpoint directory" : "";
          },
          ""));
  app.add_option_function<std::string>(
         "--allow-change",
         [&o](const std::string& v) {
           for (const std::string& name : split_commas(v)) o.allow_change.insert(name);
         },
         "settings a resumed run may change from the checkpoint's run, comma-separated: "
         "data, lr, min-lr, warmup, steps, clip, weight-decay")
      ->type_name("A,B")
      ->default_str("\"\"")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            for (const std::string& name : split_commas(s))
              if (std::find(kChangeable.begin(), kChangeable.end(), name) == kChangeable.end())
                return "takes a comma-separated list of data, lr, min-lr, warmup, steps, clip, "
                       "weight-decay (got '" +
                       name + "')";
            return "";
          },
          ""));
  add(app, "--inject-failure", o.inject_failure, "R@S[:MODE]",
      "fail rank R at step S, first attempt only: kill, ckpt, hang, slow=MS");
  add(app, "--timeout", o.timeout, "SECONDS",
      "abort the job when a collective blocks this long (0: never)")
      ->check(kNonNegative);

  app.option_defaults()->group("Output");
  add(app, "--metrics", o.metrics, "FILE", "append one JSON object per step");
  add(app, "--trace", o.trace, "FILE",
      "write a Chrome trace (Perfetto) of compute, comm and waits per rank");
  add(app, "--trace-steps", o.trace_steps, "N", "steps to trace, after the first (warm-up) step")
      ->check(kAtLeast1);
  add(app, "--export", o.export_path, "PATH",
      "write the final weights as a Hugging Face model directory (config.json, "
      "model.safetensors, the tokenizer), or as one file when PATH ends in .safetensors");
  add_choice(app, "--export-dtype", o.export_dtype, {"fp32", "bf16"},
             "precision of the exported weights (the fp32 master weights, or rounded to bf16)");
  add(app, "--peak-tflops", o.peak_tflops, "X",
      "peak per device for MFU (0: a table of known GPUs, else a CPU probe)")
      ->check(kNonNegative);
  add(app, "--sample-every", o.sample_every, "N",
      "print a short greedy sample from a fixed prompt every N steps (0: never)")
      ->check(kNonNegative);
}

void add_generate_options(CLI::App& app, GenerateOptions& o) {
  add(app, "--init-from", o.init_from, "PATH",
      "the model: a directory tetra exported, or any "
      "Hugging Face Llama directory")
      ->required();
  add(app, "--prompt", o.prompt, "TEXT", "the text to continue")->required();
  add(app, "--tokens", o.tokens, "N", "new tokens to generate")->check(kAtLeast1);
  add(app, "--temperature", o.temperature, "T", "0: greedy; else sample from softmax(logits/T)")
      ->check(kNonNegative);
  add(app, "--top-k", o.top_k, "K", "sample among the K most likely tokens (0: all)")
      ->check(kNonNegative);
  add(app, "--seed", o.seed, "N", "seed of the sampling draws");
  add_choice(app, "--device", o.device, {"cpu", "cuda"}, "where to compute");
}

void add_plan_options(CLI::App& app, PlanOptions& o) {
  app.option_defaults()->group("Plan");
  add_choice(app, "--preset", o.preset, {"llama3-8b", "llama3-70b", "llama3-405b", "demo", "bench"},
             "a named model (its flags can still be given, and win)");
  add_choice(app, "--gpu", o.gpu, {"h100", "h200", "a100", "cpu"},
             "the machine: peak, memory and links per GPU, GPUs per node");
  add(app, "--gpu-memory", o.memory_gb, "GB", "memory per GPU (0: the --gpu's)")
      ->check(kNonNegative);
  add(app, "--nvlink", o.nvlink_gbs, "GB/S", "bandwidth per GPU inside a node, per direction")
      ->check(kNonNegative);
  add(app, "--network", o.network_gbs, "GB/S", "bandwidth per GPU between nodes, per direction")
      ->check(kNonNegative);
  add(app, "--gpus-per-node", o.gpus_per_node, "N", "GPUs per node (0: the --gpu's)")
      ->check(kNonNegative);
  add(app, "--tokens", o.tokens, "D", "tokens to train on: 6ND, days and GPU-hours")
      ->check(kNonNegative);
  add(app, "--achieved-tflops", o.achieved_tflops, "X",
      "a rate per GPU to time D tokens at (e.g. a measured one)")
      ->check(kNonNegative);
  add(app, "--mfu", o.mfu, "PERCENT", "value one MFU point from here (0: the estimated bound)")
      ->check(rule(CLI::Range(0.0, 99.0), "must be a percentage below 99"));
  add(app, "--compare", o.compare, "METRICS",
      "check a run's --metrics file against the plan: bytes per group exactly, peak memory "
      "within 10%; exit 1 on a mismatch");
  add(app, "--draw", o.draw, "FILE.svg", "draw the pipeline schedule as SVG");
}

void add_launch_options(CLI::App& app, LaunchOptions& o) {
  add(app, "--restarts", o.restarts, "N", "reruns allowed after failures")->check(kNonNegative);
  add_switch(app, "--quiet", o.quiet,
             "no notes on stderr between attempts (the summary is still printed)");
}

void add_plot_options(CLI::App& app, PlotOptions& o) {
  app.option_defaults()->group("What to draw (one of)");
  add(app, "--loss", o.loss, "METRICS", "the loss per step, with the entropy floor and ln(vocab)");
  add(app, "--trace", o.trace, "TRACE",
      "one traced step (tetra train --trace): a lane per rank, forward and backward boxes "
      "colored by micro-batch, communication and waiting");
  add(app, "--barrier", o.barrier, "METRICS",
      "one step's compute and wait per rank, the straggler marked");
  add_choice(app, "--schedule", o.schedule, {"gpipe", "1f1b", "interleaved"},
             "a pipeline schedule, from the simulator");
  app.option_defaults()->group("Options");
  add(app, "--out", o.out, "FILE", "the SVG file to write");
  add(app, "--step", o.step, "N",
      "--trace: the step (-1: the first traced); --barrier: the step (-1: the last with a "
      "straggler, else the last)")
      ->check(rule(CLI::Range(int64_t(-1), std::numeric_limits<int64_t>::max()),
                   "must be -1 or a step"));
  add(app, "--pp", o.pp, "N", "--schedule: pipeline ranks")->check(kAtLeast1);
  add(app, "--vpp", o.vpp, "V", "--schedule: virtual stages per rank (interleaved)")
      ->check(kAtLeast1);
  add(app, "--micro-batches", o.micro_batches, "M", "--schedule: micro-batches (0: 2*PP)")
      ->check(kNonNegative);
}

// CLI11's help layout, but a switch shows its default too ("--sp [off]"), so that every
// flag in --help carries its default.
class Formatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (opt->get_expected_max() != 0 || opt->get_default_str().empty())
      return CLI::Formatter::make_option_opts(opt);
    return " [" + opt->get_default_str() + "]";
  }
};

// Settings every (sub)command shares. Extras are allowed so that tetra, not CLI11, words the
// error for an unknown flag (see leftover()); options refuse a second value.
void configure(CLI::App& app) {
  app.allow_extras();
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::Throw);
}

// The subcommands given, outermost first: {tetra, train} or {tetra, ckpt, verify}.
std::vector<const CLI::App*> chain(const CLI::App& app) {
  std::vector<const CLI::App*> apps = {&app};
  while (!apps.back()->get_subcommands().empty())
    apps.push_back(apps.back()->get_subcommands().front());
  return apps;
}

std::string path_of(const std::vector<const CLI::App*>& apps) {
  std::string path;
  for (const CLI::App* a : apps) path += (path.empty() ? "" : " ") + a->get_name();
  return path;
}

// The first argument no (sub)command took, innermost command first (an unknown flag stays
// with the subcommand it follows, a stray word may go up to its parent); empty if none.
std::string leftover(const std::vector<const CLI::App*>& apps) {
  for (auto a = apps.rbegin(); a != apps.rend(); ++a)
    if (!(*a)->remaining().empty()) return (*a)->remaining().front();
  return {};
}

std::string unexpected(const std::vector<const CLI::App*>& apps, const std::string& arg) {
  const bool wants_command = apps.back()->get_require_subcommand_min() > 0;
  const std::string kind = arg.rfind('-', 0) == 0 ? "unknown flag"
                           : wants_command        ? "unknown command"
                                                  : "unexpected argument";
  return kind + " '" + arg + "' (see " + path_of(apps) + " --help)";
}

// Whether CLI11's message is about option `opt`: it starts with the option's name, with or
// without its dashes ("--dim: ...", "sp was given ..."). The rest of the message follows.
bool about(const std::string& what, const CLI::Option& opt, std::string& rest) {
  for (const std::string& name : {opt.get_name(), opt.get_name().substr(2)}) {
    if (what.rfind(name + ": ", 0) == 0)
      rest = what.substr(name.size() + 2);
    else if (what.rfind(name + " ", 0) == 0)
      rest = what.substr(name.size() + 1);
    else
      continue;
    return true;
  }
  return false;
}

// CLI11's error in tetra's words, naming the flag: "--dim takes an integer (got 'x')",
// "--dim needs a value (D)", "--dim is given more than once".
std::string reworded(const CLI::App& app, const CLI::ParseError& e) {
  const std::string what = e.what();
  const std::vector<const CLI::App*> apps = chain(app);
  for (const CLI::App* a : apps) {
    for (const CLI::Option* opt :
         a->get_options([](const CLI::Option* o) { return !o->get_positional(); })) {
      const std::string name = opt->get_name();
      std::string rest;
      if (!about(what, *opt, rest)) continue;
      if (dynamic_cast<const CLI::ValidationError*>(&e)) return name + " " + rest;
      if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
        if (opt->count() > 1) return name + " is given more than once";
        if (opt->get_expected_max() == 0) return name + " takes no value";
        return name + " needs a value (" + opt->get_type_name() + ")";
      }
    }
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e)) {
    if (const std::string arg = leftover(apps); !arg.empty()) return unexpected(apps, arg);
    const CLI::App& last = *apps.back();
    if (last.get_require_subcommand_min() > 0) {
      if (apps.size() == 1) return "no command given (see tetra --help)";
      std::string names;
      for (const CLI::App* sub : last.get_subcommands([](const CLI::App*) { return true; }))
        names += (names.empty() ? "" : " or ") + sub->get_name();
      return path_of(apps) + " needs a command: " + names;
    }
    for (const CLI::Option* opt : last.get_options())
      if (opt->get_positional() && opt->count() == 0)
        return path_of(apps) + " needs " + opt->get_name();
  }
  return path_of(apps) + ": " + what;
}

// The preset's model, except the fields whose flags were given.
void apply_preset(const std::string& name, TrainOptions& o) {
  const plan::Preset p = plan::preset_named(name);
  const auto set = [&](const char* flag, auto& field, auto value) {
    if (!o.given.count(flag)) field = value;
  };
  set("--layers", o.model.layers, p.model.layers);
  set("--dim", o.model.dim, p.model.dim);
  set("--heads", o.model.heads, p.model.heads);
  set("--kv-heads", o.model.kv_heads, p.model.kv_heads);
  set("--ffn-dim", o.model.ffn_dim, p.model.ffn_dim);
  set("--seq-len", o.model.seq_len, p.model.seq_len);
  set("--rope-theta", o.model.rope_theta, p.model.rope_theta);
  set("--vocab", o.data_vocab, p.data_vocab);
}

}  // namespace

std::unique_ptr<CLI::App> make_app(CommandLine& into) {
  auto app = std::make_unique<CLI::App>(
      "tetra trains Llama-style transformers on N ranks laid out as TP x CP x PP x DP.", "tetra");
  auto formatter = std::make_shared<Formatter>();
  formatter->column_width(42);
  app->formatter(formatter);
  configure(*app);
  app->require_subcommand(1);

  CLI::App* train =
      app->add_subcommand("train", "train a model on N ranks laid out as TP x CP x PP x DP");
  configure(*train);
  train->footer(
      "[mpirun -np N] tetra train [OPTIONS]: the ranks are laid out as TP x CP x PP x DP\n"
      "(rank = tp + TP*(cp + CP*(pp + PP*dp))); the product must equal N.");
  add_train_options(*train, into.train);

  CLI::App* plan = app->add_subcommand(
      "plan", "predict a layout's memory, traffic and time, or check them against a run");
  configure(*plan);
  plan->footer(
      "tetra plan [train flags] [--preset NAME] [--gpu NAME]: parameters, FLOPs, the rank\n"
      "grid, memory per rank, bytes per group and their time, the bubble, step time and MFU.\n"
      "The layout is TP x CP x PP x DP (--dp defaults to 1). Example:\n"
      "  tetra plan --preset llama3-405b --dtype bf16 --tp 8 --pp 16 --dp 128 \\\n"
      "             --global-batch 2048 --micro-batch 1 --tokens 15.6e12");
  add_train_options(*plan, into.plan.train);
  add_plan_options(*plan, into.plan);

  CLI::App* launch = app->add_subcommand(
      "launch", "supervise a training command: rerun it with --resume auto after a failure");
  configure(*launch);
  launch->footer(
      "tetra launch [--restarts N] [--quiet] -- COMMAND ARGS...\n"
      "Runs COMMAND; when it fails, reruns it with --resume auto. Attempt k sees\n"
      "TETRA_RESTART=k. Step times come from the command's --metrics file (a temporary one\n"
      "is added when it has none); the summary gives lost steps and goodput.\n"
      "Example: tetra launch --restarts 3 -- mpirun -np 16 build/tetra train ...");
  add_launch_options(*launch, into.launch);

  CLI::App* generate =
      app->add_subcommand("generate", "continue a prompt with a model (one rank, with a KV cache)");
  configure(*generate);
  add_generate_options(*generate, into.generate);

  CLI::App* ckpt =
      app->add_subcommand("ckpt", "inspect DIR | verify DIR: describe or check a checkpoint");
  configure(*ckpt);
  ckpt->require_subcommand(1);
  const std::pair<const char*, const char*> actions[] = {
      {"inspect", "describe a checkpoint: step, model, layout, shards"},
      {"verify", "check a checkpoint's files against its manifest"}};
  for (const auto& [name, help] : actions) {
    CLI::App* action = ckpt->add_subcommand(name, help);
    configure(*action);
    action
        ->add_option("DIR", into.ckpt.dir,
                     "a checkpoint (step_...) or a checkpoint directory, meaning its newest "
                     "complete checkpoint")
        ->type_name("")
        ->required();
  }

  CLI::App* plot = app->add_subcommand("plot",
                                       "draw a run's loss, a traced step, the barrier "
                                       "of a step or a pipeline schedule as SVG");
  configure(*plot);
  plot->footer(
      "tetra plot --loss run.jsonl --out loss.svg\n"
      "tetra plot --trace trace.json [--step N] --out step.svg\n"
      "tetra plot --barrier run.jsonl [--step N] --out barrier.svg\n"
      "tetra plot --schedule interleaved --pp 4 --vpp 2 --micro-batches 8 --out sched.svg");
  add_plot_options(*plot, into.plot);
  return app;
}

CommandLine parse_command_line(std::vector<std::string> args) {
  CommandLine cli;
  // What follows launch's first "--" is the command to supervise, not tetra's to read.
  bool separated = false;
  if (!args.empty() && args[0] == "launch") {
    const auto dash = std::find(args.begin(), args.end(), "--");
    separated = dash != args.end();
    if (separated) {
      cli.launch.command.assign(dash + 1, args.end());
      args.erase(dash, args.end());
    }
  }
  const std::unique_ptr<CLI::App> app = make_app(cli);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    app->parse(args);
  } catch (const CLI::CallForHelp&) {
    cli.help = app->help();
    return cli;
  } catch (const CLI::ParseError& e) {
    fail(reworded(*app, e));
  }
  const std::vector<const CLI::App*> apps = chain(*app);
  if (const std::string arg = leftover(apps); !arg.empty()) fail(unexpected(apps, arg));
  cli.command = apps[1]->get_name();
  if (cli.command == "train") {
    TrainOptions& o = cli.train;
    for (const CLI::Option* opt : apps[1]->get_options())
      if (opt->count() > 0) o.given.insert(opt->get_name());
    check(o.comm != "nccl" || o.device == "cuda", "--comm nccl needs --device cuda");
    check(o.ckpt_every == 0 || !o.ckpt_dir.empty(), "--ckpt-every needs --ckpt-dir");
    check(!o.given.count("--val-split") || (o.val_split > 0 && o.val_split < 1),
          "--val-split must be between 0 and 1, exclusive (got ", o.val_split, ")");
    check(o.val_data.empty() || o.val_split == 0, "--val-data and --val-split exclude each other");
    check(!o.given.count("--eval-every") || !o.val_data.empty() || o.val_split > 0,
          "--eval-every needs --val-data or --val-split");
    check(o.tokenizer.empty() || !o.given.count("--vocab"),
          "--vocab and --tokenizer exclude each other: the tokenizer's pieces are the vocabulary");
    if (!o.given.count("--min-lr")) o.min_lr = o.lr / 10;
    check(o.min_lr <= o.lr, "--min-lr ", o.min_lr, " is above --lr ", o.lr,
          ": the schedule would climb after the warmup");
    o.model.vocab = padded_vocab(o.data_vocab);
    o.model.data_vocab = o.data_vocab;
  } else if (cli.command == "plan") {
    PlanOptions& p = cli.plan;
    TrainOptions& o = p.train;
    for (const CLI::Option* opt : apps[1]->get_options())
      if (opt->count() > 0) o.given.insert(opt->get_name());
    if (!p.preset.empty()) apply_preset(p.preset, o);
    if (o.dp == 0) o.dp = 1;
    o.model.vocab = padded_vocab(o.data_vocab);
    o.model.data_vocab = o.data_vocab;
  } else if (cli.command == "launch") {
    check(separated, "tetra launch needs '--' before the command (see tetra launch --help)");
    check(!cli.launch.command.empty(), "no command after '--' (see tetra launch --help)");
  } else if (cli.command == "ckpt") {
    cli.ckpt.action = apps[2]->get_name();
  } else if (cli.command == "plot") {
    const PlotOptions& o = cli.plot;
    const auto given = [&](const char* flag) { return apps[1]->count(flag) > 0; };
    const int inputs =
        given("--loss") + given("--trace") + given("--barrier") + given("--schedule");
    check(inputs == 1, "tetra plot needs exactly one of --loss, --trace, --barrier or --schedule",
          inputs ? " (got " + std::to_string(inputs) + ")" : "", " (see tetra plot --help)");
    check(!o.out.empty(), "tetra plot needs --out FILE");
    for (const char* flag : {"--pp", "--vpp", "--micro-batches"})
      check(o.schedule.empty() ? !given(flag) : true, flag, " goes with --schedule");
    check(!given("--step") || !o.trace.empty() || !o.barrier.empty(),
          "--step goes with --trace or --barrier");
  }
  return cli;
}

TrainOptions parse_train_options(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"train"};
  all.insert(all.end(), args.begin(), args.end());
  return parse_command_line(all).train;
}

}  // namespace tetra
