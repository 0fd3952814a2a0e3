#include "checkpoint/gather.hpp"

namespace tetra {

std::map<std::string, std::vector<float>> gather_full(const Grid& grid, ZeroParams& params,
                                                      const ModelConfig& cfg,
                                                      const UnitPlacement& place, bool grads) {
  const Layout& l = grid.layout;
  const int units = int(place.unit_stage.size());
  // Every rank of a dp_cp group takes part in its shards' all-gathers; then the ranks with
  // cp = dp = 0 send their TP-local units to rank 0 in global unit order.
  std::vector<std::vector<float>> mine(units);
  for (int g = 0; g < units; ++g) {
    const int u = place.local_unit[g];
    if (u < 0) continue;
    mine[g] = grads ? params.gather_grads_to_host(u) : params.gather_to_host(u);
  }
  const bool sender = grid.coord.cp == 0 && grid.coord.dp == 0;
  std::map<std::string, std::vector<float>> full;
  if (grid.rank != 0) {
    if (sender)
      for (int g = 0; g < units; ++g)
        if (!mine[g].empty())
          grid.world->send(Tensor(mine[g].data(), {int64_t(mine[g].size())}), 0, g);
    return full;
  }
  // Rank 0 (tp = cp = pp = dp = 0) assembles; layouts of other TP ranks come from
  // make_units with their rank.
  for (int t = 0; t < l.tp; ++t) {
    const std::vector<UnitSpec> layouts = make_units(cfg, l.tp, t);
    for (int g = 0; g < units; ++g) {
      const int src = rank_of(l, {t, 0, place.unit_stage[g], 0});
      std::vector<float> local;
      if (src == 0) {
        local = mine[g];
      } else {
        local.resize(layouts[g].numel);
        grid.world->recv(Tensor(local.data(), {int64_t(local.size())}), src, g);
      }
      for (const ParamInfo& p : layouts[g].params) {
        std::vector<float>& dst = full[p.name];
        int64_t n = 1;
        for (int64_t s : p.shape) n *= s;
        dst.resize(n);
        for (int64_t i = 0; i < p.numel(); ++i) dst[p.global_index(i, t)] = local[p.offset + i];
      }
    }
  }
  return full;
}

}  // namespace tetra
