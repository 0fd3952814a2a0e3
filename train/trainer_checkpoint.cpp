// The trainer's side of checkpoints: saving this rank's shards with the run's record, moving
// `latest` to the line it trains, and a resumed run that has nothing left to train (deciding
// where to resume and restoring are checkpoint/resume.hpp's, called by build_rank).
#include <cstdio>

#include "checkpoint/checkpoint.hpp"
#include "train/trainer.hpp"
#include "util/clock.hpp"

namespace tetra {

void Trainer::point_latest_here() {
  ckpt::set_latest(opt_.checkpoint.ckpt_dir,
                   line_head_.name.empty() ? ckpt::kNoCheckpoint : line_head_.name);
}

void Trainer::finish_already_done() {
  if (grid_.rank == 0) {
    const std::string line = "run finished: " + resumed_from_ + " is at step " +
                             std::to_string(step_) + ", the last of `optimizer.steps` " +
                             std::to_string(opt_.optimizer.steps) + "; nothing to train";
    std::printf("%s\n", settings::worded(line, opt_.origin).c_str());
  }
  if (opt_.output.export_.empty()) return;
  export_weights(opt_.output.export_);
  if (grid_.rank == 0)
    std::printf("exported the weights of step %lld to %s\n", (long long)step_,
                opt_.output.export_.c_str());
}

double Trainer::save_checkpoint() {
  const Clock::time_point t0 = Clock::now();
  ckpt::RunState st = record_;
  st.step = step_;
  st.tokens_seen = step_ * opt_.batch.global_batch * cfg_.seq_len;
  st.sampler_step = step_;
  st.parent = line_head_;
  const auto slices = params_->owned_slices();  // what the segments point into
  std::vector<ckpt::Segment> segments;
  for (const auto& s : slices) {
    // A TP-replicated tensor (the norms) is the same on every TP rank: TP rank 0 stores it.
    if (s.param->tp_dim < 0 && grid_.coord.tp != 0) continue;
    segments.push_back({s.param->name, grid_.coord.tp, grid_.layout.tp, s.begin, s.end,
                        s.weights.data(), s.adam_m.data(), s.adam_v.data()});
  }
  const int signal = fault_.signal_during_checkpoint(grid_.rank, step_);
  const std::string path =
      ckpt::save(world_, opt_.checkpoint.ckpt_dir, st, segments, opt_.checkpoint.keep, signal);
  line_head_ = ckpt::reference_to(opt_.checkpoint.ckpt_dir, path);
  return seconds_since(t0);
}

}  // namespace tetra
