#include "train/config.hpp"

#include "data/documents.hpp"
#include "util/error.hpp"

namespace tetra {
namespace {

// The keys older tetras recorded in a checkpoint's configuration or read from a --config file,
// and where each setting is now: a checkpoint or a file written before the settings had one
// name each still resumes, reads, and prints as a --config file. (`recompute` was a bool: its
// key reads true and false too.)
struct Renamed {
  const char *was, *now;
};
constexpr Renamed kRenamed[] = {
    {"model.data_vocab", "model.vocab"},
    {"output.export_path", "output.export"},
    {"checkpoint.timeout", "run.timeout"},
    {"data.init_from", "model.init_from"},
};

}  // namespace

std::string current_key(const std::string& key) {
  for (const Renamed& r : kRenamed)
    if (key == r.was) return r.now;
  return key;
}

void to_json(json& v, const TrainConfig& c) {
  v = json::object();
  for_each_section(c, [&](const auto& section, const auto& table) {
    v[table.name] = settings::to_json(table, section);
  });
}

void from_json(const json& v, TrainConfig& c) {
  if (!v.is_object()) return;
  // An old key's value replaces what its new key holds: an old record's model "vocab" was
  // the padded rows, its "data_vocab" the tokens.
  json now = v;
  for (const auto& [section, values] : v.items()) {
    if (!values.is_object()) continue;
    for (const auto& [name, value] : values.items()) {
      const std::string key = current_key(section + "." + name);
      if (key == section + "." + name) continue;
      const size_t dot = key.find('.');
      now[key.substr(0, dot)][key.substr(dot + 1)] = value;
      now[section].erase(name);
    }
  }
  for_each_section(c, [&](auto& section, const auto& table) {
    if (now.contains(table.name)) settings::from_json(table, now.at(table.name), section);
  });
}

void resolve(TrainConfig& c) {
  // zb-v places two chunks on each rank: V = 2 unless another V was asked for (and refused);
  // any other V above 1 without a schedule given is the interleaved schedule's.
  if (c.layout.schedule == "zb-v" && !c.was_given("layout.vpp")) c.layout.vpp = 2;
  if (c.layout.vpp > 1 && !c.was_given("layout.schedule") && c.layout.schedule != "zb-v")
    c.layout.schedule = "interleaved";
  if (c.optimizer.min_lr < 0) c.optimizer.min_lr = c.optimizer.lr / 10;
  c.model.vocab_rows = padded_vocab(c.model.vocab);

  const DataConfig& d = c.data;
  check(c.device.comm != "nccl" || c.device.device == "cuda",
        "`device.comm` nccl needs `device.device` cuda");
  check(c.checkpoint.ckpt_every == 0 || !c.checkpoint.ckpt_dir.empty(),
        "`checkpoint.ckpt_every` needs `checkpoint.ckpt_dir`");
  check(!c.checkpoint.ckpt_async || !c.checkpoint.ckpt_dir.empty(),
        "`checkpoint.ckpt_async` needs `checkpoint.ckpt_dir`");
  check(d.val_data.empty() || d.val_split == 0,
        "`data.val_data` and `data.val_split` exclude each other");
  // Settings of something the run does not do would change nothing: given, they are refused.
  const bool validation = !d.val_data.empty() || d.val_split > 0;
  check(!c.was_given("data.eval_every") || validation,
        "`data.eval_every` needs `data.val_data` or `data.val_split`");
  check(!c.was_given("data.eval_batches") || validation,
        "`data.eval_batches` needs `data.val_data` or `data.val_split`");
  check(!c.was_given("checkpoint.keep") || !c.checkpoint.ckpt_dir.empty(),
        "`checkpoint.keep` needs `checkpoint.ckpt_dir`");
  check(!c.was_given("output.trace_steps") || !c.output.trace.empty(),
        "`output.trace_steps` needs `output.trace`");
  check(!c.was_given("output.export_dtype") || !c.output.export_.empty(),
        "`output.export_dtype` needs `output.export`");
  // A pipeline of one stage has no schedule, virtual stages or chunks to balance; a TP group of
  // one rank no tokens to split. (A preset's values are not given: `--preset llama3-405b --pp 1`
  // trains without its pipeline.)
  for (const char* key : {"layout.schedule", "layout.vpp", "layout.pp_balance", "layout.sp"})
    check(!c.was_given(key) || layout_key_applies(key, c.layout), "`", key, "` needs ",
          key == std::string("layout.sp") ? "`layout.tp` above 1: one tensor-parallel rank has "
                                            "no tokens to split"
                                          : "`layout.pp` above 1: one pipeline stage has no "
                                            "schedule, virtual stages or chunks");
  // auto stays allowed without a directory: tetra launch reruns any command with it.
  const CheckpointConfig& k = c.checkpoint;
  check(k.resume != "never" || !c.was_given("checkpoint.resume") || !k.ckpt_dir.empty(),
        "`checkpoint.resume` never needs `checkpoint.ckpt_dir`: without one every run starts "
        "over");
  check(!c.was_given("checkpoint.allow_change") || !k.ckpt_dir.empty() ||
            (k.resume != "auto" && k.resume != "never"),
        "`checkpoint.allow_change` needs a checkpoint to resume: `checkpoint.ckpt_dir`, or "
        "`checkpoint.resume` DIR");
  // Llama 3's scaling of RoPE's low frequencies (an --init-from model's config.json may
  // choose it, which the model's load checks the given settings against).
  // Each key in its backquotes, as a message names it.
  for (const std::string quoted :
       {"`model.rope_factor`", "`model.rope_low_freq_factor`", "`model.rope_high_freq_factor`",
        "`model.rope_original_context`"})
    check(!c.was_given(quoted.substr(1, quoted.size() - 2)) || c.model.rope_type == "llama3" ||
              !c.model.init_from.empty(),
          quoted, " needs `model.rope_type` llama3: the default RoPE scales no frequency");
  const bool documents =
      data::is_documents(d.data) || (!d.val_data.empty() && data::is_documents(d.val_data));
  check(!c.was_given("data.data_field") || documents,
        "`data.data_field` needs JSONL documents in `data.data` or `data.val_data`");
  check(!c.was_given("data.skip_bad_lines") || documents,
        "`data.skip_bad_lines` needs JSONL documents in `data.data` or `data.val_data`");
  check(d.tokenizer.empty() || !c.was_given("model.vocab"),
        "`model.vocab` and `data.tokenizer` exclude each other: the tokenizer's pieces are the "
        "vocabulary");
  check(c.optimizer.min_lr <= c.optimizer.lr, "`optimizer.min_lr` ", c.optimizer.min_lr,
        " is above `optimizer.lr` ", c.optimizer.lr, ": the schedule would climb after the warmup");
}

}  // namespace tetra
