// Starting the programs tetra's jobs run, and waiting for them: the one place that forks and
// execs. The callers (tetra launch, sweep, lab) are the parents of mpirun, never MPI processes.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

#include "util/error.hpp"

namespace tetra {

struct ProcessSpec {
  std::vector<std::string> argv;
  // stdout and stderr into this file (a new one renamed over it: util/output_file.hpp's
  // create_replacing) and stdin from /dev/null; empty: inherited.
  std::string log_path;
  // A process group of its own, so that all of it (mpirun and every rank) can be stopped.
  bool own_group = false;
  std::vector<std::string> set_env;    // NAME=VALUE, replacing NAME's value
  std::vector<std::string> unset_env;  // NAMEs left out of the child's environment
};

// A program that cannot be started (missing, not executable): rerunning cannot help.
struct CannotRun : Error {
  explicit CannotRun(const std::string& what) : Error(what, exit_status::kCannotRun) {}
};

// Starts the program and returns its pid once it runs. The child reports a failed execvp
// through a close-on-exec pipe (which a successful exec closes unwritten), so "cannot be
// started" (CannotRun: "cannot run 'X': why") is told apart from "started and failed".
pid_t start_process(const ProcessSpec& spec);

// waitpid's status once `pid` has exited, without blocking: false while it runs.
bool reaped(pid_t pid, int& status);
// Waits for `pid` to exit; waitpid's status.
int wait_process(pid_t pid);
// The status as a shell reports it: the exit code, or 128 + the signal that ended it.
int exit_code(int status);

}  // namespace tetra
