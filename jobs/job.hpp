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

// tetra launch, sweep, lab (and serve) start their own jobs and are never ranks of one:
// started by mpirun or srun as several ranks, each would run the whole command into the same
// outputs. Throws tetra::Error, the refusal, when the launcher's environment
// (parallel/placement.hpp's launcher_rank) says this process is one of several ranks;
// `command` names it ("tetra sweep"). Whoever reports it does so on rank 0 alone.
void check_not_a_rank(const std::string& command);

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

// SIGINT, SIGTERM and SIGHUP (a closed terminal) while a command that starts jobs runs: for the
// lifetime of the outermost of these objects, each is recorded and stops the running job
// (run_job's process group) instead of ending this process, which would leave the job's ranks
// behind and its temporary files; the command then ends with Interrupted (exit status 130)
// and one line. Nested scopes share the outermost's record.
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
  // Throws Interrupted ("interrupted by Interrupt" and `what`) when a signal was received.
  static void check(const std::string& what = "");
};

// Why a job failed, in one phrase and never empty: "timed out after 900 s", else its log's
// error (log_error) or, where the log has none, how it ended ("exit 1", "killed by signal 9
// (Killed)"), with "(its log is empty)" where it is.
std::string job_failure(const JobResult& job, const std::string& log_path, double timeout_s);

// Runs argv with stdout and stderr into log_path (replaced), stdin from /dev/null, in a
// process group of its own so that a time limit (timeout_s > 0) or a Ctrl-C stops mpirun and
// every rank. go_on, when given, is called every 20 ms while the job runs (to follow its
// output); when it returns false the job is stopped as a time limit stops it. A command that
// cannot be started ends with exit code 127 and the reason in the log. Throws Interrupted
// after stopping the job when this process is interrupted (InterruptScope), before or while
// it runs.
JobResult run_job(const std::vector<std::string>& argv, const std::string& log_path,
                  double timeout_s, const std::function<bool()>& go_on = nullptr);

// A directory for a command's runs: `out` (made when missing), or with `out` empty a fresh
// temporary one (under $TMPDIR, else /tmp; `prefix` begins its name) removed with everything
// in it when this goes.
class RunDir {
 public:
  explicit RunDir(const std::string& out, const std::string& prefix = "tetra_runs");
  ~RunDir();
  // A run failed: its log, which the error names, stays (the directory is no longer removed).
  void keep() { temporary_ = false; }
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
