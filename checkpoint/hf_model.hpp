// A Hugging Face Llama model on disk, for --init-from and tetra generate: one safetensors
// file, or a model directory as transformers writes it (config.json with model.safetensors,
// or with model.safetensors.index.json naming the shards that hold each tensor).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"
#include "util/json.hpp"

namespace tetra {

class HfModel {
 public:
  // Opens the file or the directory and reads every header. Throws tetra::Error naming the
  // path for a missing file, a malformed config.json or index, a shard the index names that
  // is missing, or a tensor named twice.
  explicit HfModel(const std::string& path);

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return where_.count(name) > 0; }
  const st::TensorInfo& info(const std::string& name) const;  // throws if missing
  std::vector<float> read(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  // The metadata of the (first) safetensors file: tetra's exports record the head count.
  const std::map<std::string, std::string>& metadata() const { return files_[0].metadata(); }
  // config.json of a directory; null for a single file.
  const json& config() const { return config_; }

 private:
  // Reads the headers of the safetensors files and indexes their tensors.
  void open(const std::vector<std::string>& files);

  std::string path_;
  bool is_dir_ = false;
  json config_;
  std::vector<st::Reader> files_;
  std::map<std::string, int> where_;  // tensor name -> index into files_
};

}  // namespace tetra
