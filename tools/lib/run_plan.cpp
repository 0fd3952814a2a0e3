#include "tools/lib/run_plan.hpp"

#include <algorithm>

#include "parallel/cp.hpp"
#include "util/checked.hpp"

namespace tetra {

RunPlan plan_run(const TrainOptions& opt, const ModelConfig& cfg, int world_size, int rank) {
  RunPlan p;
  const Layout l = p.layout = resolve_layout(opt.tp, opt.cp, opt.pp, opt.dp, world_size);
  p.coord = coord_of(l, rank);
  const int S = cfg.seq_len;
  check(l.cp == 1 || S % (2 * l.cp) == 0, "--seq-len ", S,
        " is not divisible by 2*CP = ", 2 * l.cp);

  // The run's tokens (step * G * S: tokens seen, the data order's s * G + j) count in 64 bits.
  check(checked_product({opt.steps, opt.global_batch, S}).has_value(), "--steps ", opt.steps,
        " of --global-batch ", opt.global_batch, " x --seq-len ", S,
        " tokens are more tokens than 64 bits count");
  check(opt.global_batch % l.dp == 0, "--global-batch ", opt.global_batch,
        " is not divisible by DP ", l.dp);
  const int per_dp = opt.global_batch / l.dp;
  // Default: PP micro-batches per DP rank where the batch allows, to fill the pipeline.
  p.micro_batch = opt.micro_batch;
  if (p.micro_batch == 0) p.micro_batch = per_dp % l.pp == 0 ? std::max(1, per_dp / l.pp) : 1;
  check(per_dp % p.micro_batch == 0, "--global-batch ", opt.global_batch,
        " is not divisible by DP * micro-batch = ", l.dp, " * ", p.micro_batch);
  p.micro_batches = per_dp / p.micro_batch;

  // --vpp above 1 without --schedule means the interleaved schedule.
  p.schedule =
      parse_schedule(opt.vpp > 1 && !opt.given.count("--schedule") ? "interleaved" : opt.schedule);
  check_schedule(p.schedule, l.pp, opt.vpp, p.micro_batches);
  p.chunks = plan_chunks(cfg.layers, l.pp, opt.vpp);
  p.place = place_units(p.chunks, cfg.layers, p.coord.pp);

  p.seq_pos = cp_positions(S, l.cp, p.coord.cp);
  for (int c = 0; c < l.cp; ++c) {
    const std::vector<int32_t> mine = cp_positions(S, l.cp, c);
    p.key_pos.insert(p.key_pos.end(), mine.begin(), mine.end());
  }
  check(!opt.sp || p.local_tokens() % l.tp == 0, "--sp splits the ", p.local_tokens(),
        " tokens of a micro-batch on a rank over TP ", l.tp, ", which does not divide them");
  return p;
}

}  // namespace tetra
