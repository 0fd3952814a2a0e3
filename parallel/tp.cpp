#include "parallel/tp.hpp"

#include <cmath>

#include "backend/fusions.hpp"

namespace tetra {
namespace {

// The two collectives of the region edges (see tp.hpp), along the tokens:
// gather_tokens  [Tl, c] -> [T, c]: the identity, or under --sp an all-gather;
// reduce_tokens  partial sums [T, c] -> [Tl, c]: an all-reduce, or under --sp a
//                reduce-scatter.
// Both are the identity at TP 1 and call no communicator there.
Buffer gather_tokens(Backend& be, const TensorParallel& tp, Buffer local) {
  if (!tp.sp || tp.size() == 1) return local;
  Buffer full(be, local.numel() * tp.size(), local.dtype());
  tp.comm.all_gather(full.flat(), local.flat());
  return full;
}

// The same for an input owned elsewhere: returns `local` itself, or the gathered copy,
// which then lives in `storage`.
Tensor gather_tokens(Backend& be, const TensorParallel& tp, const Tensor& local, Buffer& storage) {
  if (!tp.sp || tp.size() == 1) return local;
  storage = Buffer(be, local.numel() * tp.size(), local.dtype);
  tp.comm.all_gather(storage.flat(), local);
  return storage.view({local.rows() * tp.size(), local.cols()});
}

Buffer reduce_tokens(Backend& be, const TensorParallel& tp, Buffer partial) {
  if (tp.size() == 1) return partial;  // the sum over one rank (even under --comm nccl)
  if (!tp.sp) {
    tp.comm.all_reduce(partial.flat());
    return partial;
  }
  Buffer local(be, partial.numel() / tp.size(), partial.dtype());
  tp.comm.reduce_scatter(local.flat(), partial.flat());
  return local;
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(Backend& be, const TensorParallel& tp, Tensor w,
                                           Tensor dw, bool dw_fresh)
    : be_(be), tp_(tp), w_(w), dw_(dw), dw_beta_(dw_fresh ? 0.f : 1.f) {}

Buffer ColumnParallelLinear::forward(Buffer x, Buffer& y) const {
  // copy_to_tensor_parallel_region (identity), or under --sp
  // gather_from_sequence_parallel_region (all-gather): x [Tl, in] -> [T, in].
  Buffer full = gather_tokens(be_, tp_, std::move(x));
  const int64_t in = w_.cols(), T = full.numel() / in;
  y = Buffer(be_, T * w_.rows(), full.dtype());
  be_.matmul(y.view({T, w_.rows()}), full.view({T, in}), false, w_, true);  // y = x W^T
  return full;
}

Buffer ColumnParallelLinear::backward_input(const Tensor& dy) const {
  // exercise(tp_column_backward) begin
  const int64_t T = dy.rows(), in = w_.cols();
  Buffer dx(be_, T * in, dy.dtype);
  // dx [T, in] = dy W: this rank's part of the sum over TP.
  be_.matmul(dx.view({T, in}), dy, false, w_, false);
  // Backward of copy_to_tensor_parallel_region (all-reduce), or under --sp of
  // gather_from_sequence_parallel_region (reduce-scatter): [T, in] -> [Tl, in].
  return reduce_tokens(be_, tp_, std::move(dx));
  // exercise(tp_column_backward) end
}

void ColumnParallelLinear::backward_weight(const Tensor& dy, const Tensor& x) const {
  check(dw_.ptr != nullptr, "ColumnParallelLinear: backward_weight needs the weight gradient");
  be_.matmul(dw_, dy, true, x, false, 1.f, dw_beta_);  // dW += dy^T x
}

RowParallelLinear::RowParallelLinear(Backend& be, const TensorParallel& tp, Tensor w, Tensor dw,
                                     bool dw_fresh)
    : be_(be), tp_(tp), w_(w), dw_(dw), dw_beta_(dw_fresh ? 0.f : 1.f) {}

Buffer RowParallelLinear::forward(const Tensor& x, const Tensor* residual) const {
  const int64_t T = x.rows(), out = w_.rows();
  Buffer y(be_, T * out, x.dtype);
  if (residual && tp_.size() == 1) {
    be_.matmul_add(y.view({T, out}), x, false, w_, true, *residual);
    return y;
  }
  be_.matmul(y.view({T, out}), x, false, w_, true);  // this rank's partial sum [T, out]
  // reduce_from_tensor_parallel_region (all-reduce), or under --sp
  // reduce_scatter_to_sequence_parallel_region (reduce-scatter): [T, out] -> [Tl, out].
  Buffer reduced = reduce_tokens(be_, tp_, std::move(y));
  if (residual) be_.add(reduced.flat(), *residual);
  return reduced;
}

void RowParallelLinear::forward_into(const Tensor& x, const Tensor& residual, Tensor out) const {
  if (tp_.size() == 1) return be_.matmul_add(out, x, false, w_, true, residual);
  const Buffer y = forward(x);
  be_.add3(out, y.flat(), residual);
}

Tensor RowParallelLinear::gather_output_grad(const Tensor& dy, Buffer& storage) const {
  return gather_tokens(be_, tp_, dy, storage);
}

Buffer RowParallelLinear::backward_input(const Tensor& dy_full) const {
  const int64_t T = dy_full.rows(), in = w_.cols();
  Buffer dx(be_, T * in, dy_full.dtype);
  be_.matmul(dx.view({T, in}), dy_full, false, w_, false);  // dx [T, in/TP] = dy W
  return dx;
}

void RowParallelLinear::backward_weight(const Tensor& dy_full, const Tensor& x) const {
  check(dw_.ptr != nullptr, "RowParallelLinear: backward_weight needs the weight gradient");
  be_.matmul(dw_, dy_full, true, x, false, 1.f, dw_beta_);  // dW += dy^T x
}

VocabParallelEmbedding::VocabParallelEmbedding(Backend& be, const TensorParallel& tp, Tensor table,
                                               Tensor dtable)
    : be_(be), tp_(tp), table_(table), dtable_(dtable) {}

Buffer VocabParallelEmbedding::forward(const Tensor& tokens) const {
  const int64_t T = tokens.numel(), d = table_.cols();
  Buffer partial(be_, T * d, table_.dtype);  // [T, d]: rows of this rank's shard, zeros elsewhere
  be_.embedding_forward(partial.view({T, d}), tokens, table_, tp_.rank() * table_.rows());
  // reduce_from_tensor_parallel_region (all-reduce), or under --sp
  // reduce_scatter_to_sequence_parallel_region (reduce-scatter): [T, d] -> [Tl, d].
  return reduce_tokens(be_, tp_, std::move(partial));
}

void VocabParallelEmbedding::backward(Buffer dx, const Tensor& tokens) const {
  const int64_t T = tokens.numel(), d = dtable_.cols();
  // Backward of reduce_from_tensor_parallel_region (identity), or under --sp of
  // reduce_scatter_to_sequence_parallel_region (all-gather): dx [Tl, d] -> [T, d].
  const Buffer full = gather_tokens(be_, tp_, std::move(dx));
  be_.embedding_backward(dtable_, tokens, full.view({T, d}), tp_.rank() * dtable_.rows());
}

void VocabParallelCrossEntropy::forward(Backend& be, Comm& tp, const Tensor& logits,
                                        const Tensor& targets, Tensor row_max, Tensor stats,
                                        int64_t vocab) {
  const int64_t valid = valid_columns(tp, logits, vocab);
  be.ce_row_max(row_max, logits, valid);
  tp.all_reduce(row_max, ReduceOp::Max);
  be.ce_stats(stats, logits, row_max, targets, tp.rank() * logits.cols(), valid);
  tp.all_reduce(stats);  // (sum of exp, target logit): each target lives on one rank
}

bool VocabParallelCrossEntropy::fuses(Comm& tp) {
  return tp.size() == 1 && fused(Fusion::Classifier);
}

void VocabParallelCrossEntropy::forward_backward(Backend& be, Comm& tp, Tensor logits,
                                                 const Tensor& targets, Tensor row_max,
                                                 Tensor stats, int64_t vocab, float scale) {
  check(fuses(tp), "the fused classifier runs at TP 1 only, with its fusion on");
  be.ce_fused(logits, row_max, stats, targets, valid_columns(tp, logits, vocab), scale);
}

void DeviceLoss::record(Backend& be, const Tensor& row_max, const Tensor& stats) {
  const int64_t T = row_max.numel();
  check(stats.numel() == 2 * T, "DeviceLoss: ", T, " row maxima, ", stats.numel(), " statistics");
  Buffer part(be, 3 * T);
  be.copy(part.flat(0, T), row_max);
  be.copy(part.flat(T, 2 * T), stats);
  parts_.push_back(std::move(part));
}

double DeviceLoss::take(Backend& be) {
  if (parts_.empty()) return 0;
  int64_t n = 0;
  for (const Buffer& p : parts_) n += p.numel();
  Buffer all(be, n);  // one device buffer, so that one download (one wait) brings everything
  int64_t at = 0;
  for (const Buffer& p : parts_) be.copy(all.flat(at, p.numel()), p.flat()), at += p.numel();
  float* h = reinterpret_cast<float*>(host_.get(be, size_t(n) * sizeof(float)));
  be.download(h, all.flat());
  double total = 0;
  at = 0;
  for (const Buffer& p : parts_) {
    const int64_t T = p.numel() / 3;
    const float *m = h + at, *st = h + at + T;
    double loss = 0;
    for (int64_t t = 0; t < T; ++t) loss += std::log(double(st[2 * t])) + m[t] - st[2 * t + 1];
    total += loss;
    at += p.numel();
  }
  parts_.clear();
  return total;
}

}  // namespace tetra
