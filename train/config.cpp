#include "train/config.hpp"

#include "util/error.hpp"

namespace tetra {
namespace {

// The names older tetras recorded in a checkpoint's configuration, and where each setting is
// now: a checkpoint written before the settings had one name each still resumes, and still
// prints as a --config file. (`recompute` was a bool: its key reads true and false too.)
struct Renamed {
  const char *section, *key, *now_section, *now_key;
};
constexpr Renamed kRenamed[] = {
    {"model", "data_vocab", "model", "vocab"},
    {"output", "export_path", "output", "export"},
    {"checkpoint", "timeout", "run", "timeout"},
};

}  // namespace

void to_json(json& v, const TrainConfig& c) {
  v = json::object();
  for_each_section(c, [&](const auto& section, const auto& table) {
    v[table.name] = settings::to_json(table, section);
  });
}

void from_json(const json& v, TrainConfig& c) {
  json now = v;
  for (const Renamed& r : kRenamed) {
    if (!now.contains(r.section) || !now[r.section].contains(r.key)) continue;
    now[r.now_section][r.now_key] = now[r.section][r.key];
    now[r.section].erase(r.key);
  }
  for_each_section(c, [&](auto& section, const auto& table) {
    if (now.contains(table.name)) settings::from_json(table, now.at(table.name), section);
  });
}

void resolve(TrainConfig& c) {
  if (c.layout.vpp > 1 && !c.was_given("layout.schedule")) c.layout.schedule = "interleaved";
  if (c.optimizer.min_lr < 0) c.optimizer.min_lr = c.optimizer.lr / 10;
  c.model.vocab_rows = padded_vocab(c.model.vocab);

  const DataConfig& d = c.data;
  check(c.device.comm != "nccl" || c.device.device == "cuda", "--comm nccl needs --device cuda");
  check(c.checkpoint.ckpt_every == 0 || !c.checkpoint.ckpt_dir.empty(),
        "--ckpt-every needs --ckpt-dir");
  check(d.val_data.empty() || d.val_split == 0, "--val-data and --val-split exclude each other");
  check(!c.was_given("data.eval_every") || !d.val_data.empty() || d.val_split > 0,
        "--eval-every needs --val-data or --val-split");
  check(d.tokenizer.empty() || !c.was_given("model.vocab"),
        "--vocab and --tokenizer exclude each other: the tokenizer's pieces are the vocabulary");
  check(c.optimizer.min_lr <= c.optimizer.lr, "--min-lr ", c.optimizer.min_lr, " is above --lr ",
        c.optimizer.lr, ": the schedule would climb after the warmup");
}

}  // namespace tetra
