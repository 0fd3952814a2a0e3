#include "tools/lib/plan/setup.hpp"

#include <algorithm>
#include <optional>

#include "util/checked.hpp"

namespace tetra::plan {

Setup make_setup(const TrainOptions& opt, const ModelConfig& cfg, int world) {
  Setup s;
  s.opt = opt;
  s.cfg = cfg;
  s.cfg.validate();
  if (world == 0) {
    // The flags' product, checked: a plan lays out (and its grid walks) every rank.
    const std::optional<int64_t> n = checked_product({opt.tp, opt.cp, opt.pp, std::max(1, opt.dp)});
    check(n && *n <= kMaxPlanRanks, "the layout TP*CP*PP*DP = ", opt.tp, "*", opt.cp, "*", opt.pp,
          "*", std::max(1, opt.dp), " = ", n ? std::to_string(*n) : "more than 2^63",
          " ranks is more than the ", kMaxPlanRanks, " tetra plans");
    world = int(*n);
  }
  s.run = plan_run(opt, s.cfg, world, 0);
  s.opt.dp = s.run.layout.dp;
  s.units = make_units(s.cfg, opt.tp, 0);
  s.prec = precision_named(opt.dtype);
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
