#include "optim/adamw.hpp"

namespace tetra {

void adamw_step(ZeroParams& zero, Backend& be, const AdamWConfig& c, float grad_scale,
                int64_t step) {
  for (int u = 0; u < zero.size(); ++u) {
    const ZeroParams::Shard s = zero.shard(u);
    for (const ZeroParams::Segment& g : s.segments) {
      const Backend::AdamW h{float(c.lr),
                             float(c.beta1),
                             float(c.beta2),
                             float(c.eps),
                             g.param->decay() ? float(c.weight_decay) : 0.f,
                             grad_scale,
                             step};
      const int64_t n = g.end - g.begin;
      be.adamw(s.weights.flat(g.begin, n), s.grads.flat(g.begin, n), s.adam_m.flat(g.begin, n),
               s.adam_v.flat(g.begin, n), h, s.copy.ptr ? s.copy.flat(g.begin, n) : Tensor{});
    }
  }
}

}  // namespace tetra
