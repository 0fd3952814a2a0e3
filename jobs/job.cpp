#include "jobs/job.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "jobs/process.hpp"
#include "parallel/placement.hpp"
#include "util/error.hpp"
#include "util/format.hpp"
#include "util/output_file.hpp"

namespace tetra {
namespace {

// The running job's process group and the signal that interrupted us, for the handler.
volatile sig_atomic_t g_group = 0;
volatile sig_atomic_t g_signal = 0;
int g_scopes = 0;  // InterruptScopes alive
constexpr int kStopSignals[3] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_old[3];  // the handlers before the outermost scope

void stop_job(int sig) {
  g_signal = sig;
  if (g_group > 0) ::kill(-g_group, SIGTERM);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

InterruptScope::InterruptScope() {
  if (g_scopes++ > 0) return;
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = stop_job;
  sigemptyset(&sa.sa_mask);  // no SA_RESTART: a read waiting for a terminal returns
  for (int i = 0; i < 3; ++i) ::sigaction(kStopSignals[i], &sa, &g_old[i]);
}

InterruptScope::~InterruptScope() {
  if (--g_scopes > 0) return;
  for (int i = 0; i < 3; ++i) ::sigaction(kStopSignals[i], &g_old[i], nullptr);
}

void InterruptScope::check(const std::string& what) {
  if (g_signal)
    throw Interrupted(std::string("interrupted by ") + ::strsignal(g_signal) +
                      (what.empty() ? "" : " " + what));
}

std::string job_failure(const JobResult& job, const std::string& log_path, double timeout_s) {
  if (job.timed_out)
    return "timed out after " + format_number("%g", timeout_s) + " s (--run-timeout)";
  if (std::string error = log_error(log_path); !error.empty()) return error;
  std::string how = job.exit_code > 128
                        ? "killed by signal " + std::to_string(job.exit_code - 128) + " (" +
                              ::strsignal(job.exit_code - 128) + ")"
                        : "exit " + std::to_string(job.exit_code);
  std::error_code ec;
  if (std::filesystem::file_size(log_path, ec) == 0) how += " (its log is empty)";
  return how;
}

void check_not_a_rank(const std::string& command) {
  const LauncherRank me = launcher_rank();
  check(me.size <= 1, command, " was started as rank ", me.rank, " of ", me.size, " (", me.source,
        "); it starts its own MPI jobs and runs as one process: run it without mpirun or srun");
}

std::string tetra_program() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  check(n > 0, "cannot find this program's path (/proc/self/exe): ", std::strerror(errno));
  return std::string(buf, size_t(n));
}

std::vector<std::string> launcher_words(const std::string& launcher, int ranks) {
  std::vector<std::string> words;
  std::istringstream in(launcher);
  for (std::string w; in >> w;) {
    for (size_t at; (at = w.find("{n}")) != std::string::npos;)
      w.replace(at, 3, std::to_string(ranks));
    words.push_back(w);
  }
  return words;
}

void check_job_options(const JobOptions& o) {
  check(o.launcher.find_first_not_of(' ') != std::string::npos, "--launcher is empty");
  check(o.launcher.find("{n}") != std::string::npos,
        "--launcher must say where the number of ranks goes, as {n} (got '", o.launcher,
        "'; e.g. 'mpirun -np {n}' or 'srun -n {n}')");
}

JobResult run_job(const std::vector<std::string>& argv, const std::string& log_path,
                  double timeout_s, const std::function<bool()>& go_on) {
  const InterruptScope stop;
  InterruptScope::check("(no job was started)");
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  try {
    // A failure injected in a job must fire: the supervisor's attempt counter is not ours.
    pid = start_process(
        {.argv = argv, .log_path = log_path, .own_group = true, .unset_env = {"TETRA_RESTART"}});
  } catch (const CannotRun& e) {  // as a shell reports it: 127, and why in the log
    // The log start_process has just made (never created here, nor through a link).
    if (const Temporary log = open_for_append(log_path, false); log.fd >= 0) {
      const std::string line = std::string("tetra: error: ") + e.what() + "\n";
      write_all(log.fd, line.data(), line.size());
      ::close(log.fd);
    }
    return {.exit_code = exit_status::kCannotRun, .seconds = seconds_since(t0)};
  }
  g_group = pid;

  JobResult r;
  int status = 0;
  double stopped_at = -1;  // when SIGTERM went to the group
  while (!reaped(pid, status)) {
    const double t = seconds_since(t0);
    if (stopped_at < 0 && go_on && !go_on()) r.stopped = true;
    if (stopped_at < 0 && (g_signal || r.stopped || (timeout_s > 0 && t > timeout_s))) {
      r.timed_out = !g_signal && !r.stopped;
      ::kill(-pid, SIGTERM);
      stopped_at = t;
    }
    // mpirun passes SIGTERM on to its ranks; what is still there 10 s later is killed.
    if (stopped_at >= 0 && t > stopped_at + 10) ::kill(-pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid, SIGKILL);  // ranks the launcher left behind, if any
  g_group = 0;
  r.seconds = seconds_since(t0);
  r.exit_code = exit_code(status);
  InterruptScope::check("(the running job was stopped)");
  return r;
}

RunDir::RunDir(const std::string& out, const std::string& prefix) {
  namespace fs = std::filesystem;
  if (!out.empty()) {
    std::error_code ec;
    fs::create_directories(out, ec);
    check(!ec && fs::is_directory(out), "cannot make --out directory '", out, "'",
          ec ? ": " + ec.message() : "");
    path_ = out;
    return;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string name = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "_XXXXXX";
  check(::mkdtemp(name.data()) != nullptr, "cannot create a temporary directory in ",
        tmp && *tmp ? tmp : "/tmp");
  path_ = name;
  temporary_ = true;
}

RunDir::~RunDir() {
  std::error_code ec;
  if (temporary_) std::filesystem::remove_all(path_, ec);
}

std::string log_error(const std::string& log_path) {
  std::ifstream in(log_path);
  std::string error, last;
  const std::string prefix = "tetra: error: ";
  for (std::string line; std::getline(in, line);) {
    if (const size_t at = line.find(prefix); at != std::string::npos)
      error = line.substr(at + prefix.size());
    // Launchers frame their messages with rules of dashes: a line with words, then.
    if (line.find_first_not_of(" \t\r-=*") != std::string::npos) last = line;
  }
  return error.empty() ? last : error;
}

std::string shell_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLM"
                                         "NOPQRSTUVWXYZ0123456789-_./=:,@+{}") == std::string::npos;
    std::string q = a;
    if (!plain) {
      q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      q += "'";
    }
    out += (out.empty() ? "" : " ") + q;
  }
  return out;
}

}  // namespace tetra
