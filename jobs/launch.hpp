// `tetra launch`: the supervisor. It runs a training command, reruns it with `--resume auto`
// when it fails, and reports how much of the wall time went into steps that were kept
// (goodput). It is the parent of mpirun, not one of its ranks, so it runs before MPI_Init
// and never uses MPI.
#pragma once
#include <string>
#include <vector>

#include "jobs/train_args.hpp"

namespace tetra {

// `tetra launch [--restarts N] [--quiet] -- COMMAND ARGS...`.
struct LaunchOptions {
  int restarts = 3;
  bool quiet = false;
  std::vector<std::string> command;  // everything after the first "--"
};

// What follows the command's word `train` is parsed as tetra train parses it (flags and a
// --config file): its metrics file times the steps (a temporary one, in its checkpoint
// directory when it has one, is added when it has none), and reruns get --resume auto (the
// command line's --resume set to auto, else the flag appended, overriding a file's key).
// Returns the exit status for the program: 0 when the last attempt succeeded, else that
// attempt's exit code (128 + signal when it was killed); 127 when the command cannot be started
// at all. Throws tetra::Error when the child's configuration is refused (before any attempt). An
// attempt pre-empted (exit 75) is restarted like a failed one, unless the supervisor itself got the
// signal (SIGTERM, SIGUSR1: the job is being stopped) and then returns 75 for its own caller to
// resume it. Each attempt gets TETRA_RESTART (an exported count plus the attempt number)
// and TETRA_JOB, the job's token for the checkpoint lock.
int run_launch(const LaunchOptions& opt, const TrainArgs& train);

}  // namespace tetra
