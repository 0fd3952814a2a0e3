#include "tools/lib/options.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <sstream>

#include "model/error.hpp"

namespace tetra {
namespace {

int64_t to_int(const std::string& flag, const std::string& v) {
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (...) {
    used = 0;
  }
  check(used == v.size() && !v.empty(), flag, " takes an integer (got '", v, "')");
  return x;
}

double to_double(const std::string& flag, const std::string& v) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (...) {
    used = 0;
  }
  check(used == v.size() && !v.empty() && std::isfinite(x), flag, " takes a finite number (got '",
        v, "')");
  return x;
}

int to_i32(const std::string& flag, const std::string& v) {
  const int64_t x = to_int(flag, v);
  check(x >= INT32_MIN && x <= INT32_MAX, flag, " takes an integer (got '", v, "', out of range)");
  return int(x);
}

struct Flag {
  std::string name, arg, help;
  std::function<void(TrainOptions&, const std::string&)> set;
};

std::vector<Flag> flags() {
  auto i32 = [](int TrainOptions::*f) {
    return [f](TrainOptions& o, const std::string& v) { o.*f = to_i32("", v); };
  };
  auto i64 = [](int64_t TrainOptions::*f) {
    return [f](TrainOptions& o, const std::string& v) { o.*f = to_int("", v); };
  };
  auto dbl = [](double TrainOptions::*f) {
    return [f](TrainOptions& o, const std::string& v) { o.*f = to_double("", v); };
  };
  auto str = [](std::string TrainOptions::*f) {
    return [f](TrainOptions& o, const std::string& v) { o.*f = v; };
  };
  auto model = [](int ModelConfig::*f) {
    return [f](TrainOptions& o, const std::string& v) { o.model.*f = to_i32("", v); };
  };
  return {
      {"--tp", "N", "tensor-parallel ranks (Megatron column/row splits)", i32(&TrainOptions::tp)},
      {"--cp", "N", "context-parallel ranks (sequence cut into 2*CP chunks)",
       i32(&TrainOptions::cp)},
      {"--pp", "N", "pipeline stages", i32(&TrainOptions::pp)},
      {"--dp", "N", "data-parallel ranks (default: world / (TP*CP*PP))", i32(&TrainOptions::dp)},
      {"--sp", "", "sequence parallelism: norms and residuals split over TP along the tokens",
       nullptr},
      {"--vpp", "V", "virtual pipeline stages per rank (interleaved schedule)",
       i32(&TrainOptions::vpp)},
      {"--schedule", "S", "pipeline schedule: gpipe, 1f1b or interleaved",
       str(&TrainOptions::schedule)},
      {"--layers", "L", "transformer blocks", model(&ModelConfig::layers)},
      {"--dim", "D", "model width", model(&ModelConfig::dim)},
      {"--heads", "H", "attention heads", model(&ModelConfig::heads)},
      {"--kv-heads", "K", "key/value heads (grouped-query attention)",
       model(&ModelConfig::kv_heads)},
      {"--ffn-dim", "F", "SwiGLU hidden width", model(&ModelConfig::ffn_dim)},
      {"--seq-len", "S", "tokens per sequence", model(&ModelConfig::seq_len)},
      {"--rope-theta", "X", "RoPE base",
       [](TrainOptions& o, const std::string& v) { o.model.rope_theta = to_double("", v); }},
      {"--micro-batch", "B", "sequences per micro-batch (default: G / (DP*PP))",
       i32(&TrainOptions::micro_batch)},
      {"--global-batch", "G", "sequences per step, over all data-parallel ranks",
       i32(&TrainOptions::global_batch)},
      {"--vocab", "V", "token vocabulary of the data (the model pads it to a multiple of 128)",
       i64(&TrainOptions::data_vocab)},
      {"--steps", "N", "optimizer steps", i64(&TrainOptions::steps)},
      {"--lr", "X", "peak learning rate", dbl(&TrainOptions::lr)},
      {"--min-lr", "X", "final learning rate of the cosine (default lr/10)",
       dbl(&TrainOptions::min_lr)},
      {"--warmup", "N", "linear warmup steps", i64(&TrainOptions::warmup)},
      {"--weight-decay", "X", "AdamW decay on 2-D tensors", dbl(&TrainOptions::weight_decay)},
      {"--clip", "X", "global gradient-norm clip (0: off)", dbl(&TrainOptions::clip)},
      {"--seed", "N", "seed of the weights and the synthetic data",
       [](TrainOptions& o, const std::string& v) { o.seed = uint64_t(to_int("", v)); }},
      {"--zero", "1|2|3", "ZeRO stage: shard Adam state (1), + gradients (2), + weights (3)",
       i32(&TrainOptions::zero)},
      {"--recompute", "none|full", "recompute each block's forward during backward",
       [](TrainOptions& o, const std::string& v) {
         check(v == "none" || v == "full", "--recompute takes none or full (got '", v, "')");
         o.recompute = v == "full";
       }},
      {"--data", "SRC", "synthetic, a text file, or an llm.c .bin token shard",
       str(&TrainOptions::data)},
      {"--init-from", "FILE", "start from a Hugging Face Llama safetensors file",
       str(&TrainOptions::init_from)},
      {"--device", "cpu|cuda|guarded-cpu",
       "where each rank computes; guarded-cpu: the CPU backend with memory host code cannot "
       "touch, a test configuration",
       str(&TrainOptions::device)},
      {"--dtype", "fp32|bf16", "compute precision (bf16 needs cuda)", str(&TrainOptions::dtype)},
      {"--comm", "auto|nccl|mpi",
       "device collectives: auto = NCCL for groups whose ranks each have a GPU of their own, "
       "else MPI through host memory",
       str(&TrainOptions::comm)},
      {"--ckpt-dir", "DIR", "write sharded checkpoints here", str(&TrainOptions::ckpt_dir)},
      {"--ckpt-every", "N", "checkpoint every N steps and after the last (0: never)",
       i64(&TrainOptions::ckpt_every)},
      {"--keep", "K", "keep the newest K checkpoints [3]", i32(&TrainOptions::keep)},
      {"--resume", "auto|never|DIR",
       "auto: continue from the newest checkpoint in --ckpt-dir that verifies [auto]",
       str(&TrainOptions::resume)},
      {"--inject-failure", "R@S[:MODE]",
       "fail rank R at step S, first attempt only: kill, ckpt, hang, slow=MS",
       str(&TrainOptions::inject_failure)},
      {"--timeout", "SECONDS", "abort the job when a collective blocks this long [300]",
       dbl(&TrainOptions::timeout)},
      {"--metrics", "FILE", "append one JSON object per step", str(&TrainOptions::metrics)},
      {"--trace", "FILE", "write a Chrome trace (Perfetto) of compute, comm and waits per rank",
       str(&TrainOptions::trace)},
      {"--trace-steps", "N", "steps to trace, after the first (warm-up) step",
       i64(&TrainOptions::trace_steps)},
      {"--export", "FILE", "write the final weights, whole, as one safetensors file",
       str(&TrainOptions::export_path)},
      {"--peak-tflops", "X", "peak per device for MFU (default: table or CPU probe)",
       dbl(&TrainOptions::peak_tflops)},
  };
}

}  // namespace

