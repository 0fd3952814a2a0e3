// --inject-failure RANK@STEP[:MODE]: a failure on purpose, to test resume. On the first
// attempt only (TETRA_RESTART unset or 0, as the supervisor sets it), rank RANK at step STEP:
//   kill     SIGKILL in the middle of the step (the default)
//   ckpt     SIGKILL in the middle of writing the first checkpoint at or after STEP
//   hang     stops answering: sleeps forever, so the others block until the watchdog fires
//   slow=MS  sleeps MS milliseconds every step from STEP on (a straggler: the sleep counts
//            as its compute, so the step line names it)
#pragma once
#include <cstdint>
#include <string>

namespace tetra {

struct FaultPlan {
  enum class Mode { None, Kill, Ckpt, Hang, Slow };
  Mode mode = Mode::None;
  int rank = -1;
  int64_t step = -1;
  int slow_ms = 0;

  // Throws tetra::Error with the expected syntax for a malformed spec.
  static FaultPlan parse(const std::string& spec);
  // False on restarts (TETRA_RESTART > 0): a failure happens once.
  static bool first_attempt();

  // Called by the trainer: in the middle of step `step` on world rank `rank`.
  void during_step(int rank, int64_t step) const;
  // Called by the checkpoint writer after this rank's shard is written, before the
  // checkpoint is complete.
  bool kill_during_checkpoint(int rank, int64_t step) const;
};

}  // namespace tetra
