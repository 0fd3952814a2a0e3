#include "parallel/tp.hpp"

#include <cmath>
#include <vector>

namespace tetra {

double VocabParallelCrossEntropy::forward(Backend& be, Comm& tp, const Tensor& logits,
                                          const Tensor& targets, Tensor row_max, Tensor stats) {
  be.ce_row_max(row_max, logits);
  tp.all_reduce(row_max, ReduceOp::Max);
  be.ce_stats(stats, logits, row_max, targets, tp.rank() * logits.cols());
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
