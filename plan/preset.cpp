#include "plan/preset.hpp"

#include <cmath>

#include "util/error.hpp"

namespace tetra::plan {
namespace {

// The Llama 3 shapes (the model cards' config: GQA with 8 KV heads, RoPE base 500,000, a
// vocabulary of 128,256), trained as Llama 3 405B was: bf16 with FSDP (ZeRO-3), TP 8 inside a
// node of 8 H100s, 2,048 sequences of 8,192 tokens (16.8M tokens) per step.
Preset llama3(int layers, int dim, int heads, int ffn, double card, double tokens) {
  Preset p;
  ModelConfig& m = p.model;
  m.layers = layers;
  m.dim = dim;
  m.heads = heads;
  m.kv_heads = 8;
  m.ffn_dim = ffn;
  m.seq_len = 8192;
  m.rope_theta = 500000;
  m.vocab = 128256;
  p.card_params = card;
  p.layout.tp = 8;
  p.batch.global_batch = 2048;
  p.batch.micro_batch = 1;
  p.optimizer.zero = 3;
  p.device.dtype = "bf16";
  p.tokens = tokens;
  // Every token once: the steps the tokens take at this batch (Llama 3 ramped its batch up
  // from 4M tokens; tetra's is one size throughout).
  p.optimizer.steps = int64_t(std::ceil(tokens / (2048.0 * 8192)));
  return p;
}

}  // namespace

Preset preset_named(const std::string& name) {
  Preset p;
  if (name == "llama3-405b") {
    p = llama3(126, 16384, 128, 53248, 405e9, 15.6e12);
    p.about =
        "Llama 3 405B as the paper trained it: TP 8 x PP 16 x DP 128 on 16,384 H100s, "
        "400 TFLOP/s and 41% MFU per GPU, 15.6T tokens; lr 8e-5 to 8e-7 after 8,000 warmup "
        "steps; GPipe's schedule (the paper's interleaved V and m are not published), with "
        "`optimizer.recompute` full so that its 16 micro-batches in flight fit in 80 GB "
        "(tetra's choice); the first and the last stage hold a layer fewer "
        "(`layout.pp_balance` ends), as the paper's";
    p.layout.pp = 16;
    p.layout.dp = 128;
    p.layout.schedule = "gpipe";
    p.layout.pp_balance = "ends";  // stages 0 and 15 hold 7 layers and the embedding or head
    p.optimizer.recompute = true;
    p.optimizer.lr = 8e-5;
    p.optimizer.min_lr = 8e-7;
    p.optimizer.warmup = 8000;
    p.achieved_tflops = 400;
    p.mfu = 41;
  } else if (name == "llama3-70b") {
    p = llama3(80, 8192, 64, 28672, 70e9, 15e12);
    p.about =
        "Llama 3 70B's shape and 15T tokens; the layout is tetra's choice (Meta published "
        "none): Llama 3's TP 8 and batch, the fewest pipeline stages that fit an 80 GB H100, "
        "TP 8 x PP 4 x DP 64 on 2,048 GPUs";
    p.layout.pp = 4;
    p.layout.dp = 64;
  } else if (name == "llama3-8b") {
    p = llama3(32, 4096, 32, 14336, 8e9, 15e12);
    p.about =
        "Llama 3 8B's shape and 15T tokens; the layout is tetra's choice (Meta published "
        "none): Llama 3's TP 8 and batch, TP 8 x DP 128 on 1,024 GPUs";
    p.layout.dp = 128;
  } else if (name == "demo") {
    p.about = "tools/demo.sh: tetra train's defaults on TP 2 x CP 2 x PP 2 x DP 2 (16 CPU ranks)";
    p.layout = {.tp = 2, .cp = 2, .pp = 2, .dp = 2};
    p.gpu = "cpu";
  } else if (name == "bench") {
    p.about = "tools/bench/layouts.py's model: dim 512, 8 layers, 256 tokens, 8 sequences a step";
    ModelConfig& m = p.model;
    m.layers = 8;
    m.dim = 512;
    m.heads = 8;
    m.kv_heads = 4;
    m.ffn_dim = 1536;
    m.seq_len = 256;
    p.optimizer.steps = 6;
    p.gpu = "cpu";
  } else {
    fail("`run.preset` takes llama3-8b, llama3-70b, llama3-405b, demo or bench (got '", name, "')");
  }
  p.model.vocab_rows = padded_vocab(p.model.vocab);
  return p;
}

}  // namespace tetra::plan