std::string train_help() {
  std::ostringstream os;
  os << "usage: [mpirun -np N] tetra train [flags]\n\n"
        "Trains a Llama-style model on N ranks laid out as TP x CP x PP x DP\n"
        "(rank = tp + TP*(cp + CP*(pp + PP*dp))); the product must equal N.\n\nflags [default]:\n";
  // Defaults read off a default TrainOptions, so the help cannot drift from the code.
  const TrainOptions d;
  auto num = [](double x) {
    std::ostringstream n;
    n << x;
    return n.str();
  };
  const std::map<std::string, std::string> defaults = {
      {"--tp", num(d.tp)},
      {"--cp", num(d.cp)},
      {"--pp", num(d.pp)},
      {"--vpp", num(d.vpp)},
      {"--schedule", d.schedule},
      {"--layers", num(d.model.layers)},
      {"--dim", num(d.model.dim)},
      {"--heads", num(d.model.heads)},
      {"--kv-heads", num(d.model.kv_heads)},
      {"--ffn-dim", num(d.model.ffn_dim)},
      {"--seq-len", num(d.model.seq_len)},
      {"--rope-theta", num(d.model.rope_theta)},
      {"--global-batch", num(d.global_batch)},
      {"--vocab", num(double(d.data_vocab))},
      {"--steps", num(double(d.steps))},
      {"--lr", num(d.lr)},
      {"--warmup", num(double(d.warmup))},
      {"--weight-decay", num(d.weight_decay)},
      {"--clip", num(d.clip)},
      {"--seed", num(double(d.seed))},
      {"--zero", num(d.zero)},
      {"--trace-steps", num(double(d.trace_steps))},
      {"--data", d.data},
      {"--device", d.device},
      {"--dtype", d.dtype},
      {"--comm", d.comm},
  };
  for (const Flag& f : flags()) {
    std::string left = "  " + f.name + " " + f.arg;
    left.resize(std::max<size_t>(left.size() + 1, 28), ' ');
    auto it = defaults.find(f.name);
    os << left << f.help << (it != defaults.end() ? " [" + it->second + "]" : "") << "\n";
  }
  return os.str();
}

