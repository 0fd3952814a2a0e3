#include "optim/adamw.hpp"

#include <vector>

namespace tetra {

void adamw_step(ZeroParams& zero, Backend& be, const AdamWConfig& c, float grad_scale,
                int64_t step) {
  const Backend::AdamW h{float(c.lr),  float(c.beta1), float(c.beta2),
                         float(c.eps), grad_scale,     step};
  std::vector<AdamWSegment> segments;
  for (int u = 0; u < zero.size(); ++u) {
    const ZeroParams::Shard s = zero.shard(u);
    segments.clear();
    for (const ZeroParams::Segment& g : s.segments)
      segments.push_back({g.begin, g.end, g.param->decay() ? float(c.weight_decay) : 0.f});
    be.adamw(s.weights, s.grads, s.adam_m, s.adam_v, h, segments, s.copy);
  }
}

}  // namespace tetra
