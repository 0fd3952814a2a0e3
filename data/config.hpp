// The input section of a run's configuration: what it trains on, what it validates on, how
// text becomes tokens, and the model it may start from.
#pragma once
#include <cstdint>
#include <string>

namespace tetra {

struct DataConfig {
  std::string data = "synthetic";  // synthetic, a text file, or llm.c .bin token shards
  // Validation: --val-data, or the last val_split of data's tokens (0: none); evaluated
  // every eval_every steps (0: after the last only) on eval_batches global batches.
  std::string val_data;
  double val_split = 0;
  int64_t eval_every = 0;
  int eval_batches = 4;
  // "" (bytes), "bpe:N" (train a BPE model of N pieces on data) or a SentencePiece .model
  // file; text is tokenized into .bin shards cached beside it.
  std::string tokenizer;
  std::string init_from;  // a Hugging Face model directory or safetensors file
};

}  // namespace tetra
