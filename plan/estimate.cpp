#include "plan/estimate.hpp"

#include <algorithm>
#include <map>

#include "parallel/schedule.hpp"
#include "plan/traffic.hpp"

namespace tetra::plan {

bool inside_node(const Layout& l, int dim, int g) {
  const int sizes[4] = {l.tp, l.cp, l.pp, l.dp};
  int stride = 1;
  for (int i = 0; i < dim; ++i) stride *= sizes[i];
  const int n = sizes[dim];
  if (n == 1) return true;
  for (int r = 0; r < l.world(); ++r) {
    const int index = (r / stride) % n;
    if (index != 0) continue;  // r is the first member of its group
    if (r / g != (r + (n - 1) * stride) / g) return false;
  }
  return true;
}

Link group_link(const Setup& s, const Machine& mc, const std::string& group) {
  const Layout& l = s.layout();
  const int g = mc.gpus_per_node;
  // The embedding group pairs two pipeline stages: it crosses what the pp group crosses.
  const std::map<std::string, int> dim = {{"tp", 0}, {"cp", 1}, {"pp", 2}, {"embed", 2}};
  const bool inside = group == "dp_cp"   ? inside_node(l, 1, g) && inside_node(l, 3, g)
                      : group == "world" ? l.world() <= g
                                         : inside_node(l, dim.at(group), g);
  return inside ? Link{mc.nvlink_Bps, mc.node_link} : Link{mc.network_Bps, "network"};
}

StepEstimate estimate_step(const Setup& s, const Machine& mc) {
  StepEstimate e;
  for (const auto& [group, bytes] : bytes_by_group(step_traffic(s, 0))) {
    if (bytes == 0) continue;
    const double bw = group_link(s, mc, group).bytes_per_s;
    const double secs = bw > 0 ? bytes / bw : 0;
    (group == "tp"                       ? e.tp
     : group == "cp"                     ? e.cp
     : group == "pp" || group == "embed" ? e.pp
                                         : e.dp) += secs;
  }
  const double peak = mc.peak_flops;
  if (peak <= 0) return e;
  const Layout& l = s.layout();
  const double tokens = double(s.spec.batch.global_batch) * s.cfg.seq_len;
  const double F = model_flops_per_token(s.cfg);
  const double hw = F + (s.spec.optimizer.recompute ? recompute_flops_per_token(s.cfg) : 0);
  e.known = true;
  e.compute = tokens * hw / (l.world() * peak);
  e.piped = e.compute / (1 - bubble_forms(s.run.schedule, l.pp, s.spec.layout.vpp,
                                          s.run.micro_batches, s.run.weight_delay)
                                 .of_step);
  e.dp_exposed = std::max(0.0, e.dp - e.compute);
  e.step = e.piped + e.tp + e.cp + e.pp + e.dp_exposed;
  e.mfu = tokens * F / (l.world() * peak * e.step);
  e.hfu = tokens * hw / (l.world() * peak * e.step);
  return e;
}

}  // namespace tetra::plan
