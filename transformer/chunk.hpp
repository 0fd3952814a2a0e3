// A model chunk: the consecutive units that one pipeline stage runs for one virtual stage
// (with one stage and no pipelining, the whole model). The first chunk of the model also
// embeds the tokens; the last also applies the final norm, the LM head (transformer/ends.hpp)
// and the loss.
//
// Per micro-batch the chunk keeps its activations from forward until backward. Under
// --recompute full it keeps only each block's input and runs the block's forward again
// right before its backward, so the step computes the same numbers in the same order. The
// backward is two passes (transformer/block.hpp): B gives the input's gradient and the norms'
// weight gradients, W the GEMMs' weight gradients; between them the chunk keeps only what W
// reads (the GEMMs' inputs and output gradients, under --sp the Row layers' on the local
// rows): no more than the micro-batch held before B, so that a schedule that delays W (ZB-H1)
// holds no more per micro-batch than 1F1B.
//
// The chunk knows its parameters only as UnitParams: it acquires a unit's weights around each
// forward and input-gradient pass and hands over the unit's gradients after each
// weight-gradient pass; how they are
// sharded and synced (ZeRO, parallel/zero.hpp) is the holder's business.
#pragma once
#include <map>
#include <vector>

#include "model/unit_params.hpp"
#include "parallel/pipeline.hpp"
#include "transformer/block.hpp"
#include "transformer/ends.hpp"

namespace tetra {

class ModelChunk final : public PipelineStage {
 public:
  // units: indices into params of this chunk's units, in model order. head_matrix: under tied
  // embeddings, the unit whose matrix the LM head reads (UnitPlacement::head_matrix: the
  // embedding unit, or on the last of several stages its copy), whose gradient the head's
  // backward adds to and hands over; -1 when the head unit has an lm_head of its own.
  ModelChunk(Backend& be, const TensorParallel& tp, const ContextParallel& cp,
             const ModelConfig& cfg, UnitParams& params, std::vector<int> units, bool recompute,
             int head_matrix = -1);

  bool has_embedding() const;
  bool has_head() const;

  // Forward of micro-batch `id`, whose activations the chunk keeps until its backward.
  // x_in: the previous chunk's output [Tl, d] (null for the chunk that embeds). loss_scale:
  // backward's (training), or 0 (evaluation); given it, the head at TP 1 computes dlogits in the
  // forward's pass over the logits (VocabParallelCrossEntropy::forward_backward).
  StageOutput forward(int id, const MicroBatch& mb, const Tensor* x_in, float loss_scale) override;
  // B, the input-gradient pass of micro-batch `id`. dout: gradient of this chunk's output
  // [Tl, d] (null for the chunk with the head, which starts from the loss, scaled by
  // loss_scale = 1 / tokens in the global batch). Returns dL/d(chunk input) [Tl, d], to send
  // to the previous chunk (empty for the chunk that embeds). With run_weights (a schedule
  // without W actions) each unit's W follows its B at once, and the micro-batch's
  // activations are freed; else W waits for backward_weight. The head's weight gradient is
  // always computed here: it frees the logits [T, V/TP], the largest activation, at once.
  Buffer backward(int id, const MicroBatch& mb, const Tensor* dout, float loss_scale,
                  bool run_weights) override;
  // W, the weight-gradient pass of micro-batch `id` (after its B): each unit's gradients from
  // what B kept, handed over to the holder; frees the micro-batch's activations.
  void backward_weight(int id, const MicroBatch& mb) override;
  void discard(int id) override { states_.erase(id); }
  double take_loss() override { return loss_.take(be_); }

 private:
  // One micro-batch's activations between its forward and its backward. Shapes as in
  // block.hpp: the residual stream has Tl rows (T, or T/TP under --sp).
  struct State {
    // xs[0] chunk input, xs[i+1] output of block i; [Tl, d] each; B frees each once read.
    std::vector<Buffer> xs;
    std::vector<BlockActs> acts;
    std::vector<BlockGrads> grads;  // per block, from its B to its W
    Buffer embed_grad;              // the embedding output's gradient [Tl, d], for its W
    bool input_grad_done = false;   // B has run; W may
    HeadActs head;
    Buffer logits, row_max, ce_stats;  // [T, V/TP], [T], [T, 2]
    float dlogits_scale = 0;           // not 0: logits already hold dlogits at this loss scale
  };
  BlockContext block_ctx(const MicroBatch& mb) const;
  // W of unit u (the i-th of units_) for the micro-batch whose state is s.
  void unit_weight_grads(size_t i, State& s, const MicroBatch& mb);
  // The unit whose matrix the LM head of unit `head` reads: itself, or under tied embeddings
  // the embedding unit (or its copy).
  int head_unit(int head) const;

  Backend& be_;
  TensorParallel tp_;
  ContextParallel cp_;
  const ModelConfig cfg_;  // a copy: the chunk outlives whoever built it
  UnitParams& params_;
  std::vector<int> units_;
  bool recompute_;
  int head_matrix_;
  std::map<int, State> states_;  // by micro-batch id, from forward to backward
  // Per block of the chunk, its norms' weight gradients [2, d] fp32 (w_in's, w_post's)
  // summed over this step's Bs in micro-batch order, as accumulating into the unit's
  // gradients would: zeroed by the block's first B of the step (open), written into the
  // unit's gradients by each W, complete at its last. So the unit's full gradients (ZeRO-2/3)
  // are still made by its first W. Kept across steps: [blocks, 2, d].
  Buffer norm_grads_;
  std::vector<bool> norm_grads_open_;
  DeviceLoss loss_;  // the head's losses of this step, until take_loss
};

}  // namespace tetra
