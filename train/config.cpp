#include "train/config.hpp"

#include "util/error.hpp"

namespace tetra {

void resolve(TrainConfig& c) {
  const auto given = [&](const char* flag) { return c.was_given(flag); };
  if (c.layout.vpp > 1 && !given("--schedule")) c.layout.schedule = "interleaved";
  if (c.optimizer.min_lr < 0) c.optimizer.min_lr = c.optimizer.lr / 10;
  c.model.vocab = padded_vocab(c.model.data_vocab);

  const DataConfig& d = c.data;
  check(c.device.comm != "nccl" || c.device.device == "cuda", "--comm nccl needs --device cuda");
  check(c.checkpoint.ckpt_every == 0 || !c.checkpoint.ckpt_dir.empty(),
        "--ckpt-every needs --ckpt-dir");
  check(!given("--val-split") || (d.val_split > 0 && d.val_split < 1),
        "--val-split must be between 0 and 1, exclusive (got ", d.val_split, ")");
  check(d.val_data.empty() || d.val_split == 0, "--val-data and --val-split exclude each other");
  check(!given("--eval-every") || !d.val_data.empty() || d.val_split > 0,
        "--eval-every needs --val-data or --val-split");
  check(d.tokenizer.empty() || !given("--vocab"),
        "--vocab and --tokenizer exclude each other: the tokenizer's pieces are the vocabulary");
  check(c.optimizer.min_lr <= c.optimizer.lr, "--min-lr ", c.optimizer.min_lr, " is above --lr ",
        c.optimizer.lr, ": the schedule would climb after the warmup");
}

}  // namespace tetra
