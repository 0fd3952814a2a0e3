// Tensor parallelism (Megatron-LM, Shoeybi et al., 2019) and its sequence parallelism
// (Korthikanti et al., 2022). Within a TP group each rank holds a slice of every matrix:
//   ColumnParallelLinear       W [out/TP, in]   q, k, v, gate, up, LM head: output split
//   RowParallelLinear          W [out, in/TP]   o, down: input split, outputs are partial sums
//   VocabParallelEmbedding     table [V/TP, d]  a rank embeds only its shard's tokens
//   VocabParallelCrossEntropy  logits [T, V/TP] max and sum-exp all-reduced; the full logits
//                                               are never gathered
//
// Each backward takes the gradient of the layer's output first, then what forward read (as
// the Backend's ops do). Each layer does its own communication at the edge of the TP region, as
// Megatron's autograd functions (forward | backward), with Tl = T, or T/TP under --sp, the rows of
// the residual stream outside the region:
//   entry of ColumnParallelLinear, [Tl, c] -> [T, c]:
//     copy_to_tensor_parallel_region                     identity       | all-reduce
//     gather_from_sequence_parallel_region (--sp)        all-gather     | reduce-scatter
//   exit of RowParallelLinear and VocabParallelEmbedding, partial sums [T, c] -> [Tl, c]:
//     reduce_from_tensor_parallel_region                 all-reduce     | identity
//     reduce_scatter_to_sequence_parallel_region (--sp)  reduce-scatter | all-gather
// Each edge's backward is the other edge's forward. One ColumnParallelLinear holds the stacked
// weights of the projections that read the same input (q, k, v; gate, up), as Megatron fuses
// them into linear_qkv and linear_fc1, so the input enters the region once. A block thus makes two
// all-reduces forward and two backward; under --sp two all-gathers and two reduce-scatters
// each way, and norms and residuals work on Tl rows.
#pragma once
#include <algorithm>
#include <vector>

#include "backend/backend.hpp"
#include "parallel/comm.hpp"

namespace tetra {

struct TensorParallel {
  Comm& comm;
  bool sp = false;

  int size() const { return comm.size(); }
  int rank() const { return comm.rank(); }
  // Rows of an activation outside the TP region: all T tokens, or T/TP under --sp.
  int64_t local_rows(int64_t T) const { return sp ? T / comm.size() : T; }
};

// Column-parallel linear, W [out/TP, in]: y [T, out/TP] = x W^T. Projections that read the
// same input are one layer over their weights stacked by rows, as Megatron's linear_qkv and
// linear_fc1: W = [Wq; Wk; Wv] or [Wgate; Wup] of this rank, which make_units lays out
// contiguously (model/config.cpp), so forward, dgrad and wgrad are one GEMM each, and each TP
// rank's slice is its own [q_r; k_r; v_r]. The checkpoint and the export keep the slices as
// separate tensors (Hugging Face's q_proj, k_proj, v_proj).
class ColumnParallelLinear {
 public:
  // w [out/TP, in]; dw, its gradient (backward only). dw_fresh: backward writes dW (a GEMM
  // with beta 0) rather than adding to it, as the unit's first backward of a step does when
  // its holder says so (UnitParams::grads_fresh).
  ColumnParallelLinear(Backend& be, const TensorParallel& tp, Tensor w, Tensor dw = {},
                       bool dw_fresh = false);
  // x [Tl, in] -> y, a new buffer [T, out/TP]. Returns x on all T tokens [T, in], which
  // backward needs (Megatron under --sp gathers it again in backward to save memory; keeping
  // it holds backward to its two all-gathers per block).
  Buffer forward(Buffer x, Buffer& y) const;
  // The backward in two passes (the zero-bubble pipeline's B and W, parallel/schedule.hpp),
  // which may run apart; each needs only what it names.
  // B: dy [T, out/TP] -> dx [Tl, in] = dy W, summed over the TP group.
  Buffer backward_input(const Tensor& dy) const;
  // W: dW += dy^T x (dW = under dw_fresh), x forward's returned input [T, in]; no
  // communication, and no weights (w may be empty).
  void backward_weight(const Tensor& dy, const Tensor& x) const;

