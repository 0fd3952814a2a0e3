// Each subcommand's flags: names, value checks, defaults and --help text.
#include "cli/cli_flags.hpp"
#include "plan/machine.hpp"
#include "util/error.hpp"

namespace tetra::cli {

void add_train_options(CLI::App& app, TrainConfig& o, Settings* settings) {
  Section run(app, settings, "Preset", "run");
  run.add_choice("--preset", o.preset, {"llama3-8b", "llama3-70b", "llama3-405b", "demo", "bench"},
                 "a whole run: model, layout, batch, optimizer, dtype (and tetra plan's machine "
                 "and tokens); each flag given beside it replaces its part");

  Section layout(app, settings, "Layout", "layout");
  layout.add("--tp", o.layout.tp, "N", "tensor-parallel ranks (Megatron column/row splits)")
      ->check(kAtLeast1);
  layout.add("--cp", o.layout.cp, "N", "context-parallel ranks (sequence cut into 2*CP chunks)")
      ->check(kAtLeast1);
  layout.add("--pp", o.layout.pp, "N", "pipeline stages")->check(kAtLeast1);
  layout.add("--dp", o.layout.dp, "N", "data-parallel ranks (0: world / (TP*CP*PP))")
      ->check(kNonNegative);
  layout.add_switch("--sp", o.layout.sp,
                    "sequence parallelism: norms and residuals split over TP along the tokens");
  layout.add("--vpp", o.layout.vpp, "V", "virtual pipeline stages per rank (interleaved schedule)")
      ->check(kAtLeast1);
  layout.add_choice("--schedule", o.layout.schedule, {"gpipe", "1f1b", "interleaved"},
                    "pipeline schedule");

  Section model(app, settings, "Model", "model");
  model.add("--layers", o.model.layers, "L", "transformer blocks")->check(kPositive);
  model.add("--dim", o.model.dim, "D", "model width")->check(kPositive);
  model.add("--heads", o.model.heads, "H", "attention heads")->check(kPositive);
  model.add("--kv-heads", o.model.kv_heads, "K", "key/value heads (grouped-query attention)")
      ->check(kPositive);
  model.add("--ffn-dim", o.model.ffn_dim, "F", "SwiGLU hidden width")->check(kPositive);
  model.add("--seq-len", o.model.seq_len, "S", "tokens per sequence")->check(kPositive);
  model.add("--rope-theta", o.model.rope_theta, "X", "RoPE base")->check(kPositive);
  model
      .add("--vocab", o.model.data_vocab, "V",
           "token vocabulary of the data (the model pads it to a multiple of 128; the padding "
           "takes no part in the softmax)")
      ->check(kPositive);

  Section batch(app, settings, "Batch", "batch");
  batch
      .add("--micro-batch", o.batch.micro_batch, "B", "sequences per micro-batch (0: G / (DP*PP))")
      ->check(kNonNegative);
  batch
      .add("--global-batch", o.batch.global_batch, "G",
           "sequences per step, over all data-parallel ranks")
      ->check(kPositive);

  Section optim(app, settings, "Optimisation", "optimizer");
  optim.add("--steps", o.optimizer.steps, "N", "optimizer steps")->check(kPositive);
  optim.add("--lr", o.optimizer.lr, "X", "peak learning rate")->check(kPositive);
  optim.add("--min-lr", o.optimizer.min_lr, "X", "final learning rate of the cosine")
      ->check(kNonNegative)
      ->default_str("lr/10");
  optim.add("--warmup", o.optimizer.warmup, "N", "linear warmup steps")->check(kNonNegative);
  optim.add("--weight-decay", o.optimizer.weight_decay, "X", "AdamW decay on 2-D tensors")
      ->check(kNonNegative);
  optim.add("--clip", o.optimizer.clip, "X", "global gradient-norm clip (0: off)")
      ->check(kNonNegative);
  optim.add("--seed", o.optimizer.seed, "N", "seed of the weights and the synthetic data");
  optim
      .add("--zero", o.optimizer.zero, "1|2|3",
           "ZeRO stage: shard Adam state (1), + gradients (2), + weights (3)")
      ->check(rule(CLI::Range(1, 3), "must be 1, 2 or 3"));
  optim.record(
      app.add_option_function<std::string>(
             "--recompute", [&o](const std::string& v) { o.optimizer.recompute = v == "full"; },
             "recompute each block's forward during backward")
          ->type_name("none|full")
          ->check(one_of({"none", "full"}))
          ->default_str(o.optimizer.recompute ? "full" : "none"),
      [&o] { return toml_value(std::string(o.optimizer.recompute ? "full" : "none")); });

  Section input(app, settings, "Input", "data");
  input.add("--data", o.data.data, "SRC", "synthetic, a text file, or an llm.c .bin token shard");
  input.add("--val-data", o.data.val_data, "SRC", "validation data (as --data)");
  input
      .add("--val-split", o.data.val_split, "F",
           "validate on the last fraction F of --data's tokens and train on the rest")
      ->check(rule(CLI::Validator(
                       [](std::string& s) -> std::string {
                         double f = 0;
                         CLI::detail::lexical_cast(s, f);
                         return f > 0 && f < 1 ? "" : "outside (0, 1)";
                       },
                       ""),
                   "must be between 0 and 1, exclusive"));
  input
      .add("--eval-every", o.data.eval_every, "N",
           "validation loss every N steps and after the last (0: after the last only)")
      ->check(kNonNegative);
  input
      .add("--eval-batches", o.data.eval_batches, "N",
           "global batches of validation sequences, the same ones at every evaluation")
      ->check(kAtLeast1);
  input.add(
      "--tokenizer", o.data.tokenizer, "bpe:N|FILE",
      "tokenize text data: bpe:N trains a SentencePiece BPE model of N pieces on --data, FILE "
      "is a SentencePiece .model (default: bytes); the tokens are cached beside the data");
  input.add(
      "--init-from", o.data.init_from, "PATH",
      "start from a Hugging Face Llama model: a directory (config.json, model.safetensors or a "
      "sharded index) or one safetensors file");

  Section device(app, settings, "Device", "device");
  device.add_choice("--device", o.device.device, {"cpu", "cuda", "guarded-cpu"},
                    "where each rank computes; guarded-cpu: the CPU backend with memory host code "
                    "cannot touch, a test configuration");
  device.add_choice("--dtype", o.device.dtype, {"fp32", "bf16"},
                    "compute precision: bf16 weights and activations over fp32 master weights, "
                    "gradients and Adam state");
  device.add_choice(
      "--comm", o.device.comm, {"auto", "nccl", "mpi"},
      "device collectives: auto = NCCL for groups whose ranks each have a GPU of their "
      "own, else MPI through host memory");

  Section ckpt(app, settings, "Checkpoints and faults", "checkpoint");
  ckpt.add("--ckpt-dir", o.checkpoint.ckpt_dir, "DIR",
           "write sharded checkpoints here, after the last step at least; lock it while running");
  ckpt.add("--ckpt-every", o.checkpoint.ckpt_every, "N",
           "checkpoint every N steps too (0: only after the last)")
      ->check(kNonNegative);
  ckpt.add("--keep", o.checkpoint.keep, "K", "keep the newest K checkpoints")->check(kAtLeast1);
  ckpt.add("--resume", o.checkpoint.resume, "auto|never|DIR",
           "auto: continue from the newest checkpoint in --ckpt-dir that verifies")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return s.empty() ? "takes auto, never or a checkpoint directory" : "";
          },
          ""));
  std::string changeable;  // "data, lr, ..."
  for (const std::string& name : kChangeable) changeable += (changeable.empty() ? "" : ", ") + name;
  ckpt.record(
      app.add_option_function<std::string>(
             "--allow-change",
             [&o](const std::string& v) {
               for (const std::string& name : split_commas(v))
                 o.checkpoint.allow_change.insert(name);
             },
             "settings a resumed run may change from the checkpoint's run, comma-separated: " +
                 changeable)
          ->type_name("A,B")
          ->default_str("\"\"")
          ->check(CLI::Validator(
              [changeable](std::string& s) -> std::string {
                for (const std::string& name : split_commas(s))
                  if (std::find(kChangeable.begin(), kChangeable.end(), name) == kChangeable.end())
                    return "takes a comma-separated list of " + changeable + " (got '" + name +
                           "')";
                return "";
              },
              "")),
      [&o] {
        std::string names;
        for (const std::string& name : o.checkpoint.allow_change)
          names += (names.empty() ? "" : ",") + name;
        return toml_value(names);
      });
  ckpt.add("--inject-failure", o.checkpoint.inject_failure, "R@S[:MODE]",
           "fail rank R at step S, first attempt only: kill, ckpt, hang, slow=MS, preempt");
  ckpt.add("--timeout", o.checkpoint.timeout, "SECONDS",
           "abort the job when a collective blocks this long (0: never)")
      ->check(kNonNegative);

  Section output(app, settings, "Output", "output");
  output.add("--metrics", o.output.metrics, "FILE", "append one JSON object per step");
  output.add("--tensorboard", o.output.tensorboard, "DIR",
             "write the metrics as TensorBoard scalars (and the configuration as text) into a "
             "new event file in DIR");
  output.add("--trace", o.output.trace, "FILE",
             "write a Chrome trace (Perfetto) of compute, comm and waits per rank");
  output
      .add("--trace-steps", o.output.trace_steps, "N",
           "steps to trace, after the first (warm-up) step")
      ->check(kAtLeast1);
  output.add("--export", o.output.export_path, "PATH",
             "write the final weights as a Hugging Face model directory (config.json, "
             "model.safetensors, the tokenizer), or as one file when PATH ends in .safetensors");
  output.add_choice(
      "--export-dtype", o.output.export_dtype, {"fp32", "bf16"},
      "precision of the exported weights (the fp32 master weights, or rounded to bf16)");
  output
      .add("--peak-tflops", o.output.peak_tflops, "X",
           "peak per device for MFU (0: a table of known GPUs, else a CPU probe)")
      ->check(kNonNegative);
  output
      .add("--sample-every", o.output.sample_every, "N",
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

void add_plan_options(CLI::App& app, PlanOptions& p) {
  plan::Request& o = p.request;
  app.option_defaults()->group("Plan");
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
      ->check(rule(CLI::Validator(
                       [](std::string& s) -> std::string {
                         double x = -1;  // below 99 itself: one MFU point above must stay < 100
                         return CLI::detail::lexical_cast(s, x) && x >= 0 && x < 99 ? "" : "no";
                       },
                       ""),
                   "must be a percentage below 99"));
  add(app, "--compare", p.compare, "METRICS",
      "check a run's --metrics file against the plan: bytes per group exactly, peak memory "
      "within 10%; exit 1 on a mismatch");
  add(app, "--draw", p.draw, "FILE.svg", "draw the pipeline schedule as SVG");
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

}  // namespace tetra::cli
