// The model's two ends around its blocks, as training's chunks (transformer/chunk.hpp) and
// decoding (transformer/generator.hpp) both run them. Shapes as in block.hpp (T tokens, Tl =
// T, or T/TP under --sp, rows of the residual stream; V/TP the vocabulary rows of a TP rank):
//   embedding  tokens [T] -> x [Tl, d]: the tokens' rows of the table [V/TP, d] of this rank's
//              vocabulary shard, summed over TP (VocabParallelEmbedding);
//   head       x [Tl, d] -> logits [T, V/TP] = n W_head^T, n = rmsnorm(x) * w_final (the LM
//              head a ColumnParallelLinear over the shard). The loss on the logits is the
//              chunk's (VocabParallelCrossEntropy).
// u is the end's unit (UnitSpec::Kind::Embedding or Head), w and dw its weights and their
// gradient (flat, TP-local). The head's matrix W_head [V/TP, d] is passed apart (head_matrix):
// the head unit's lm_head.weight, or under tied embeddings the embedding unit's table.
#pragma once
#include "backend/backend.hpp"
#include "model/config.hpp"
#include "parallel/tp.hpp"

namespace tetra {

// x [Tl, d], a new buffer in the table's dtype.
Buffer embed_forward(Backend& be, const TensorParallel& tp, const UnitSpec& u, const Tensor& w,
                     const Tensor& tokens);
// dw += the rows of dx [Tl, d] (the gradient of the forward's x) at the tokens of this
// rank's shard: a weight gradient alone (the zero-bubble pipeline's W), which needs no weights.
void embed_backward(Backend& be, const TensorParallel& tp, const UnitSpec& u, const Tensor& dw,
                    Buffer dx, const Tensor& tokens);

// What the head's forward keeps for its backward (x, its input, is kept by the caller).
struct HeadActs {
  Buffer rstd;  // the final norm's 1/rms [Tl]
  Buffer n;     // its output on all T tokens [T, d]: the LM head's input
};
// The LM head's matrix [V/TP, d] in w, the flat weights (or gradients) of unit u: the head
// unit's lm_head.weight, or (u the embedding unit, under tied embeddings) its table.
Tensor head_matrix(const UnitSpec& u, const Tensor& w);
// logits [T, V/TP], a new buffer in x's dtype; w_head [V/TP, d] the LM head's matrix.
Buffer head_forward(Backend& be, const TensorParallel& tp, const ModelConfig& cfg,
                    const UnitSpec& u, const Tensor& w, const Tensor& w_head, const Tensor& x,
                    HeadActs& a);
// dx [Tl, d] = dL/dx (overwritten) from dlogits [T, V/TP]; dw += the final norm's dL/dw;
// dw_head += dlogits^T n (written instead under head_fresh, as block_backward's GEMMs).
void head_backward(Backend& be, const TensorParallel& tp, const UnitSpec& u, const Tensor& w,
                   const Tensor& dw, const Tensor& w_head, const Tensor& dw_head, const Tensor& x,
                   const Tensor& dlogits, Tensor dx, const HeadActs& a, bool head_fresh);
// The logits of x's last row alone [1, V] (decoding's next token, at TP 1): the head on that
// row.
Buffer head_last_row(Backend& be, const TensorParallel& tp, const ModelConfig& cfg,
                     const UnitSpec& u, const Tensor& w, const Tensor& w_head, const Tensor& x);

}  // namespace tetra
