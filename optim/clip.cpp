#include "optim/clip.hpp"

#include <vector>

namespace tetra {

double local_grad_sum_squares(ZeroParams& zero, Backend& be, bool tp_rank0) {
  // Every segment's sum of squares in one backend call (one wait on a GPU), then split and
  // replicated parameters summed apart, in a fixed order, as before any layout change: the
  // same bits on every layout that holds the same shard.
  std::vector<Tensor> grads;
  std::vector<bool> split;
  for (int u = 0; u < zero.size(); ++u) {
    if (!zero.counted(u)) continue;  // a tied matrix counts once, on the first stage
    const ZeroParams::Shard s = zero.shard(u);
    for (const ZeroParams::Segment& g : s.segments) {
      grads.push_back(s.grads.flat(g.begin, g.end - g.begin));
      split.push_back(g.param->tp_dim >= 0);
    }
  }
  std::vector<double> sq(grads.size());
  be.sum_squares(grads, sq);
  double sum_split = 0, replicated = 0;
  for (size_t i = 0; i < sq.size(); ++i) (split[i] ? sum_split : replicated) += sq[i];
  return sum_split + (tp_rank0 ? replicated : 0.0);
}

}  // namespace tetra
