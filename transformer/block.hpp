// One transformer block, built from Megatron's tensor-parallel layers (parallel/tp.hpp):
//   h   = x + o( attention( rope(q(xn)), rope(k(xn)), v(xn) ) ),  xn = rmsnorm(x) * w_in
//   out = h + down( silu(gate(hn)) * up(hn) ),                    hn = rmsnorm(h) * w_post
// (the attention half and the MLP half).
// q, k, v: one ColumnParallelLinear over the stacked weights [Wq; Wk; Wv], so one GEMM whose
// output qkv RoPE splits (or rotates in place, attention reading q, k, v from it); gate, up: one
// over [Wgate; Wup], whose output SwiGLU reads; o and down: RowParallelLinear. The layers make all
// the TP communication; CP gathers K and V around attention (parallel/cp.hpp). Shapes on one rank:
// T tokens of the micro-batch on this rank (CP already cut the sequence), Tl = T, or T/TP under
// --sp, rows of the residual stream; Hl = heads/TP, KVl = kv_heads/TP, Fl = ffn/TP, hd = head_dim:
//   x, h, out [Tl, d];  xn, hn [T, d];  qkv [T, (Hl + 2 KVl) hd];  q [T, Hl*hd];  k, v [T, KVl*hd];
//   gate_up [T, 2 Fl] (columns gate | up);  act [T, Fl].
#pragma once
#include "backend/backend.hpp"
#include "model/batch.hpp"
#include "model/config.hpp"
#include "parallel/cp.hpp"
#include "parallel/tp.hpp"

namespace tetra {

// Decoding one sequence (tetra generate, TP = CP = 1): one block's keys and values of the
// positions before this forward's tokens. The forward appends its tokens' rows and attends
// to every row so far, so its key positions must be 0 .. length + T - 1.
struct KvCache {
  Buffer k, v;         // [capacity, kv_heads * hd]
  int64_t length = 0;  // rows filled
};

// What the parallel dimensions give a block.
struct BlockContext {
  Backend& be;
  const TensorParallel& tp;
  const ContextParallel& cp;
  const ModelConfig& cfg;
  const TokenPositions& pos;
  KvCache* cache = nullptr;  // decoding only: this block's cache (then BlockActs k, v stay empty)
};

// Everything forward keeps for backward (x, the block input, is kept by the caller). xn and
// hn, the normed x and h, are the column layers' inputs on all T tokens; x_rstd and h_rstd
// their norms' 1/rms [Tl]. Under CP, k and v hold every CP rank's keys and values
// [B * CP * Sl, KVl*hd]. Under RoPE in place (backend/fusions.hpp) q holds the rotated qkv
// [T, (Hl + 2 KVl) hd], and at CP 1 k and v stay empty.
struct BlockActs {
  Buffer x_rstd, xn, q, k, v, attn, lse, h, h_rstd, hn, gate_up, act;
  void clear() { *this = BlockActs{}; }
  // After B: frees what only B reads (attention's inputs and log-sum-exp, SwiGLU's input, the
  // norms' inputs and 1/rms), keeping the weights' inputs xn, attn, hn, act for W.
  void keep_for_weight_grads() {
    q.reset(), k.reset(), v.reset(), lse.reset(), gate_up.reset();
    x_rstd.reset(), h.reset(), h_rstd.reset();
  }
};

// u: the block's unit; w: its weights (flat, TP-local). out [Tl, d] = block(x [Tl, d]).
void block_forward(const BlockContext& ctx, const UnitSpec& u, const Tensor& w, const Tensor& x,
                   Tensor out, BlockActs& a);

// What a block's backward keeps from its input-gradient pass (B) for its weight-gradient pass
// (W), besides BlockActs' weight inputs: the gradient at each GEMM's output. The Row layers'
// (o, down) are the residual stream's gradients [Tl, d]; under --sp their GEMMs read them on
// all T tokens, which B gathers. A W right after its B takes the gathered [T, d]; a W apart
// (ZB-H1, ZB-V) keeps the local rows [Tl, d] in the meantime and gathers them again, as
// Megatron gathers the column layers' inputs again under --sp: one more all-gather per Row
// layer, so that a pending W holds no more than the micro-batch held awaiting B.
struct BlockGrads {
  Buffer dout;           // down's output gradient dL/dout: [Tl, d], or gathered [T, d]
  Buffer dgate_up;       // [T, 2 Fl]: gate_up's
  Buffer dh;             // o's: dL/dh [Tl, d], or gathered [T, d]
  Buffer dqkv;           // [T, (Hl + 2 KVl) hd]: qkv's
  bool gathered = true;  // dout and dh on all T tokens (false: the local rows, W gathers them)
};

// The block's backward in two passes: the zero-bubble pipeline's B, which gives the input's
// gradient that the previous pipeline stage waits for, and W, the weight gradients that only
// the optimizer needs (Qi et al. 2023). A schedule may run other passes between them; run back
// to back they give the bits of a one-pass backward. Shapes as above.
//
// B: dx [Tl, d] = dL/dx, x the block's input, given dout = dL/dout [Tl, d]. u: the block's unit;
// w: its weights (flat, TP-local). All the block's communication (TP, CP) happens here. B also
// makes the norms' weight gradients, dnorm [2, d] fp32 (w_in's, then w_post's) += theirs:
// cheap reductions over the rows, whose inputs (the norms' inputs and output gradients,
// [Tl, d] each) W would otherwise keep. What W reads goes into g and stays in a
// (BlockActs::keep_for_weight_grads frees the rest); x is not among it. weights_apart: W
// will not follow at once, so g keeps the Row layers' gradients local (BlockGrads).
void block_backward_input(const BlockContext& ctx, const UnitSpec& u, const Tensor& w, Tensor dnorm,
                          const Tensor& x, Buffer dout, Tensor dx, const BlockActs& a,
                          BlockGrads& g, bool weights_apart = false);
// W: dw (flat, like w) += the GEMMs' weight gradients from what B kept, and its norms' parts
// = dnorm, the sum of the Bs so far; needs no weights, and communicates only to gather the
// Row layers' gradients that B kept local (under --sp, W apart). dw_fresh: the GEMMs write
// their parts of dw (beta 0) rather than add.
void block_backward_weight(const BlockContext& ctx, const UnitSpec& u, Tensor dw,
                           const Tensor& dnorm, const BlockActs& a, const BlockGrads& g,
                           bool dw_fresh = false);

// The geometry and mask hint of the block's attention call on this rank (what
// Backend::attention_path reports for the run), and what it masks by: the positions and, under
// --doc-mask, the documents.
AttnShape attention_shape(const BlockContext& ctx);
AttnPositions attn_positions(const BlockContext& ctx);

// A view of parameter i of a flat unit buffer (w or dw) with its local shape.
Tensor param_view(const Tensor& flat, const ParamInfo& p);

}  // namespace tetra