TrainOptions parse_train_options(const std::vector<std::string>& args) {
  TrainOptions o;
  const std::vector<Flag> table = flags();
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i], value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const Flag* flag = nullptr;
    for (const Flag& f : table)
      if (f.name == name) flag = &f;
    check(flag != nullptr, "unknown flag '", name, "' (see tetra train --help)");
    o.given.insert(name);
    if (!flag->set) {  // a switch
      check(!inline_value, name, " takes no value");
      o.sp = true;
      continue;
    }
    if (!inline_value) {
      check(i + 1 < args.size(), name, " needs a value (", flag->arg, ")");
      value = args[++i];
    }
    try {
      flag->set(o, value);
    } catch (const Error& e) {
      const std::string msg = e.what();
      fail(msg.rfind(" takes", 0) == 0 ? name + msg : msg);
    }
  }
  check(o.global_batch > 0, "--global-batch must be positive (got ", o.global_batch, ")");
  check(o.micro_batch >= 0, "--micro-batch must be positive (got ", o.micro_batch, ")");
  check(o.steps > 0, "--steps must be positive (got ", o.steps, ")");
  check(o.warmup >= 0, "--warmup must not be negative (got ", o.warmup, ")");
  check(o.lr > 0, "--lr must be positive (got ", o.lr, ")");
  check(o.weight_decay >= 0, "--weight-decay must not be negative (got ", o.weight_decay, ")");
  check(o.clip >= 0, "--clip must not be negative (got ", o.clip, ")");
  check(o.peak_tflops >= 0, "--peak-tflops must not be negative (got ", o.peak_tflops, ")");
  check(o.data_vocab > 0, "--vocab must be positive (got ", o.data_vocab, ")");
  check(o.vpp >= 1, "--vpp must be at least 1 (got ", o.vpp, ")");
  check(o.zero >= 1 && o.zero <= 3, "--zero must be 1, 2 or 3 (got ", o.zero, ")");
  check(o.schedule == "gpipe" || o.schedule == "1f1b" || o.schedule == "interleaved",
        "--schedule takes gpipe, 1f1b or interleaved (got '", o.schedule, "')");
  check(o.device == "cpu" || o.device == "cuda" || o.device == "guarded-cpu",
        "--device takes cpu, cuda or guarded-cpu (got '", o.device, "')");
  check(o.dtype == "fp32" || o.dtype == "bf16", "--dtype takes fp32 or bf16 (got '", o.dtype, "')");
  check(o.comm == "auto" || o.comm == "nccl" || o.comm == "mpi",
        "--comm takes auto, nccl or mpi (got '", o.comm, "')");
  check(o.comm != "nccl" || o.device == "cuda", "--comm nccl needs --device cuda");
  check(o.ckpt_every >= 0, "--ckpt-every must not be negative (got ", o.ckpt_every, ")");
  check(o.ckpt_every == 0 || !o.ckpt_dir.empty(), "--ckpt-every needs --ckpt-dir");
  check(!o.resume.empty(), "--resume takes auto, never or a checkpoint directory");
  check(o.keep >= 1, "--keep must be at least 1 (got ", o.keep, ")");
  check(o.trace_steps >= 1, "--trace-steps must be at least 1 (got ", o.trace_steps, ")");
  check(o.timeout >= 0, "--timeout must not be negative (got ", o.timeout, ")");
  check(!o.given.count("--min-lr") || o.min_lr >= 0, "--min-lr must not be negative (got ",
        o.min_lr, ")");
  if (o.min_lr < 0) o.min_lr = o.lr / 10;
  o.model.vocab = padded_vocab(o.data_vocab);
  return o;
}

}  // namespace tetra
