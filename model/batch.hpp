// A micro-batch as the layers see it: the token ids of this rank and where they sit in
// their sequences. T = batch * seq tokens on this rank (its CP chunks of each sequence).
#pragma once
#include <cstdint>

#include "backend/tensor.hpp"

namespace tetra {

// Where the tokens of a micro-batch sit in their sequences, for RoPE and the attention mask.
struct TokenPositions {
  int64_t batch = 0;  // sequences in the micro-batch
  int64_t seq = 0;    // tokens of each sequence on this rank
  Tensor token_pos;   // [batch*seq] i32, global position of each token (RoPE)
  Tensor seq_pos;     // [seq] i32, positions of one sequence's local tokens (queries)
  Tensor key_pos;     // [keys] i32, positions of the keys attention sees
  // Under --doc-mask the document of each token within its sequence (Dataset::document_ids),
  // so that attention stays within documents; empty otherwise.
  Tensor token_doc;  // [batch*seq] i32, of the local tokens (queries), as tokens
  Tensor key_doc;    // [batch*keys] i32, of the keys attention sees, in key_pos's order
  int64_t tokens() const { return batch * seq; }
};

struct MicroBatch {
  Tensor tokens;   // [T] i32 inputs on this rank
  Tensor targets;  // [T] i32, the next token of each input
  TokenPositions pos;
};

}  // namespace tetra
