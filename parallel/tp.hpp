// Tensor parallelism (Megatron-LM, 2019). Within a TP group each rank holds a slice of
// every matrix:
//   ColumnParallelLinear  W [out/TP, in]   q, k, v, gate, up, LM head: output split
//   RowParallelLinear     W [out, in/TP]   o, down: input split, partial sums all-reduced
//   VocabParallelEmbedding     table [V/TP, d]: a rank embeds only its tokens, all-reduce
//   VocabParallelCrossEntropy  logits [T, V/TP]: max and sum-exp all-reduced, full logits
//                              never gathered
// The conjugate regions: copy_to_tensor_parallel_region is the identity forward and an
// all-reduce backward (it sits before a column-parallel pair); reduce_from_tensor_parallel
// _region is an all-reduce forward and the identity backward (after a row-parallel one).
// So a block makes two all-reduces forward and two backward.
#pragma once
#include "model/backend.hpp"
#include "parallel/comm.hpp"

namespace tetra {

// Backward of copy_to_tensor_parallel_region: sum the input gradient over TP.
inline void copy_to_tensor_parallel_region_backward(Comm& tp, Tensor dx) {
  tp.all_reduce(dx);
}
// Forward of reduce_from_tensor_parallel_region: sum the partial outputs over TP.
inline void reduce_from_tensor_parallel_region(Comm& tp, Tensor y) {
  tp.all_reduce(y);
}

struct ColumnParallelLinear {
  // y [T, out/TP] = x [T, in] W^T.
  static void forward(Backend& be, Tensor y, const Tensor& x, const Tensor& w) {
    be.matmul(y, x, false, w, true);
  }
  // dx [T, in] (+)= dy W (partial: the caller sums it over TP once for all projections
  // sharing x); dW [out/TP, in] += dy^T x.
  static void backward(Backend& be, Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x,
                       const Tensor& w, bool accumulate_dx) {
    be.matmul(dx, dy, false, w, false, 1.f, accumulate_dx ? 1.f : 0.f);
    be.matmul(dw, dy, true, x, false, 1.f, 1.f);
  }
};

struct RowParallelLinear {
  // y [T, out] = sum over TP of x [T, in/TP] W^T.
  static void forward(Backend& be, Comm& tp, Tensor y, const Tensor& x, const Tensor& w) {
    be.matmul(y, x, false, w, true);
    reduce_from_tensor_parallel_region(tp, y);
  }
  // dy is the same on every TP rank; dx [T, in/TP] = dy W; dW += dy^T x.
  static void backward(Backend& be, Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x,
                       const Tensor& w) {
    be.matmul(dx, dy, false, w, false);
    be.matmul(dw, dy, true, x, false, 1.f, 1.f);
  }
};

struct VocabParallelEmbedding {
  static void forward(Backend& be, Comm& tp, Tensor out, const Tensor& tokens,
                      const Tensor& table) {
    be.embedding_forward(out, tokens, table, tp.rank() * table.rows());
    reduce_from_tensor_parallel_region(tp, out);
  }
  static void backward(Backend& be, Comm& tp, Tensor dtable, const Tensor& tokens,
                       const Tensor& dout) {
    be.embedding_backward(dtable, tokens, dout, tp.rank() * dtable.rows());
  }
};

struct VocabParallelCrossEntropy {
  // Per-token loss log(sum_v exp(l_v)) - l_target over the whole vocabulary. row_max [T]
  // and stats [T, 2] are kept for backward. Returns the sum of the losses (same on every
  // TP rank).
  static double forward(Backend& be, Comm& tp, const Tensor& logits, const Tensor& targets,
                        Tensor row_max, Tensor stats);
  // logits become dL/dlogits * scale, in place.
  static void backward(Backend& be, Comm& tp, Tensor logits, const Tensor& targets,
                       const Tensor& row_max, const Tensor& stats, float scale) {
    be.ce_backward(logits, row_max, stats, targets, tp.rank() * logits.cols(), scale);
  }
};

}  // namespace tetra
