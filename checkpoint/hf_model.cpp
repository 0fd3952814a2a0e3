#include "checkpoint/hf_model.hpp"

#include <algorithm>
#include <filesystem>

#include "util/error.hpp"
#include "util/input_file.hpp"

namespace tetra {
namespace fs = std::filesystem;
namespace {

json read_json(const fs::path& file, const std::string& what) {
  std::string text;
  const std::string unread = read_input_file(file.string(), text);
  check(unread.empty(), what, ": cannot read '", file.string(), "': ", unread);
  json v;
  const std::string problem = parse_json(text, v);
  check(problem.empty(), what, ": '", file.string(), "': ", problem);
  check(v.is_object(), what, ": '", file.string(), "' is not a JSON object");
  return v;
}

}  // namespace

HfModel::HfModel(const std::string& path) : path_(path) {
  const std::string what = "init model '" + path + "'";
  std::error_code ec;
  check(fs::exists(path, ec), what, ": not found");
  is_dir_ = fs::is_directory(path, ec);
  if (!is_dir_) {
    open({path});
    return;
  }
  const fs::path dir(path), index = dir / "model.safetensors.index.json";
  check(fs::exists(dir / "config.json"), what,
        ": a model directory needs config.json (as transformers' save_pretrained writes it)");
  config_ = read_json(dir / "config.json", what);
  if (fs::exists(dir / "model.safetensors")) {
    open({(dir / "model.safetensors").string()});
    return;
  }

  // Sharded: the index maps each tensor to the file that holds it.
  check(fs::exists(index), what, ": has neither model.safetensors nor ",
        "model.safetensors.index.json");
  const json idx = read_json(index, what);
  check(idx.contains("weight_map") && idx["weight_map"].is_object(), what, ": '", index.string(),
        "' has no \"weight_map\" object");
  std::map<std::string, std::string> expect;  // tensor -> the shard the index names
  std::vector<std::string> shards;            // in order of first mention
  for (const auto& [name, file] : idx["weight_map"].items()) {
    const bool plain = file.is_string() && fs::path(file.get<std::string>()).filename().string() ==
                                               file.get<std::string>();
    check(plain, what, ": the index maps '", name, "' to ", file.dump(), ", not a file name");
    expect[name] = file.get<std::string>();
    const std::string shard = (dir / expect[name]).string();
    if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
  }
  check(!shards.empty(), what, ": the index names no tensors");
  open(shards);
  for (const auto& [name, file] : expect)
    check(where_.count(name) && fs::path(files_[where_[name]].path()).filename() == file, what,
          ": the index puts '", name, "' in ", file, ", which does not hold it");
}

void HfModel::open(const std::vector<std::string>& files) {
  for (const std::string& f : files) files_.emplace_back(f);
  for (int i = 0; i < int(files_.size()); ++i)
    for (const std::string& name : files_[i].names()) {
      check(!where_.count(name), "init model '", path_, "': tensor '", name, "' is in two shards");
      where_[name] = i;
    }
}

const st::TensorInfo& HfModel::info(const std::string& name) const {
  const auto it = where_.find(name);
  check(it != where_.end(), "init model '", path_, "': missing tensor '", name, "'");
  return files_[it->second].info(name);
}

std::vector<float> HfModel::read(const std::string& name) const {
  info(name);
  return files_[where_.at(name)].read(name);
}

std::vector<std::string> HfModel::names() const {
  std::vector<std::string> out;
  for (const auto& [name, file] : where_) out.push_back(name);
  return out;
}

}  // namespace tetra
