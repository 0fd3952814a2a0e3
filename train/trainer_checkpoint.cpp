// The trainer's side of checkpoints: saving this rank's shards with the run's record, moving
// `latest` to the line it trains, and a resumed run that has nothing left to train (deciding
// where to resume and restoring are checkpoint/resume.hpp's, called by build_rank).
#include <cstdio>

#include "checkpoint/checkpoint.hpp"
#include "parallel/agree.hpp"
#include "train/trainer.hpp"
#include "util/clock.hpp"

namespace tetra {

void Trainer::point_latest_here() {
  ckpt::set_latest(config().checkpoint.ckpt_dir,
                   line_head_.name.empty() ? ckpt::kNoCheckpoint : line_head_.name);
}

int Trainer::finish_already_done() {
  const std::string& out = config().output.export_;
  // Pruning behind the last checkpoint, as its save would have (a kill may have come between).
  agree(world_, [&] {
    const CheckpointConfig& c = config().checkpoint;
    if (parts_.grid.rank != 0 || c.ckpt_dir.empty()) return;
    if (parts_.lock) parts_.lock->check_held();
    ckpt::prune_behind(c.ckpt_dir, line_head_, c.keep);
  });
  if (parts_.grid.rank == 0) {
    const std::string line = "run finished: " + parts_.resume.path + " is at step " +
                             std::to_string(step_) + ", the last of `optimizer.steps` " +
                             std::to_string(config().optimizer.steps) + "; nothing to train";
    std::printf("%s\n", settings::worded(line, config().origin).c_str());
  }
  if (out.empty()) return 0;
  export_weights(out);
  if (parts_.grid.rank == 0)
    std::printf("exported the weights of step %lld to %s\n", (long long)step_, out.c_str());
  return 0;
}

void Trainer::save_checkpoint() {
  const CheckpointConfig& c = config().checkpoint;
  const Grid& g = parts_.grid;
  // A new checkpoint waits for the previous one, and names it as its parent.
  if (saver_.busy()) saved(saver_.wait());
  const Clock::time_point began = Clock::now();
  ckpt::RunState st = parts_.record;
  st.step = step_;
  st.tokens_seen = step_ * config().batch.global_batch * model().seq_len;
  st.sampler_step = step_;
  st.parent = line_head_;
  std::vector<ckpt::Segment> segments;
  for (const auto& s : parts_.params->owned_slices(ckpt_copy_)) {
    // A TP-replicated tensor (the norms) is the same on every TP rank: TP rank 0 stores it.
    if (s.param->tp_dim < 0 && g.coord.tp != 0) continue;
    segments.push_back(
        {s.param->name, g.coord.tp, g.layout.tp, s.begin, s.end, s.weights, s.adam_m, s.adam_v});
  }
  saver_.start({.dir = c.ckpt_dir,
                .state = st,
                .segments = std::move(segments),
                .keep = c.keep,
                .raise_after_shard = parts_.fault.signal_during_checkpoint(g.rank, step_),
                // Rank 0 holds the directory's lock: a job that took it over ends this one's
                // checkpoints.
                .still_ours =
                    [this] {
                      if (parts_.lock) parts_.lock->check_held();
                    },
                .landed = [this] { parts_.backend->copies_landed(); },
                .began = began});
}

void Trainer::saved(const ckpt::Saved& s) {
  line_head_ = s.ref;
  if (parts_.grid.rank != 0) return;
  std::printf("checkpoint: step %lld saved to %s in %.3f s (stall %.3f s)\n", (long long)s.step,
              config().checkpoint.ckpt_dir.c_str(), s.seconds, s.stall);
  std::fflush(stdout);
}

}  // namespace tetra
