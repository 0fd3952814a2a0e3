#include "optim/clip.hpp"

namespace tetra {

double local_grad_sum_squares(ZeroParams& zero, Backend& be, bool tp_rank0) {
  // Split and replicated parameters summed apart, in a fixed order, as before any layout
  // change: the same bits on every layout that holds the same shard.
  double split = 0, replicated = 0;
  for (int u = 0; u < zero.size(); ++u) {
    const ZeroParams::Shard s = zero.shard(u);
    for (const ZeroParams::Segment& g : s.segments) {
      const double sq = be.sum_squares(s.grads.flat(g.begin, g.end - g.begin));
      (g.param->tp_dim >= 0 ? split : replicated) += sq;
    }
  }
  return split + (tp_rank0 ? replicated : 0.0);
}

}  // namespace tetra
