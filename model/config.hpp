// The model: its shape, the weights it may start from, and the list of its parameter tensors
// with their Hugging Face names.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/rope.hpp"
#include "util/settings.hpp"

namespace tetra {

// What a model's shape may ask for, so that every count it sizes fits 64 bits with room to
// spare (bytes of Adam state, sums over ranks) and what it sizes is checked before it is
// allocated: tokens per sequence (positions are int32; 2^24 keeps a rank's position lists
// under 64 MB), blocks, vocabulary rows, parameters (2^50 is over 2,000 times Llama 3 405B).
inline constexpr int kMaxSeqLen = 1 << 24;
inline constexpr int kMaxLayers = 1 << 16;
inline constexpr int64_t kMaxVocab = 1 << 24;
inline constexpr int64_t kMaxParams = int64_t(1) << 50;

struct ModelConfig {
  int64_t vocab = 256;     // the tokens: the softmax's width
  int64_t vocab_rows = 0;  // rows of the embedding and the LM head: vocab padded (0: vocab)
  int layers = 4;
  int dim = 128;
  int heads = 4;
  int kv_heads = 2;
  int ffn_dim = 384;
  int seq_len = 64;
  double rope_theta = 10000.0;
  // RoPE's frequencies (backend/rope.hpp): "default", or "llama3" with Llama 3's scaling of
  // the low frequencies (config.json's rope_scaling: factor, low_freq_factor,
  // high_freq_factor, original_max_position_embeddings).
  std::string rope_type = "default";
  double rope_factor = 8, rope_low_freq_factor = 1, rope_high_freq_factor = 4;
  int rope_original_context = 8192;
  // One matrix for the token embedding and the LM head (config.json's tie_word_embeddings):
  // the embedding unit's, which the head reads (make_units).
  bool tie_embeddings = false;
  // Attention within documents only, as Llama 3 trained: a token sees the earlier tokens of
  // its own document in its sequence (JSONL data, whose end-of-text tokens end documents).
  bool doc_mask = false;
  float norm_eps = 1e-5f;
  // The weights to start from: a Hugging Face Llama model (a directory or one safetensors
  // file, checkpoint/hf_io.hpp), whose shape replaces the one above; "": random.
  std::string init_from;

  int head_dim() const { return dim / heads; }
  Rope rope() const;
  // The embedding's and the LM head's rows; those from `vocab` on are padding, never looked
  // up and masked out of the softmax.
  int64_t rows() const { return vocab_rows > 0 ? vocab_rows : vocab; }
  // Throws tetra::Error naming the first rule the shape breaks, the limits above included.
  void validate() const;
  std::string str() const;

