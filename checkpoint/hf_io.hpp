// Hugging Face Llama weights in and out. A run's init_from reads a model (one safetensors file
// or a model directory, see hf_model.hpp; F32, BF16 or F16); its export writes the final
// weights, whole, as F32 or BF16 (export_dtype): a model directory that transformers'
// from_pretrained loads as it is (config.json, model.safetensors, the tokenizer's files), or
// one .safetensors file.
//
// The vocabulary: files hold the real tokens' rows; the model pads them to padded_vocab rows
// with zeros on the way in and drops the padding on the way out.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/hf_model.hpp"
#include "data/tokenizer.hpp"
#include "model/config.hpp"

namespace tetra {

// The model shape a model implies. A directory's config.json gives it (and the tensors must
// agree); for a single file, layers, dim, ffn_dim, vocab and the kv width come from the
// tensor shapes, heads (and so head_dim) from the file's metadata when tetra wrote it, else
// from `asked` (the run's model settings). A shape setting the run was given (its key in
// `given`, "model.heads", as TrainConfig::given holds them) that disagrees is an error.
ModelConfig config_from_model(const HfModel& model, const ModelConfig& asked,
                              const std::set<std::string>& given);

// The TP-local values of one unit (as make_units lays it out for tp_rank), read from the
// model, vocabulary rows past cfg.vocab zero. Throws tetra::Error naming the model
// and tensor for a missing tensor, a wrong shape or an unsupported dtype.
std::vector<float> read_unit(const HfModel& model, const ModelConfig& cfg, const UnitSpec& unit,
                             int tp_rank);

// A model and its tokenizer must have as many tokens as pieces: a prompt's ids, the ones drawn
// or the data's would otherwise fall outside one of them, and an export would carry a
// tokenizer tetra generate refuses. Throws tetra::Error naming the model and both counts.
void check_tokenizer_matches(const std::string& model_path, const ModelConfig& cfg,
                             const data::Tokenizer& tok);

// An export PATH is one file when PATH ends in ".safetensors", else a model directory.
bool export_is_file(const std::string& path);
// "" when an export to PATH may be written, else what is wrong: for a file as
// output_file_problem says; a directory must be missing (in a writable directory), empty, or
// one tetra exported before (its config.json says so), never another's.
std::string export_problem(const std::string& path);

// Writes whole tensors (as gather_full returns them: the fp32 master weights, vocabulary
// padded) with the real vocabulary's rows, as F32 or, with bf16, rounded to BF16. A directory
// also gets config.json and the tokenizer's files (Tokenizer::export_files: a SentencePiece
// model's tokenizer.model, or tokenizer.json; none for bytes), each with tokenizer_config.json.
void write_export(const std::string& path, const std::map<std::string, std::vector<float>>& full,
                  const ModelConfig& cfg, const data::Tokenizer& tok, bool bf16 = false);

// config.json for cfg as transformers' LlamaConfig reads it; torch_dtype says what the
// file holds, bos_token_id and eos_token_id the tokenizer's (for a tokenizer file).
json hf_config_json(const ModelConfig& cfg, const data::Tokenizer& tok, bool bf16 = false);

}  // namespace tetra
