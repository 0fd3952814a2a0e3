#include "cli/preset.hpp"

namespace tetra::cli {

void apply_preset(TrainConfig& c, plan::Request* request) {
  const plan::Preset p = plan::preset_named(c.preset);
  const auto set = [&](const char* flag, auto& field, const auto& value) {
    if (!c.was_given(flag)) field = value;
  };
  set("--tp", c.layout.tp, p.layout.tp);
  set("--cp", c.layout.cp, p.layout.cp);
  set("--pp", c.layout.pp, p.layout.pp);
  set("--dp", c.layout.dp, p.layout.dp);
  set("--sp", c.layout.sp, p.layout.sp);
  set("--vpp", c.layout.vpp, p.layout.vpp);
  set("--schedule", c.layout.schedule, p.layout.schedule);

  set("--layers", c.model.layers, p.model.layers);
  set("--dim", c.model.dim, p.model.dim);
  set("--heads", c.model.heads, p.model.heads);
  set("--kv-heads", c.model.kv_heads, p.model.kv_heads);
  set("--ffn-dim", c.model.ffn_dim, p.model.ffn_dim);
  set("--seq-len", c.model.seq_len, p.model.seq_len);
  set("--rope-theta", c.model.rope_theta, p.model.rope_theta);
  set("--vocab", c.model.data_vocab, p.data_vocab);

  set("--global-batch", c.batch.global_batch, p.batch.global_batch);
  set("--micro-batch", c.batch.micro_batch, p.batch.micro_batch);

  set("--steps", c.optimizer.steps, p.optimizer.steps);
  set("--lr", c.optimizer.lr, p.optimizer.lr);
  set("--min-lr", c.optimizer.min_lr, p.optimizer.min_lr);
  set("--warmup", c.optimizer.warmup, p.optimizer.warmup);
  set("--weight-decay", c.optimizer.weight_decay, p.optimizer.weight_decay);
  set("--clip", c.optimizer.clip, p.optimizer.clip);
  set("--zero", c.optimizer.zero, p.optimizer.zero);
  set("--recompute", c.optimizer.recompute, p.optimizer.recompute);

  set("--dtype", c.device.dtype, p.device.dtype);

  if (!request) return;
  request->preset = c.preset;
  set("--gpu", request->gpu, p.gpu);
  set("--tokens", request->tokens, p.tokens);
  set("--achieved-tflops", request->achieved_tflops, p.achieved_tflops);
  set("--mfu", request->mfu, p.mfu);
}

}  // namespace tetra::cli
