#include "train/outputs.hpp"

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/hf_io.hpp"
#include "checkpoint/lock.hpp"
#include "checkpoint/manifest.hpp"
#include "data/documents.hpp"
#include "util/output_dir.hpp"
#include "util/output_file.hpp"
#include "util/same_path.hpp"

namespace tetra {
namespace {

namespace fs = std::filesystem;

// A path the run reads or writes, as the user named it: "`data.data` 'corpus.txt'" (the
// printer words the key as the user gave it: --data).
struct Named {
  std::string what, path;
  bool directory = false;  // what lies inside it is its too
  PathId id;
  std::string words() const { return what + " '" + path + "'"; }
};

Named named(const std::string& what, const std::string& path, bool directory) {
  return {what, path, directory, path_id(path)};
}

// The files and directories the run's settings name as inputs.
std::vector<Named> inputs_of(const TrainConfig& c) {
  std::vector<Named> in;
  const auto source = [&](const char* flag, const std::string& spec) {
    if (spec.empty() || spec == "synthetic") return;
    std::error_code ec;
    in.push_back(named(flag, spec, fs::is_directory(spec, ec)));
    try {  // a directory's or a glob's files; one that names none is refused later, as input
      for (const std::string& f : data::source_files(spec))
        in.push_back(named(std::string(flag) + " file", f, false));
    } catch (const Error&) {
    }
  };
  source("`data.data`", c.data.data);
  source("`data.val_data`", c.data.val_data);
  if (!c.data.tokenizer.empty() && c.data.tokenizer.rfind("bpe:", 0) != 0)
    in.push_back(named("`data.tokenizer`", c.data.tokenizer, false));
  if (const std::string& init = c.model.init_from; !init.empty()) {
    // A model directory: itself and its files (beside which a run may keep its own).
    in.push_back(named("`model.init_from`", init, false));
    std::error_code ec;
    if (fs::is_directory(init, ec))
      for (const auto& e : fs::directory_iterator(init, ec))
        if (e.is_regular_file(ec))
          in.push_back(named("`model.init_from`'s", e.path().string(), false));
  }
  if (!c.origin.file.empty()) in.push_back(named("--config", c.origin.file, false));
  const CheckpointConfig& k = c.checkpoint;
  if (k.resume != "auto" && k.resume != "never")
    in.push_back(named("`checkpoint.resume`", k.resume, true));
  if (!k.ckpt_dir.empty()) {
    const fs::path dir(k.ckpt_dir);
    in.push_back(named("`checkpoint.ckpt_dir`'s lock", (dir / ckpt::kLockFile).string(), false));
    in.push_back(
        named("`checkpoint.ckpt_dir`'s latest", (dir / ckpt::kLatestFile).string(), false));
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (ckpt::parse_step_dir_name(e.path().filename().string()))
        in.push_back(named("the checkpoint", e.path().string(), true));
  }
  return in;
}

// The one line of a clash: "`output.metrics` 'x' is `data.data` 'x'".
std::string clash(const Named& out, const Named& other) {
  if (same_path(out.id, other.id))
    return out.words() + " is " + other.words() + ": name another path for " + out.what;
  return out.words() + " lies inside " + other.words() + ": name a path outside it for " + out.what;
}

}  // namespace

void check_train_outputs(const TrainConfig& c) {
  const OutputConfig& o = c.output;
  std::vector<Named> outs;
  if (!o.export_.empty()) {
    const std::string problem = export_problem(o.export_);
    const bool file = export_is_file(o.export_);
    check(problem.empty(), "cannot write `output.export` ", file ? "file" : "directory", " '",
          o.export_, "': ", problem);
    outs.push_back(named("`output.export`", o.export_, !file));
  }
  for (const auto& [flag, path] :
       {std::pair{"`output.trace`", &o.trace}, {"`output.metrics`", &o.metrics}}) {
    if (path->empty()) continue;
    std::string problem = output_file_problem(*path);
    // A temporary made and removed beside it, as the write will (a read-only file system).
    if (problem.empty()) problem = creation_problem(*path);
    check(problem.empty(), "cannot write ", flag, " file '", *path, "': ", problem);
    outs.push_back(named(flag, *path, false));
  }
  if (!o.tensorboard.empty()) {
    const std::string problem = dir_output_problem(o.tensorboard);
    check(problem.empty(), "cannot write `output.tensorboard` '", o.tensorboard, "': ", problem);
    // Its event files have names of their own: other outputs may share the directory.
    outs.push_back(named("`output.tensorboard`", o.tensorboard, false));
  }
  if (const std::string& dir = c.checkpoint.ckpt_dir; !dir.empty()) {
    const std::string problem = dir_output_problem(dir);
    check(problem.empty(), "cannot use `checkpoint.ckpt_dir` '", dir,
          "' as the checkpoint directory: ", problem);
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    for (size_t j = 0; j < outs.size(); ++j)
      if (i != j && (same_path(outs[i].id, outs[j].id) ||
                     (outs[j].directory && within(outs[i].id, outs[j].id))))
        fail(clash(outs[i], outs[j]));
  }
  for (const Named& in : inputs_of(c))
    for (const Named& out : outs)
      if (same_path(out.id, in.id) || (in.directory && within(out.id, in.id))) fail(clash(out, in));
}

}  // namespace tetra