 private:
  Backend& be_;
  const TensorParallel& tp_;
  Tensor w_, dw_;
  float dw_beta_;  // 0 under dw_fresh, else 1
};

// Row-parallel linear, W [out, in/TP]: y [Tl, out] = x [T, in/TP] W^T, summed over the TP
// group.
class RowParallelLinear {
 public:
  // dw_fresh as for ColumnParallelLinear.
  RowParallelLinear(Backend& be, const TensorParallel& tp, Tensor w, Tensor dw = {},
                    bool dw_fresh = false);
  // x [T, in/TP] -> y [Tl, out] (+ residual [Tl, out]), a new buffer. At TP 1 the residual
  // rides on the GEMM (Backend::matmul_add: one rounding in bf16); else it is added after the
  // reduction.
  Buffer forward(const Tensor& x, const Tensor* residual = nullptr) const;
  // The same into out [Tl, out]: out = residual + x W^T summed over TP.
  void forward_into(const Tensor& x, const Tensor& residual, Tensor out) const;
  // The backward in two passes, as ColumnParallelLinear's. First dy [Tl, out] on all T
  // tokens [T, out], which both passes take: the backward of reduce_from_tensor_parallel_region
  // (dy itself) or under --sp of reduce_scatter_to_sequence_parallel_region (an all-gather,
  // into `storage`).
  Tensor gather_output_grad(const Tensor& dy, Buffer& storage) const;
  // B: dy_full [T, out] -> dx [T, in/TP] = dy W, a new buffer.
  Buffer backward_input(const Tensor& dy_full) const;
  // W: dW += dy^T x, x [T, in/TP]; no communication, and no weights (w may be empty).
  void backward_weight(const Tensor& dy_full, const Tensor& x) const;

 private:
  Backend& be_;
  const TensorParallel& tp_;
  Tensor w_, dw_;
  float dw_beta_;  // 0 under dw_fresh, else 1
};

// The token embedding with the vocabulary split over TP: rank r holds rows
// [r V/TP, (r+1) V/TP) of the table [V, d].
class VocabParallelEmbedding {
 public:
  VocabParallelEmbedding(Backend& be, const TensorParallel& tp, Tensor table, Tensor dtable = {});
  // tokens [T] -> x [Tl, d], a new buffer: each rank embeds its shard's tokens (zeros for
  // the others) and the partial sums leave the region.
  Buffer forward(const Tensor& tokens) const;
  // dx [Tl, d], the gradient of forward's output -> dtable += the rows of this rank's tokens.
  void backward(Buffer dx, const Tensor& tokens) const;

 private:
  Backend& be_;
  const TensorParallel& tp_;
  Tensor table_, dtable_;
};

struct VocabParallelCrossEntropy {
  // Per-token loss log(sum_v exp(l_v)) - l_target over the vocabulary's `vocab` tokens, from
  // this rank's logits [T, V/TP] (the columns from `vocab` on pad the vocabulary and are left
  // out): all-reduces the row maxima, then (sum of exp, target logit), into row_max [T] and
  // stats [T, 2], kept for backward and for the loss (DeviceLoss): nothing leaves the device.
  static void forward(Backend& be, Comm& tp, const Tensor& logits, const Tensor& targets,
                      Tensor row_max, Tensor stats, int64_t vocab);
  // logits become scale * dL/dlogits = scale * (softmax - onehot(target)), in place (0 in the
  // padding); no communication.
  static void backward(Backend& be, Comm& tp, Tensor logits, const Tensor& targets,
                       const Tensor& row_max, const Tensor& stats, int64_t vocab, float scale) {
    be.ce_backward(logits, row_max, stats, targets, tp.rank() * logits.cols(),
                   valid_columns(tp, logits, vocab), scale);
  }
  // Whether forward_backward runs: at TP 1 with the classifier fusion on (backend/fusions.hpp).
  static bool fuses(Comm& tp);
  // forward, then backward at once, in one pass over the logits (Backend::ce_fused: no
  // collective at TP 1), the same row_max and stats for the loss: the backward's scale must be
  // known at the forward (training's loss_scale). Only where fuses(tp).
  static void forward_backward(Backend& be, Comm& tp, Tensor logits, const Tensor& targets,
                               Tensor row_max, Tensor stats, int64_t vocab, float scale);
  // How many of this rank's columns are tokens: rank r holds [r V/TP, (r+1) V/TP).
  static int64_t valid_columns(Comm& tp, const Tensor& logits, int64_t vocab) {
    return std::clamp(vocab - tp.rank() * logits.cols(), int64_t(0), logits.cols());
  }
};

// The loss of a step's micro-batches, kept on the device until the step's end: each micro-batch's
// cross-entropy statistics are copied aside when computed (no wait), and take() copies them all
// into pinned host memory at once (one wait) and sums them as the per-micro-batch downloads did:
// per micro-batch sum_t log(sum of exp) + row max - target logit in double, then the
// micro-batches in the order recorded. So the loss has the same bits, without two host waits
// per micro-batch.
class DeviceLoss {
 public:
  // Copies row_max [T] and stats [T, 2] (fp32).
  void record(Backend& be, const Tensor& row_max, const Tensor& stats);
  // The sum of every recorded micro-batch's losses (0 when none); forgets them.
  double take(Backend& be);

 private:
  std::vector<Buffer> parts_;  // per micro-batch [3T]: row_max, then stats
  HostBuffer host_;
};

}  // namespace tetra
