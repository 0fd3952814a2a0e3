// --inject-failure RANK@STEP[:MODE]: a failure on purpose, to test resume. On the first
// attempt of the job only (restart_count() 0), rank RANK at step STEP:
//   kill     SIGKILL in the middle of the step (the default)
//   ckpt     SIGKILL in the middle of writing the first checkpoint at or after STEP
//   hang     stops answering: sleeps forever, so the others block until the watchdog fires
//   slow=MS  sleeps MS milliseconds every step from STEP on (a straggler: the sleep counts
//            as its compute, so the step line names it)
//   preempt  SIGTERM to itself in the middle of the step, as Slurm pre-empts a job, and
//            another SIGTERM while the pre-emption checkpoint is being written
#pragma once
#include <cstdint>
#include <string>

namespace tetra {

struct FaultPlan {
  enum class Mode { None, Kill, Ckpt, Hang, Slow, Preempt };
  Mode mode = Mode::None;
  int rank = -1;
  int64_t step = -1;
  int slow_ms = 0;

  // Throws tetra::Error with the expected syntax for a malformed spec.
  static FaultPlan parse(const std::string& spec);
  // Which restart of the job this run is: tetra launch's (TETRA_RESTART, which composes with
  // an outer count) plus Slurm's requeues (SLURM_RESTART_COUNT); 0 on the first attempt.
  static int restart_count();
  // A failure happens once: on the first attempt.
  static bool first_attempt() { return restart_count() == 0; }

  // Called by the trainer: in the middle of step `step` on world rank `rank`.
  void during_step(int rank, int64_t step) const;
  // The signal the checkpoint writer raises on this rank after its shard is written, before
  // the checkpoint is complete (0: none).
  int signal_during_checkpoint(int rank, int64_t step) const;
};

}  // namespace tetra
