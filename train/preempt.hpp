// Pre-emption: SIGTERM (Slurm pre-empting or cancelling a job, a scheduler's stop) and
// SIGUSR1 (sbatch --signal=USR1@SECONDS before the time limit; mpirun passes it on to every
// rank) ask a run to stop at the next step boundary that every rank agrees on, with a
// checkpoint, and to exit with exit_status::kPreempted (75): "resume me" (tetra launch restarts
// it, the sbatch example requeues it, with --resume auto). SIGINT (Ctrl-C) stops it the same
// way, checkpoint included, but exits with exit_status::kInterrupted (130): a person stopped
// it, and no supervisor restarts it. The handler only records the signal,
// so a second signal while the checkpoint is written changes nothing.
#pragma once

#include "util/error.hpp"

namespace tetra {

// Installs the handlers for the lifetime of the object and restores the previous ones after.
class PreemptSignals {
 public:
  PreemptSignals();
  ~PreemptSignals();
  PreemptSignals(const PreemptSignals&) = delete;
  PreemptSignals& operator=(const PreemptSignals&) = delete;

  // The signal received since the handlers were installed, 0 when none.
  static int received();
};

}  // namespace tetra
