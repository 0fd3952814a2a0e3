#include "jobs/launch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string_view>

#include "checkpoint/lock.hpp"
#include "jobs/process.hpp"
#include "train/preempt.hpp"
#include "util/clock.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"
#include "util/json.hpp"
#include "util/output_file.hpp"

namespace tetra {
namespace {

// The command's training configuration: its arguments after the word `train` (the command
// may be `mpirun -np 16 tetra train ...`), parsed as tetra train parses them, --config file
// included. A command without that word is not tetra train's, and has no configuration the
// supervisor can know: it gets a metrics file of the supervisor's and --resume auto appended.
struct Child {
  TrainConfig config;
  size_t train = 0;  // the index of the word `train` in the command, 0 when there is none
};

Child child_of(const std::vector<std::string>& cmd, const TrainArgs& args) {
  Child c;
  const auto train = std::find(cmd.begin() + 1, cmd.end(), "train");
  if (train == cmd.end()) return c;
  c.train = size_t(train - cmd.begin());
  c.config = args.parse(std::vector<std::string>(train + 1, cmd.end()));
  return c;
}

// Where the command line gives --resume, to set it to auto on reruns (a --config file's key is
// overridden by the flag instead): the value is the next word or the tail of `--resume=V`.
struct FlagSpot {
  size_t index = 0;   // the word holding the value
  size_t offset = 0;  // where the value starts in it
};
std::optional<FlagSpot> resume_spot(const std::vector<std::string>& cmd, const Child& child) {
  for (size_t i = child.train + 1; i < cmd.size(); ++i) {
    if (cmd[i] == "--resume" && i + 1 < cmd.size()) return FlagSpot{i + 1, 0};
    if (cmd[i].starts_with("--resume=")) return FlagSpot{i, 9};
  }
  return std::nullopt;
}

// The metrics file the supervisor adds when the command has none; removed at the end. Beside
// the checkpoints when the command has a --ckpt-dir (rank 0 may run on another host, and
// every rank must see that directory), else in TMPDIR.
class TempMetricsFile {
 public:
  explicit TempMetricsFile(const std::string& ckpt_dir) {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = tmp && *tmp ? tmp : "/tmp";
    if (!ckpt_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(ckpt_dir, ec);
      check(!ec, "cannot create checkpoint directory '", ckpt_dir, "': ", ec.message());
      dir = ckpt_dir;
    }
    path_ = dir + "/.tetra_launch_XXXXXX.jsonl";
    const int fd = ::mkstemps(path_.data(), 6);
    check(fd >= 0, "cannot create a metrics file ", path_, ": ", std::strerror(errno));
    ::close(fd);
  }
  ~TempMetricsFile() { std::remove(path_.c_str()); }
  TempMetricsFile(const TempMetricsFile&) = delete;
  TempMetricsFile& operator=(const TempMetricsFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct StepTime {
  int64_t step;
  double ms;
};

// Reads the step records that attempts append to the metrics file, each record once. What
// the file held before the supervisor started belongs to earlier runs and is skipped.
class MetricsTail {
 public:
  explicit MetricsTail(std::string path) : path_(std::move(path)) { offset_ = size_now(); }

  std::vector<StepTime> read_new() {
    // A regular file only (util/input_file): the open of a FIFO would wait for a writer.
    const InputFile f = open_input_file(path_);
    if (f.fd < 0) return {};
    const size_t size = size_t(f.size);
    if (size < offset_) offset_ = 0;  // truncated or replaced: all of it is new
    std::string text(size - offset_, '\0');
    const ssize_t got = ::pread(f.fd, text.data(), text.size(), off_t(offset_));
    text.resize(got > 0 ? size_t(got) : 0);
    offset_ += text.size();
    const size_t complete = text.rfind('\n') + 1;  // 0 when there is no newline at all
    if (complete < text.size()) {
      // A rank killed mid-write leaves a torn last line. Ending it here keeps the next
      // attempt's first record on a line of its own, where it parses.
      if (const Temporary log = open_for_append(path_, false); log.fd >= 0)
        OutputStream(log.fd).write("\n");
      ++offset_;
    }
    std::vector<StepTime> steps;
    size_t begin = 0;
    for (size_t nl; (nl = text.find('\n', begin)) < complete; begin = nl + 1) {
      // Anything else (a torn line, a stray print, a step that took no finite time) times
      // no step.
      json v;
      if (!parse_json(text.substr(begin, nl - begin), v).empty() || !v.is_object()) continue;
      const std::optional<int64_t> step =
          v.contains("step") ? json_int(v.at("step")) : std::nullopt;
      if (step && v.contains("step_ms") && v.at("step_ms").is_number())
        steps.push_back({*step, v.at("step_ms").get<double>()});
    }
    return steps;
  }

 private:
  size_t size_now() const {
    const InputFile f = open_input_file(path_);
    return f.fd >= 0 ? size_t(f.size) : 0;
  }

  std::string path_;
  size_t offset_ = 0;
};

// The running attempt and the stop request, shared with the signal handler.
volatile sig_atomic_t g_child = 0;  // pid of the running attempt, 0 between attempts
volatile sig_atomic_t g_stop = 0;   // SIGINT, SIGTERM or SIGUSR1 received, else 0

void forward_signal(int sig) {
  g_stop = sig;
  // A closed terminal (SIGHUP) stops the attempt as a scheduler's stop does.
  if (g_child > 0) ::kill(g_child, sig == SIGHUP ? SIGTERM : sig);  // never kill(0): our group
}

// SIGINT, SIGTERM, SIGHUP and SIGUSR1 (Slurm's warning before the time limit) go to the running
// attempt and stop the restarts, for the lifetime of this object; the previous handlers come
// back after it (run_launch is a library call).
class SignalForwarding {
 public:
  SignalForwarding() {
    g_child = 0;
    g_stop = 0;
    struct sigaction sa {};
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~SignalForwarding() {
    for (int i = 0; i < 4; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

 private:
  static constexpr int kSignals[4] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};
  struct sigaction old_[4]{};
};

// An environment variable as an int, 0 when unset or not a number.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::max(0, std::atoi(v)) : 0;
}

// The job's token for the checkpoint lock (checkpoint/lock.hpp): inherited from an outer
// supervisor, else made here, the same for every attempt.
std::string job_token() {
  const char* outer = std::getenv("TETRA_JOB");
  if (outer && *outer) return outer;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
}

// Starts one attempt with TETRA_RESTART=restart (an outer count plus the attempt), TETRA_JOB
// and SLURM_DISABLE_STATUS (so that one SIGINT passed on to srun stops it, where srun alone
// wants two within a second) and returns its pid.
pid_t spawn(const std::vector<std::string>& cmd, int restart, const std::string& job) {
  ProcessSpec spec;
  spec.argv = cmd;
  spec.set_env = {"TETRA_RESTART=" + std::to_string(restart), "TETRA_JOB=" + job};
  if (!std::getenv("SLURM_DISABLE_STATUS")) spec.set_env.push_back("SLURM_DISABLE_STATUS=1");
  const pid_t pid = start_process(spec);
  g_child = pid;
  if (g_stop) ::kill(pid, g_stop);  // the signal came before g_child was set
  return pid;
}

struct Attempt {
  int status = 0;  // as waitpid reports it
  std::vector<StepTime> steps;
};

std::string plural(int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// "exit 1 at step 23", "signal 9 (Killed) at step 23", "exit 2 before any step".
std::string describe(const Attempt& a) {
  std::string s = WIFEXITED(a.status) ? "exit " + std::to_string(WEXITSTATUS(a.status))
                                      : "signal " + std::to_string(WTERMSIG(a.status)) + " (" +
                                            ::strsignal(WTERMSIG(a.status)) + ")";
  return s +
         (a.steps.empty() ? " before any step" : " at step " + std::to_string(a.steps.back().step));
}

// An attempt starts where its checkpoint left off, at its first step: every step at or
// after it that earlier attempts ran was discarded, whether or not a later attempt runs it
// again (a rollback to an older checkpoint discards more than it redoes). Kept steps are
// those of the line the last attempt ended on; all others executed are lost work.
void print_summary(const std::vector<Attempt>& attempts, double wall_s) {
  std::map<int64_t, double> kept_ms;  // step -> step_ms, on the current line
  int64_t executed = 0;
  for (const Attempt& a : attempts) {
    if (!a.steps.empty()) kept_ms.erase(kept_ms.lower_bound(a.steps.front().step), kept_ms.end());
    for (const StepTime& s : a.steps) kept_ms[s.step] = s.ms;
    executed += int64_t(a.steps.size());
  }
  double kept_s = 0;
  for (const auto& [step, ms] : kept_ms) kept_s += ms / 1000;
  std::string history;
  for (const Attempt& a : attempts) history += (history.empty() ? "" : ", then ") + describe(a);
  const int64_t kept = int64_t(kept_ms.size());
  std::printf(
      "tetra launch: %s (%s); %s lost, %lld kept; goodput %.1f%% (%.1f s of kept steps in %.1f "
      "s wall)\n",
      plural(int64_t(attempts.size()), "attempt").c_str(), history.c_str(),
      plural(executed - kept, "step").c_str(), static_cast<long long>(kept),
      wall_s > 0 ? 100 * kept_s / wall_s : 0.0, kept_s, wall_s);
  std::fflush(stdout);
}

// A scheduler's stop (SIGTERM, or SIGUSR1 before the time limit) that the command answered
// with a checkpoint: exit status 75, "resume me". Ctrl-C (SIGINT) and a closed terminal
// (SIGHUP) are a person's stop: the launch is interrupted whatever the command did.
bool preempted(int status) {
  return (g_stop == SIGTERM || g_stop == SIGUSR1) && WIFEXITED(status) &&
         WEXITSTATUS(status) == exit_status::kPreempted;
}

}  // namespace

int run_launch(const LaunchOptions& opt, const TrainArgs& train) {
  const Clock::time_point start = Clock::now();
  std::vector<std::string> base =
      opt.command;  // the command of every attempt, before --resume auto
  std::optional<TempMetricsFile> temp_metrics;
  std::optional<FlagSpot> resume;
  std::string metrics_path;
  const Child child = child_of(base, train);
  if (!child.config.output.metrics.empty()) {
    metrics_path = child.config.output.metrics;
  } else {
    metrics_path = temp_metrics.emplace(child.config.checkpoint.ckpt_dir).path();
    base.insert(base.end(), {"--metrics", metrics_path});
  }
  if (child.train > 0) resume = resume_spot(base, child);
  auto note = [&](const std::string& text) {
    if (!opt.quiet) std::fprintf(stderr, "tetra launch: %s\n", text.c_str());
  };

  MetricsTail metrics(metrics_path);
  SignalForwarding forwarding;
  const int outer_restarts = env_int("TETRA_RESTART");
  const std::string job = job_token();
  std::vector<Attempt> attempts;
  int rc = 0;
  for (int attempt = 0;; ++attempt) {
    std::vector<std::string> cmd = base;
    if (attempt > 0 && resume) {
      cmd[resume->index].replace(resume->offset, std::string::npos, "auto");
    } else if (attempt > 0) {
      cmd.insert(cmd.end(), {"--resume", "auto"});
    }
    pid_t pid = 0;
    try {
      pid = spawn(cmd, outer_restarts + attempt, job);
    } catch (const CannotRun& e) {
      std::fprintf(stderr, "tetra: error: %s\n", e.what());
      rc = e.status;
      break;
    }
    const int status = wait_process(pid);
    g_child = 0;
    attempts.push_back({status, metrics.read_new()});
    rc = exit_code(status);
    if (rc == 0) break;
    const std::string what =
        "attempt " + std::to_string(attempt) + ": " + describe(attempts.back());
    std::string stop;  // why there is no next attempt
    if (preempted(status)) {
      // The job is being pre-empted or reaches its time limit: whoever started it resumes it
      // later (the sbatch example requeues on this status).
      stop = std::string("pre-empted by ") + ::strsignal(g_stop) + " after a checkpoint (exit " +
             std::to_string(rc) + ": resume me)";
    } else if (g_stop) {
      stop = std::string("interrupted by ") + ::strsignal(g_stop);
    } else if (WIFEXITED(status) && (rc == 126 || rc == exit_status::kCannotRun)) {
      // The shell's and mpirun's codes for a program that is missing or not executable.
      stop = "the command cannot be run";
    } else if (WIFEXITED(status) && rc == exit_status::kInput) {
      // tetra's exit status for bad input: a rerun would fail the same way.
      stop = "the input was rejected";
    } else if (WIFEXITED(status) && rc == exit_status::kDiverged) {
      // Training diverged; resuming is bit-exact, so a rerun would diverge again.
      stop = "the run diverged";
    } else if (WIFEXITED(status) && rc == exit_status::kLocked) {
      stop = "another job holds the checkpoint directory";
    } else if (attempt >= opt.restarts) {
      stop = "no restarts left";
    }
    if (!stop.empty()) {
      note(what + "; " + stop + ", not restarting");
      break;
    }
    note(what + "; restarting with --resume auto (restart " + std::to_string(attempt + 1) + " of " +
         std::to_string(opt.restarts) + ")");
  }
  const double wall_s = seconds_since(start);
  if (!attempts.empty()) print_summary(attempts, wall_s);
  // Stopped by a signal and not pre-empted: whatever the command made of it (mpirun exits 1
  // when its ranks were stopped), the supervisor was interrupted.
  if (g_stop && rc != 0 && !(attempts.size() && preempted(attempts.back().status))) {
    std::fprintf(stderr, "tetra: error: interrupted by %s (the running command was stopped)\n",
                 ::strsignal(g_stop));
    return exit_status::kInterrupted;
  }
  return rc;
}

}  // namespace tetra
