// A model chunk: the consecutive units that one pipeline stage runs for one virtual stage
// (with one stage and no pipelining, the whole model). The first chunk of the model also
// embeds the tokens; the last also applies the final norm, the LM head and the loss.
//
// Per micro-batch the chunk keeps its activations in a ChunkState until backward. Under
// --recompute full it keeps only each block's input and runs the block's forward again
// right before its backward, so the step computes the same numbers in the same order.
#pragma once
#include <vector>

#include "model/block.hpp"
#include "parallel/zero.hpp"

namespace tetra {

struct MicroBatch {
  Tensor tokens;   // [T] i32 inputs on this rank
  Tensor targets;  // [T] i32, the next token of each input
  TokenPositions pos;
};

// Shapes as in block.hpp: the residual stream has Tl rows (T, or T/TP under --sp).
struct ChunkState {
  std::vector<Buffer> xs;  // xs[0] chunk input, xs[i+1] output of block i; [Tl, d] each
  std::vector<BlockActs> acts;
  Buffer head_n, head_rstd, logits, row_max, ce_stats;  // last chunk only; logits [T, V/TP]
  Buffer dx;            // dL/d(chunk input) after backward, [T, d] (sent to the previous stage)
  double loss_sum = 0;  // sum of per-token losses (last chunk)
};

class ModelChunk {
 public:
  // units: indices into params of this chunk's units, in model order.
  ModelChunk(Backend& be, const TensorParallel& tp, const ContextParallel& cp,
             const ModelConfig& cfg, ZeroParams& params, std::vector<int> units, bool recompute);

  bool has_embedding() const;
  bool has_head() const;
  const std::vector<int>& units() const { return units_; }

  // x_in: the previous stage's output [Tl, d] (ignored by the chunk that embeds).
  // Afterwards s.xs.back() is this chunk's output [Tl, d] (unless it has the head).
  void forward(ChunkState& s, const MicroBatch& mb, const Tensor* x_in);
  // dout: gradient of this chunk's output (ignored by the chunk with the head, which starts
  // from the loss, scaled by loss_scale = 1 / tokens in the global batch). Fills s.dx
  // (unless it embeds) and frees the activations.
  void backward(ChunkState& s, const MicroBatch& mb, const Tensor* dout, float loss_scale);

 private:
  BlockContext block_ctx(const MicroBatch& mb) const;

  Backend& be_;
  TensorParallel tp_;
  ContextParallel cp_;
  const ModelConfig& cfg_;
  ZeroParams& params_;
  std::vector<int> units_;
  bool recompute_;
};

}  // namespace tetra
