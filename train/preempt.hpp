// Pre-emption: SIGTERM (Slurm pre-empting or cancelling a job, a scheduler's stop) and
// SIGUSR1 (sbatch --signal=USR1@SECONDS before the time limit; mpirun passes it on to every
// rank) ask a run to stop at the next step boundary that every rank agrees on, with a
// checkpoint, and to exit with kPreemptedExitStatus: "resume me". The handler only records
// the signal, so a second signal while the checkpoint is written changes nothing.
#pragma once

namespace tetra {

// sysexits' EX_TEMPFAIL: the job is fine and should run again (tetra launch restarts it, the
// sbatch example requeues it) with --resume auto.
inline constexpr int kPreemptedExitStatus = 75;

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
