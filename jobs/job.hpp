// The training jobs `tetra sweep`, `tetra lab` and `tetra serve` start: `tetra train` on N ranks
// through a launcher (mpirun by default, or the one the user names), its output into a log file,
// within a time limit. Like `tetra launch`, the caller is the parent of mpirun, not an MPI process.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace tetra {

// How jobs start (--launcher) and how long one may run (--run-timeout, 0: no limit).
struct JobOptions {
  std::string launcher = "mpirun --oversubscribe --bind-to none -np {n}";
  double run_timeout = 900;
};
// Throws tetra::Error when the launcher is empty or does not say where the ranks go ({n}).
void check_job_options(const JobOptions& o);

// Why this process must not start jobs: it is one rank of an MPI job of several (mpirun or srun
// started it, as Open MPI, PMI or Slurm tell in its environment); "" when it is not. command:
// "tetra serve", for the message.
std::string mpi_rank_problem(const std::string& command);

// This program's own path (/proc/self/exe), for the jobs to run.
std::string tetra_program();

// The launcher's words with "{n}" replaced by the number of ranks: "mpirun -np {n}" ->
// {"mpirun", "-np", "4"}. Words are separated by spaces; no quoting.
std::vector<std::string> launcher_words(const std::string& launcher, int ranks);

struct JobResult {
  int exit_code = 0;  // the command's exit status; 128 + the signal that ended it
  bool timed_out = false;
  bool stopped = false;  // go_on said to stop it
  double seconds = 0;
};

// Runs argv with stdout and stderr into log_path (replaced), stdin from /dev/null, in a
// process group of its own so that a time limit (timeout_s > 0) or a Ctrl-C stops mpirun and
// every rank. go_on, when given, is called every 20 ms while the job runs (to follow its
// output); when it returns false the job is stopped as a time limit stops it. A command that
// cannot be started ends with exit code 127 and the reason in the log. Throws Interrupted
// after stopping the job when this process is interrupted.
JobResult run_job(const std::vector<std::string>& argv, const std::string& log_path,
                  double timeout_s, const std::function<bool()>& go_on = nullptr);

// A directory for a command's runs: `out` (made when missing), or with `out` empty a fresh
// temporary one (under $TMPDIR, else /tmp; `prefix` begins its name) removed with everything
// in it when this goes.
class RunDir {
 public:
  explicit RunDir(const std::string& out, const std::string& prefix = "tetra_runs");
  ~RunDir();
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool temporary_ = false;
};

// The last "tetra: error: ..." line of a log (without the prefix), else its last line with
// more than rules of dashes, else "".
std::string log_error(const std::string& log_path);

// Quoted for a shell where needed, joined with spaces: to show a command a user can rerun.
std::string shell_line(const std::vector<std::string>& argv);

}  // namespace tetra
