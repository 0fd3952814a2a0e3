// The trainer's side of checkpoints: saving this rank's shards with the run's record, moving
// `latest` to the line it trains, and a resumed run that has nothing left to train (deciding
// where to resume and restoring are checkpoint/resume.hpp's, called by build_rank).
#include <cstdio>

#include "checkpoint/checkpoint.hpp"
#include "train/trainer.hpp"
#include "util/clock.hpp"

namespace tetra {

void Trainer::point_latest_here() {
  ckpt::set_latest(config().checkpoint.ckpt_dir,
                   line_head_.name.empty() ? ckpt::kNoCheckpoint : line_head_.name);
}

int Trainer::finish_already_done() {
  const std::string& out = config().output.export_;
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

double Trainer::save_checkpoint() {
  const Clock::time_point t0 = Clock::now();
  const CheckpointConfig& c = config().checkpoint;
  const Grid& g = parts_.grid;
  ckpt::RunState st = parts_.record;
  st.step = step_;
  st.tokens_seen = step_ * config().batch.global_batch * model().seq_len;
  st.sampler_step = step_;
  st.parent = line_head_;
  const auto slices = parts_.params->owned_slices();  // what the segments point into
  std::vector<ckpt::Segment> segments;
  for (const auto& s : slices) {
    // A TP-replicated tensor (the norms) is the same on every TP rank: TP rank 0 stores it.
    if (s.param->tp_dim < 0 && g.coord.tp != 0) continue;
    segments.push_back({s.param->name, g.coord.tp, g.layout.tp, s.begin, s.end, s.weights.data(),
                        s.adam_m.data(), s.adam_v.data()});
  }
  const int signal = parts_.fault.signal_during_checkpoint(g.rank, step_);
  // Rank 0 holds the directory's lock: a job that took it over ends this one's checkpoints.
  const std::string path = ckpt::save(world_, c.ckpt_dir, st, segments, c.keep, signal, [this] {
    if (parts_.lock) parts_.lock->check_held();
  });
  line_head_ = ckpt::reference_to(c.ckpt_dir, path);
  return seconds_since(t0);
}

}  // namespace tetra
