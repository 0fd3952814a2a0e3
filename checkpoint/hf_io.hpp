// Hugging Face Llama weights in and out: --init-from reads one safetensors file (F32, BF16
// or F16) and --export writes the final weights, whole, as F32 or BF16 in one file.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"
#include "model/config.hpp"

namespace tetra {

// The model shape a file implies. Layers, dim, ffn-dim, vocab and the kv width come from
// the tensor shapes; heads (and so head_dim) from the file's metadata when tetra wrote it,
// else from `flags`. A flag in `given` that disagrees with the file is an error.
ModelConfig config_from_file(const st::Reader& file, const ModelConfig& flags,
                             const std::set<std::string>& given);

// The TP-local values of one unit (as make_units lays it out for tp_rank), read from the
// file. Throws tetra::Error naming the file and tensor for a missing tensor, a wrong
// shape or an unsupported dtype.
std::vector<float> read_unit(const st::Reader& file, const UnitLayout& unit, int tp_rank);

// Writes whole tensors (as gather_full returns them: the fp32 master weights) with the model
// shape in the metadata, as F32 or, with bf16, rounded to BF16.
void write_export(const std::string& path, const std::map<std::string, std::vector<float>>& full,
                  const ModelConfig& cfg, bool bf16 = false);

}  // namespace tetra
