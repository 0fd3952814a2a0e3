#include "parallel/tp.hpp"

#include <cmath>

namespace tetra {
namespace {

// The two collectives of the region edges (see tp.hpp), along the tokens:
// gather_tokens  [Tl, c] -> [T, c]: the identity, or under --sp an all-gather;
// reduce_tokens  partial sums [T, c] -> [Tl, c]: an all-reduce, or under --sp a
//                reduce-scatter.
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
  if (!tp.sp || tp.size() == 1) {
    tp.comm.all_reduce(partial.flat());
    return partial;
  }
  Buffer local(be, partial.numel() / tp.size(), partial.dtype());
  tp.comm.reduce_scatter(local.flat(), partial.flat());
  return local;
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(Backend& be, const TensorParallel& tp,
                                           std::vector<Tensor> w, std::vector<Tensor> dw)
    : be_(be), tp_(tp), w_(std::move(w)), dw_(std::move(dw)) {}

Buffer ColumnParallelLinear::forward(Buffer x, std::initializer_list<Buffer*> y) const {
  check(y.size() == w_.size(), "ColumnParallelLinear: ", y.size(), " outputs for ", w_.size(),
        " weights");
  // copy_to_tensor_parallel_region (identity), or under --sp
  // gather_from_sequence_parallel_region (all-gather): x [Tl, in] -> [T, in].
  Buffer full = gather_tokens(be_, tp_, std::move(x));
  const int64_t in = w_[0].cols(), T = full.numel() / in;
  const Tensor xv = full.view({T, in});
  Buffer* const* out = y.begin();
  for (size_t i = 0; i < w_.size(); ++i) *out[i] = Buffer(be_, T * w_[i].rows(), full.dtype());
  for (size_t i = 0; i < w_.size(); ++i)  // y_i [T, out_i/TP] = x W_i^T
    be_.matmul(out[i]->view({T, w_[i].rows()}), xv, false, w_[i], true);
  return full;
}

Buffer ColumnParallelLinear::backward(std::initializer_list<Tensor> dy, const Tensor& x) const {
  check(dy.size() == w_.size() && dw_.size() == w_.size(),
        "ColumnParallelLinear: backward needs a gradient and a weight gradient per slice");
  Buffer dx(be_, x.numel(), x.dtype);
  const Tensor dxv = dx.view({x.rows(), x.cols()});
  const Tensor* g = dy.begin();
  for (size_t i = 0; i < w_.size(); ++i) {
    // dx [T, in] (+)= dy_i W_i: this rank's part of the sum over TP; dW_i += dy_i^T x.
    be_.matmul(dxv, g[i], false, w_[i], false, 1.f, i > 0 ? 1.f : 0.f);
    be_.matmul(dw_[i], g[i], true, x, false, 1.f, 1.f);
  }
  // Backward of copy_to_tensor_parallel_region (all-reduce), or under --sp of
  // gather_from_sequence_parallel_region (reduce-scatter): [T, in] -> [Tl, in].
  return reduce_tokens(be_, tp_, std::move(dx));
}

RowParallelLinear::RowParallelLinear(Backend& be, const TensorParallel& tp, Tensor w, Tensor dw)
    : be_(be), tp_(tp), w_(w), dw_(dw) {}

Buffer RowParallelLinear::forward(const Tensor& x) const {
  const int64_t T = x.rows(), out = w_.rows();
  Buffer y(be_, T * out, x.dtype);
  be_.matmul(y.view({T, out}), x, false, w_, true);  // this rank's partial sum [T, out]
  // reduce_from_tensor_parallel_region (all-reduce), or under --sp
  // reduce_scatter_to_sequence_parallel_region (reduce-scatter): [T, out] -> [Tl, out].
  return reduce_tokens(be_, tp_, std::move(y));
}

Buffer RowParallelLinear::backward(const Tensor& dy, const Tensor& x) const {
  // Backward of reduce_from_tensor_parallel_region (identity), or under --sp of
  // reduce_scatter_to_sequence_parallel_region (all-gather): dy [Tl, out] -> [T, out].
  Buffer storage;
  const Tensor dy_full = gather_tokens(be_, tp_, dy, storage);
  Buffer dx(be_, x.numel(), x.dtype);
  be_.matmul(dx.view({x.rows(), x.cols()}), dy_full, false, w_, false);  // dx [T, in/TP] = dy W
  be_.matmul(dw_, dy_full, true, x, false, 1.f, 1.f);                    // dW += dy^T x
  return dx;
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

double VocabParallelCrossEntropy::forward(Backend& be, Comm& tp, const Tensor& logits,
                                          const Tensor& targets, Tensor row_max, Tensor stats,
                                          int64_t vocab) {
  const int64_t valid = valid_columns(tp, logits, vocab);
  be.ce_row_max(row_max, logits, valid);
  tp.all_reduce(row_max, ReduceOp::Max);
  be.ce_stats(stats, logits, row_max, targets, tp.rank() * logits.cols(), valid);
  tp.all_reduce(stats);  // (sum of exp, target logit): each target lives on one rank
  const int64_t T = logits.rows();
  std::vector<float> m(T), st(2 * T);
  be.download(m.data(), row_max);
  be.download(st.data(), stats);
  double loss = 0;
  for (int64_t t = 0; t < T; ++t) loss += std::log(double(st[2 * t])) + m[t] - st[2 * t + 1];
  return loss;
}

}  // namespace tetra
