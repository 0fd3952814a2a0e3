#include "plan/setup.hpp"

#include <algorithm>
#include <optional>

#include "plan/memory.hpp"
#include "util/checked.hpp"

namespace tetra::plan {

Setup make_setup(const RunSpec& spec, const ModelConfig& cfg, int world) {
  Setup s;
  s.spec = spec;
  s.cfg = cfg;
  s.cfg.validate();
  const LayoutConfig& l = spec.layout;
  if (world == 0) {
    // The layout's product, checked: a plan lays out (and its grid walks) every rank.
    const std::optional<int64_t> n = checked_product({l.tp, l.cp, l.pp, std::max(1, l.dp)});
    check(n && *n <= kMaxPlanRanks, "the layout TP*CP*PP*DP = ", l.tp, "*", l.cp, "*", l.pp, "*",
          std::max(1, l.dp), " = ", n ? std::to_string(*n) : "more than 2^63",
          " ranks is more than the ", kMaxPlanRanks, " tetra plans");
    world = int(*n);
  }
  s.run = rank_work(l, spec.batch, s.cfg, world, 0);
  s.spec.layout.dp = s.run.layout.dp;
  s.units = make_units(s.cfg, l.tp, 0);
  s.prec = precision_named(spec.device.dtype);
  s.run.weight_delay = zb_weight_delay(s);
  return s;
}

int64_t Setup::padded(int unit) const {
  const int64_t n = units[unit].numel, N = dp_cp();
  return (n + N - 1) / N * N;
}

std::vector<std::vector<int>> Setup::stage_chunks(int stage) const {
  std::vector<std::vector<int>> out;
  for (const ChunkPlan& c : run.chunks)
    if (c.stage == stage) out.push_back(c.units);
  return out;
}

}  // namespace tetra::plan
