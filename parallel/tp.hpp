// Tensor parallelism (Megatron-LM, 2019) and its sequence parallelism (Korthikanti et al.,
// 2022). Within a TP group each rank holds a slice of every matrix:
//   ColumnParallelLinear  W [out/TP, in]   q, k, v, gate, up, LM head: output split
//   RowParallelLinear     W [out, in/TP]   o, down: input split, outputs are partial sums
//   VocabParallelEmbedding     table [V/TP, d]: a rank embeds only its tokens
//   VocabParallelCrossEntropy  logits [T, V/TP]: max and sum-exp all-reduced; the full
//                              logits are never gathered
//
// The communication sits at the two edges of each column -> row pair:
//   entry  copy_to_tensor_parallel_region: identity forward, all-reduce backward;
//          under --sp gather_from_sequence_parallel_region: all-gather forward,
//          reduce-scatter backward.
//   exit   reduce_from_tensor_parallel_region: all-reduce forward, identity backward;
//          under --sp reduce_scatter_to_sequence_parallel_region: reduce-scatter forward,
//          all-gather backward.
// Each edge's backward is the other edge's forward, so TensorParallel has two operations,
// gather and reduce. A block makes two all-reduces forward and two backward; under --sp two
// all-gathers and two reduce-scatters each way, and norms and residuals work on T/TP rows.
#pragma once
#include "model/backend.hpp"
#include "parallel/comm.hpp"

namespace tetra {

struct TensorParallel {
  Comm& comm;
  bool sp = false;

  int size() const { return comm.size(); }
  int rank() const { return comm.rank(); }
  // Rows of an activation outside the TP regions: all T tokens, or T/TP under --sp.
  int64_t local_rows(int64_t T) const { return sp ? T / comm.size() : T; }

  // [local_rows(T), cols] -> [T, cols]: the identity, or under --sp an all-gather along the
  // tokens. Entry forward and exit backward.
  Buffer gather(Backend& be, Buffer local) const {
    if (!sp || comm.size() == 1) return local;
    Buffer full(be, local.numel() * comm.size());
    comm.all_gather(full.flat(), local.flat());
    return full;
  }
  // The same for an input owned elsewhere: returns `local` itself, or the gathered copy,
  // which then lives in `storage`.
  Tensor gather(Backend& be, const Tensor& local, Buffer& storage) const {
    if (!sp || comm.size() == 1) return local;
    storage = Buffer(be, local.numel() * comm.size());
    comm.all_gather(storage.flat(), local);
    return storage.view({local.rows() * comm.size(), local.cols()});
  }
  // Partial sums [T, cols] -> [local_rows(T), cols]: an all-reduce, or under --sp a
  // reduce-scatter along the tokens. Exit forward and entry backward.
  Buffer reduce(Backend& be, Buffer partial) const {
    if (!sp || comm.size() == 1) {
      comm.all_reduce(partial.flat());
      return partial;
    }
    Buffer local(be, partial.numel() / comm.size());
    comm.reduce_scatter(local.flat(), partial.flat());
    return local;
  }
};

struct ColumnParallelLinear {
  // y [T, out/TP] = x [T, in] W^T.
  static void forward(Backend& be, Tensor y, const Tensor& x, const Tensor& w) {
    be.matmul(y, x, false, w, true);
  }
  // dx [T, in] (+)= dy W, this rank's part of the sum over TP; dW [out/TP, in] += dy^T x.
  static void backward(Backend& be, Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x,
                       const Tensor& w, bool accumulate_dx) {
    be.matmul(dx, dy, false, w, false, 1.f, accumulate_dx ? 1.f : 0.f);
    be.matmul(dw, dy, true, x, false, 1.f, 1.f);
  }
};

struct RowParallelLinear {
  // y [T, out] = x [T, in/TP] W^T: this rank's partial sum.
  static void forward(Backend& be, Tensor y, const Tensor& x, const Tensor& w) {
    be.matmul(y, x, false, w, true);
  }
  // dy [T, out] is whole on every rank; dx [T, in/TP] = dy W; dW += dy^T x.
  static void backward(Backend& be, Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x,
                       const Tensor& w) {
    be.matmul(dx, dy, false, w, false);
    be.matmul(dw, dy, true, x, false, 1.f, 1.f);
  }
};

struct VocabParallelEmbedding {
  // out [T, d]: rows of this rank's vocabulary shard, zeros elsewhere (partial sums).
  static void forward(Backend& be, const TensorParallel& tp, Tensor out, const Tensor& tokens,
                      const Tensor& table) {
    be.embedding_forward(out, tokens, table, tp.rank() * table.rows());
  }
  static void backward(Backend& be, const TensorParallel& tp, Tensor dtable, const Tensor& tokens,
                       const Tensor& dout) {
    be.embedding_backward(dtable, tokens, dout, tp.rank() * dtable.rows());
  }
};

struct VocabParallelCrossEntropy {
  // Per-token loss log(sum_v exp(l_v)) - l_target over the whole vocabulary, from this
  // rank's logits [T, V/TP]. row_max [T] and stats [T, 2] are kept for backward. Returns
  // the sum of the losses (the same on every TP rank).
  static double forward(Backend& be, Comm& tp, const Tensor& logits, const Tensor& targets,
                        Tensor row_max, Tensor stats);
  // logits become scale * dL/dlogits, in place.
  static void backward(Backend& be, Comm& tp, Tensor logits, const Tensor& targets,
                       const Tensor& row_max, const Tensor& stats, float scale) {
    be.ce_backward(logits, row_max, stats, targets, tp.rank() * logits.cols(), scale);
  }
};

}  // namespace tetra
