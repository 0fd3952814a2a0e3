// Text from a model, one sequence on one rank: the prompt's tokens in one forward, then a
// token at a time with the keys and values of earlier positions kept (a KV cache). The
// embedding and the head are training's (transformer/ends.hpp), the head on the last row
// only, and each block is the training block's forward (transformer/block.hpp), all at
// TP = CP = 1 with the cache in the blocks' context, so generation and training share one
// implementation. Used by `tetra generate` (cli/generate.cpp) and by --sample-every during
// training (on rank 0, from whole weights).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "model/config.hpp"
#include "parallel/comm.hpp"
#include "transformer/block.hpp"

namespace tetra {

struct SampleOptions {
  int tokens = 64;         // new tokens to generate
  double temperature = 0;  // 0: greedy (the most likely token, the lowest id on ties)
  int top_k = 0;           // > 0: sample among the k most likely tokens only
  uint64_t seed = 1234;    // of the sampling draws
};

class Generator {
 public:
  // weights: whole tensors by Hugging Face name, the vocabulary padded as in training
  // (gather_full's form). Copies them into backend memory. Needs MPI started (the blocks'
  // TP and CP groups are MPI_COMM_SELF).
  Generator(Backend& be, const ModelConfig& cfg,
            const std::map<std::string, std::vector<float>>& weights);
  // The new tokens after `prompt` (at least one token). Deterministic for given options.
  std::vector<int> generate(const std::vector<int>& prompt, const SampleOptions& o);

 private:
  // Runs tokens [n] at positions p0 .. p0+n-1 through the model, appending their keys and
  // values to the cache, and returns the logits of the last one over the real vocabulary.
  std::vector<float> forward(const std::vector<int>& tokens, int64_t p0);

  Backend& be_;
  ModelConfig cfg_;
  std::vector<UnitSpec> units_;  // embedding, blocks, head (make_units at TP = 1)
  std::vector<Buffer> weights_;  // one flat buffer per unit
  std::unique_ptr<Comm> self_;   // a group of one rank: the blocks' TP and CP
  std::vector<KvCache> caches_;  // per layer, [max_len, kv_heads * head_dim] each
  Buffer positions_;             // 0 .. max_len-1 (i32)
};

}  // namespace tetra
