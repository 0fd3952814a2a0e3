#include "parallel/rank_work.hpp"

#include <algorithm>

#include "parallel/cp.hpp"
#include "util/checked.hpp"

namespace tetra {

RankWork rank_work(const LayoutConfig& layout, const BatchConfig& batch, const ModelConfig& cfg,
                   int world_size, int rank) {
  RankWork p;
  const Layout l = p.layout =
      resolve_layout(layout.tp, layout.cp, layout.pp, layout.dp, world_size);
  p.coord = coord_of(l, rank);
  const int S = cfg.seq_len;
  check(l.cp == 1 || S % (2 * l.cp) == 0, "`model.seq_len` ", S,
        " is not divisible by 2*CP = ", 2 * l.cp);

  check(batch.global_batch % l.dp == 0, "`batch.global_batch` ", batch.global_batch,
        " is not divisible by DP ", l.dp);
  const int per_dp = batch.global_batch / l.dp;
  // Default: PP micro-batches per DP rank where the batch allows, to fill the pipeline.
  p.micro_batch = batch.micro_batch;
  if (p.micro_batch == 0) p.micro_batch = per_dp % l.pp == 0 ? std::max(1, per_dp / l.pp) : 1;
  check(per_dp % p.micro_batch == 0, "`batch.global_batch` ", batch.global_batch,
        " is not divisible by DP * micro-batch = ", l.dp, " * ", p.micro_batch);
  p.micro_batches = per_dp / p.micro_batch;

  p.schedule = parse_schedule(layout.schedule);
  check_schedule(p.schedule, l.pp, layout.vpp, p.micro_batches);
  p.chunks =
      plan_chunks(cfg.layers, l.pp, layout.vpp, layout.pp_balance == "ends", placement(p.schedule));
  p.place = place_units(p.chunks, cfg.layers, p.coord.pp, cfg.tie_embeddings);

  p.seq_pos = cp_positions(S, l.cp, p.coord.cp);
  // Attention's keys are the whole sequence in order (ContextParallel::gather_kv puts every CP
  // rank's keys there), so that each local query chunk attends to a prefix of them.
  for (int32_t k = 0; k < S; ++k) p.key_pos.push_back(k);
  check(!layout.sp || p.local_tokens() % l.tp == 0, "`layout.sp` splits the ", p.local_tokens(),
        " tokens of a micro-batch on a rank over TP ", l.tp, ", which does not divide them");
  return p;
}

}  // namespace tetra