  // Parameters that take part in matrix products (attention, MLP, LM head): the N of 6N.
  // Exact for a shape that validate() accepts (it checks the count in 64 bits).
  int64_t matmul_params() const;
  // Every parameter once: a tied embedding is the LM head's matrix, counted once.
  int64_t total_params() const;
};
// The settings of the model: its shape and its starting weights. The padding (vocab_rows) is
// derived and norm_eps is the init model's, so neither is a setting. A resumed run checks the
// trained model's shape as a whole (checkpoint/resume.hpp), not these settings: under
// --init-from the shape is the file's. Each run of a sweep starts from random weights.
inline const settings::Table<ModelConfig> kModelKeys{
    "model",
    "Model",
    {.resume = settings::Resume::Free},
    {settings::key(&ModelConfig::layers, "layers", "L", "transformer blocks",
                   settings::positive_up_to(kMaxLayers, "blocks")),
     settings::key(&ModelConfig::dim, "dim", "D", "model width", settings::positive()),
     settings::key(&ModelConfig::heads, "heads", "H", "attention heads", settings::positive()),
     settings::key(&ModelConfig::kv_heads, "kv_heads", "K",
                   "key/value heads (grouped-query attention)", settings::positive()),
     settings::key(&ModelConfig::ffn_dim, "ffn_dim", "F", "SwiGLU hidden width",
                   settings::positive()),
     settings::key(&ModelConfig::seq_len, "seq_len", "S", "tokens per sequence",
                   settings::positive_up_to(kMaxSeqLen, "tokens per sequence")),
     settings::key(&ModelConfig::rope_theta, "rope_theta", "X", "RoPE base", settings::positive()),
     settings::choice(&ModelConfig::rope_type, "rope_type", {"default", "llama3"},
                      "RoPE's frequencies: theta^(-2i/hd), or Llama 3's scaling of the low ones "
                      "(rope_factor and the three keys after it)"),
     settings::key(&ModelConfig::rope_factor, "rope_factor", "X",
                   "llama3 RoPE: low frequencies are divided by X", settings::positive()),
     settings::key(&ModelConfig::rope_low_freq_factor, "rope_low_freq_factor", "X",
                   "llama3 RoPE: wavelengths past original context / X are low",
                   settings::positive()),
     settings::key(&ModelConfig::rope_high_freq_factor, "rope_high_freq_factor", "X",
                   "llama3 RoPE: wavelengths below original context / X are kept",
                   settings::positive()),
     settings::key(&ModelConfig::rope_original_context, "rope_original_context", "N",
                   "llama3 RoPE: the context the model was first trained on", settings::positive()),
     settings::key(&ModelConfig::tie_embeddings, "tie_embeddings", "",
                   "one matrix for the token embedding and the LM head (tie_word_embeddings)"),
     settings::key(&ModelConfig::doc_mask, "doc_mask", "",
                   "attention within documents only: a token sees the earlier tokens of its own "
                   "document (JSONL data; the end-of-text token ends a document)"),
     settings::key(&ModelConfig::vocab, "vocab", "V",
                   "token vocabulary of the data (the model pads it to a multiple of 128; the "
                   "padding takes no part in the softmax)",
                   settings::positive_up_to(kMaxVocab, "tokens")),
     settings::key(&ModelConfig::init_from, "init_from", "PATH",
                   "start from a Hugging Face Llama model: a directory (config.json, "
                   "model.safetensors or a sharded index) or one safetensors file")
         .sweep(false)}};

// Model FLOPs per token, 6N + 12 L d S (PaLM's attention term), and the forward FLOPs of
// the blocks that --recompute full runs a second time (2 N_blocks + 4 L d S).
double model_flops_per_token(const ModelConfig& c);
double recompute_flops_per_token(const ModelConfig& c);

// Pads a data vocabulary to a multiple of 128 (256 stays 256), so that the embedding and
// the head split evenly over any power-of-two TP up to 128 without changing with the layout.
// A vocabulary past kMaxVocab is returned as it is (validate() refuses it).
int64_t padded_vocab(int64_t vocab);

// One parameter tensor. Matrices are [out, in]; tp_dim is the dimension split over the
// tensor-parallel group (0: rows, the output of a column-parallel linear or the vocabulary;
// 1: columns, the input of a row-parallel linear), -1 when every TP rank holds all of it.
struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;  // global shape
  int tp_dim = -1;
  std::vector<int64_t> local_shape;                 // this TP rank's shard
  int64_t offset = 0;                               // in its unit's flat buffer
  int64_t numel() const;                            // local
  bool decay() const { return shape.size() == 2; }  // weight decay on 2-D tensors only
  // Global flat index (into the full [shape] tensor) of local element i on TP rank r.
  int64_t global_index(int64_t i, int tp_rank) const;
};

// A unit is the set of parameters that live in one flat buffer, are sharded together by
// ZeRO and gathered together by ZeRO-3: the embedding, one block, or the final norm + head
// (the final norm alone under tie_embeddings: the head then reads the embedding's matrix).
struct UnitSpec {
  enum class Kind { Embedding, Block, Head };
  Kind kind;
  int layer = -1;  // for blocks
  std::string name;
  std::vector<ParamInfo> params;
  int64_t numel = 0;  // local elements
};

// Index of each tensor inside a block unit, in forward order.
enum BlockParam { kInputNorm, kQ, kK, kV, kO, kPostNorm, kGate, kUp, kDown, kBlockParams };
enum HeadParam { kFinalNorm, kLmHead };

// Units in model order: embedding, blocks 0..L-1, head; shards for TP rank tp_rank of tp.
std::vector<UnitSpec> make_units(const ModelConfig& c, int tp, int tp_rank);

}  // namespace tetra
