// The supervisor, run on small sh scripts standing in for the trainer: each script sees the
// arguments the supervisor gives it (--metrics FILE, --resume auto) as "$@" and appends
// step records to the metrics file the way rank 0 of `tetra train` does. (With the real
// trainer and a --config file: tests/e2e/test_launch_config.cpp.)
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/test_util.hpp"
#include "cli/options.hpp"
#include "util/clock.hpp"

using tetra::test::TempDir;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> lines(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(slurp(path));
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

struct Launch {
  int rc = -1;
  std::string out, err;
};

// Runs `tetra launch ARGS` as main does, with fds 1 and 2 sent to files, so the summary and the
// notes can be read.
Launch launch(const std::vector<std::string>& args) {
  const TempDir tmp;
  const std::string out = tmp / "stdout", err = tmp / "stderr";
  std::fflush(nullptr);
  const int saved_out = ::dup(1), saved_err = ::dup(2);
  const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  Launch r;
  std::vector<std::string> line = {"launch"};
  line.insert(line.end(), args.begin(), args.end());
  r.rc = tetra::run_job_command(line);
  std::fflush(nullptr);
  ::dup2(saved_out, 1);
  ::dup2(saved_err, 2);
  for (int fd : {saved_out, saved_err, out_fd, err_fd}) ::close(fd);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// A stand-in trainer: `sh -c SCRIPT LOG train ARGS...`: the supervisor parses what follows the
// word `train` as tetra train's configuration. The prelude drops that word, logs
// "TETRA_RESTART ARGS" to LOG and sets $metrics and $resume from the arguments; BODY then
// does the work.
std::vector<std::string> script(const std::string& log, const std::string& body,
                                std::vector<std::string> extra = {}) {
  const std::string prelude =
      "log=$0; [ \"$1\" = train ] && shift; echo \"$TETRA_RESTART $*\" >> \"$log\"; "
      "metrics=; resume=; prev=; "
      "for a in \"$@\"; do "
      "  case $a in --metrics=*) metrics=${a#*=};; --resume=*) resume=${a#*=};; esac; "
      "  [ \"$prev\" = --metrics ] && metrics=$a; [ \"$prev\" = --resume ] && resume=$a; "
      "  prev=$a; "
      "done; "
      "steps() { i=$1; while [ $i -le $2 ]; do "
      "  sleep $3; printf '{\"step\":%d,\"loss\":1.5,\"step_ms\":%s}\\n' $i $4 >> \"$metrics\"; "
      "  i=$((i+1)); done; }; ";
  std::vector<std::string> cmd = {"sh", "-c", prelude + body, log, "train"};
  cmd.insert(cmd.end(), extra.begin(), extra.end());
  return cmd;
}

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Summary {
  int attempts = -1;
  long lost = -1, kept = -1;
  double goodput = -1;  // fraction
};

// Reads the numbers back from the summary line, wherever they sit in it.
Summary parse_summary(const std::string& out) {
  Summary s;
  std::smatch m;
  if (std::regex_search(out, m, std::regex(R"(tetra launch: (\d+) attempts?)")))
    s.attempts = std::stoi(m[1]);
  if (std::regex_search(out, m, std::regex(R"((\d+) steps? lost, (\d+) kept)"))) {
    s.lost = std::stol(m[1]);
    s.kept = std::stol(m[2]);
  }
  if (std::regex_search(out, m, std::regex(R"(goodput ([0-9.]+)%)")))
    s.goodput = std::stod(m[1]) / 100;
  return s;
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("launch: restarts until success, with --resume auto only on reruns") {
  const TempDir tmp;
  const std::string log = tmp / "log";
  // Fails on attempts 0 and 1, succeeds on attempt 2.
  const Launch r =
      launch(concat({"--restarts", "3", "--"},
                    script(log, "[ \"$TETRA_RESTART\" -ge 2 ] || exit 1", {"--steps", "5"})));
  CHECK(r.rc == 0);
  const std::vector<std::string> runs = lines(log);
  REQUIRE(runs.size() == 3);
  for (size_t k = 0; k < runs.size(); ++k) {
    CAPTURE(runs[k]);
    CHECK(runs[k].rfind(std::to_string(k) + " --steps 5 --metrics ", 0) == 0);  // TETRA_RESTART=k
    const bool resumes = contains(runs[k], "--resume auto");
    CHECK(resumes == (k > 0));
    if (k > 0) CHECK(runs[k].size() - runs[k].rfind(" --resume auto") == 14);  // appended last
  }
  CHECK(parse_summary(r.out).attempts == 3);
  CHECK(contains(r.out, "exit 1 before any step, then exit 1 before any step, then exit 0"));
  CHECK(contains(r.err, "restarting with --resume auto"));
}

TEST_CASE("launch: gives up after N restarts and returns the last exit code") {
  const TempDir tmp;
  const std::string log = tmp / "log";
  for (int n : {0, 2}) {
    CAPTURE(n);
    std::remove(log.c_str());
    const Launch r = launch(concat({"--restarts=" + std::to_string(n), "--quiet", "--"},
                                   script(log, "exit $((3 + TETRA_RESTART))")));
    CHECK(r.rc == 3 + n);
    CHECK(lines(log).size() == size_t(n + 1));
    CHECK(parse_summary(r.out).attempts == n + 1);
    CHECK(r.err.empty());  // --quiet
  }
  // The default is 3 restarts.
  std::remove(log.c_str());
  CHECK(launch(concat({"--quiet", "--"}, script(log, "exit 1"))).rc == 1);
  CHECK(lines(log).size() == 4);
}

TEST_CASE("launch: an existing --resume is set to auto on reruns, in either form") {
  const TempDir tmp;
  const std::string log = tmp / "log";
  const std::string ck = tmp / "ck";  // --resume never needs one
  for (const std::vector<std::string>& flag :
       {std::vector<std::string>{"--ckpt-dir", ck, "--resume", "never"},
        std::vector<std::string>{"--ckpt-dir", ck, "--resume=never"}}) {
    std::remove(log.c_str());
    const Launch r = launch(concat(
        {"--quiet", "--"},
        script(log, "echo \"resume=$resume\" >> \"$log\"; [ \"$TETRA_RESTART\" = 1 ]", flag)));
    CHECK(r.rc == 0);
    const std::vector<std::string> got = lines(log);
    REQUIRE(got.size() == 4);
    CHECK(got[1] == "resume=never");
    CHECK(got[3] == "resume=auto");
    CHECK(got[2].find("--resume") == got[2].rfind("--resume"));  // replaced, not appended
  }
}

TEST_CASE("launch: lost and kept steps, goodput") {
  const TempDir tmp;
  const std::string log = tmp / "log", metrics = tmp / "metrics.jsonl";
  // Records of an earlier run in the same file are not this run's.
  {
    std::ofstream old(metrics);
    for (int i = 0; i < 50; ++i) old << "{\"step\":" << i << ",\"step_ms\":99999}\n";
  }
  // Attempt 0 runs steps 0..5 and dies by SIGKILL with a torn record; attempt 1 resumes from
  // a checkpoint at step 4 and runs 4..9. Each step sleeps 0.1 s and reports 100 ms.
  const std::string body =
      "if [ \"$TETRA_RESTART\" = 0 ]; then steps 0 5 0.1 100; printf '{\"step\":6,\"st' >> "
      "\"$metrics\"; kill -9 $$; fi; steps 4 9 0.1 100";
  const tetra::Clock::time_point t0 = tetra::Clock::now();
  const Launch r = launch(concat({"--quiet", "--"}, script(log, body, {"--metrics", metrics})));
  const double wall = tetra::seconds_since(t0);
  CHECK(r.rc == 0);
  const Summary s = parse_summary(r.out);
  CHECK(s.attempts == 2);
  CHECK(s.lost == 2);   // steps 4 and 5 of attempt 0
  CHECK(s.kept == 10);  // steps 0..9
  CHECK(contains(r.out, "signal 9 (Killed) at step 5, then exit 0 at step 9"));
  CHECK(contains(r.out, "1.0 s of kept steps"));
  // 1 s of kept steps in 12 sleeps of 0.1 s plus process start-ups: at most 1/1.2.
  CHECK(s.goodput <= 1.0 / 1.2 + 0.001);
  CHECK(s.goodput >= 0.9 * 1.0 / wall);
  CHECK(s.goodput > 0.5);
  // The user's file keeps what it had, and the torn line was ended so that attempt 1's first
  // record is a line of its own.
  const std::vector<std::string> got = lines(metrics);
  REQUIRE(got.size() == 50 + 6 + 1 + 6);
  CHECK(got[56] == "{\"step\":6,\"st");
  CHECK(got[57].rfind("{\"step\":4,", 0) == 0);
}

TEST_CASE("launch: a temporary metrics file is added when the command has none") {
  const TempDir tmp;
  const std::string log = tmp / "log";
  const Launch r = launch(
      concat({"--quiet", "--"}, script(log, "echo \"$metrics\" >> \"$log\"; steps 0 2 0 7")));
  CHECK(r.rc == 0);
  const std::vector<std::string> got = lines(log);
  REQUIRE(got.size() == 2);
  CHECK(contains(got[0], "--metrics " + got[1]));
  CHECK(!exists(got[1]));  // removed at the end
  const Summary s = parse_summary(r.out);
  CHECK(s.kept == 3);
  CHECK(s.lost == 0);
  CHECK(contains(r.out, "exit 0 at step 2"));
}

TEST_CASE("launch: a killed last attempt returns 128 + signal") {
  const TempDir tmp;
  const std::string log = tmp / "log";
  const Launch r = launch(concat({"--restarts", "0", "--quiet", "--"}, script(log, "kill -9 $$")));
  CHECK(r.rc == 128 + 9);
  CHECK(contains(r.out, "signal 9"));
}

TEST_CASE("launch: usage errors") {
  const TempDir tmp;
  const std::string marker = tmp / "ran";
  const std::vector<std::string> touch = {"touch", marker};
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"--restarts", "3"},
      {"--restarts", "3", "touch", marker},
      {"--"},
      {"--restarts", "-1", "--", "touch", marker},
      {"--restarts", "x", "--", "touch", marker},
      {"--restarts=2.5", "--", "touch", marker},
      {"--restarts"},
      {"--bogus", "--", "touch", marker},
      {"--", "touch", marker, "train", "--metrics"},
  };
  for (const std::vector<std::string>& args : bad) {
    CAPTURE(args.size());
    const Launch r = launch(args);
    CHECK(r.rc == 2);
    CHECK(r.err.rfind("tetra: error: ", 0) == 0);
    CHECK(r.out.empty());
  }
  CHECK(!exists(marker));  // nothing was run
}

TEST_CASE("launch: a command that cannot start is not retried") {
  const Launch r = launch({"--restarts", "3", "--", "/nonexistent/tetra-trainer", "train"});
  CHECK(r.rc == 127);
  CHECK(contains(r.err, "tetra: error: cannot run '/nonexistent/tetra-trainer'"));
  CHECK(r.out.empty());
  // A shell that cannot find its program exits 127: the same, seen from outside.
  const TempDir tmp;
  const std::string log = tmp / "log";
  const Launch s =
      launch(concat({"--restarts", "3", "--"}, script(log, "tetra-no-such-program-xyz")));
  CHECK(s.rc == 127);
  CHECK(lines(log).size() == 1);
  CHECK(contains(s.err, "cannot be run, not restarting"));
}

TEST_CASE("launch: SIGTERM goes to the attempt and stops the restarts") {
  const TempDir tmp;
  const std::string log = tmp / "log";
  // Once the attempt has started, this process gets SIGTERM, as from a job scheduler.
  std::thread sender([&] {
    for (int i = 0; i < 500 && lines(log).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::kill(::getpid(), SIGTERM);
  });
  const tetra::Clock::time_point t0 = tetra::Clock::now();
  const Launch r = launch(concat({"--restarts", "3", "--"}, script(log, "exec sleep 30")));
  sender.join();
  const double wall = tetra::seconds_since(t0);
  // Killed by the signal, not pre-empted after a checkpoint: the supervisor was interrupted.
  CHECK(r.rc == tetra::exit_status::kInterrupted);
  CHECK(lines(log).size() == 1);
  CHECK(wall < 10);
  CHECK(contains(r.err, "not restarting"));
  CHECK(
      contains(r.err, "tetra: error: interrupted by Terminated (the running command was stopped)"));
}

TEST_CASE("launch: steps a restart discards count as lost even when no attempt redoes them") {
  const TempDir tmp;
  const std::string log = tmp / "log";
  // Attempt 0 runs steps 0..7 and dies; attempt 1 resumes from step 4 (a later checkpoint
  // was corrupt), runs 4 and 5 and dies too. Steps 4..7 of attempt 0 were discarded.
  const std::string body =
      "if [ \"$TETRA_RESTART\" = 0 ]; then steps 0 7 0 100; exit 1; fi; steps 4 5 0 100; exit 1";
  const Launch r = launch(concat({"--restarts", "1", "--quiet", "--"}, script(log, body)));
  CHECK(r.rc == 1);
  const Summary s = parse_summary(r.out);
  CHECK(s.lost == 4);
  CHECK(s.kept == 6);  // 0..5, the line the last attempt ended on
  CHECK(contains(r.out, "0.6 s of kept steps"));
}

TEST_CASE(
    "launch: an exported TETRA_RESTART is an outer count; every attempt gets the job's token") {
  const TempDir tmp;
  const std::string log = tmp / "log", vars = tmp / "vars";
  ::setenv("TETRA_RESTART", "2", 1);  // this supervisor runs inside an outer one's restart 2
  ::unsetenv("TETRA_JOB");
  ::unsetenv("SLURM_DISABLE_STATUS");
  const Launch r = launch(concat({"--restarts", "1", "--quiet", "--"},
                                 script(log, "echo \"$TETRA_JOB $SLURM_DISABLE_STATUS\" >> " +
                                                 vars + "; [ \"$TETRA_RESTART\" = 3 ]")));
  ::unsetenv("TETRA_RESTART");
  CHECK(r.rc == 0);
  const std::vector<std::string> runs = lines(log), seen = lines(vars);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].rfind("2 ", 0) == 0);
  CHECK(runs[1].rfind("3 ", 0) == 0);
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == seen[1]);  // one token for the job, and srun stops on one SIGINT
  CHECK(seen[0].size() > 4);
  CHECK(seen[0].substr(seen[0].size() - 2) == " 1");
  // An outer supervisor's token is kept.
  ::setenv("TETRA_JOB", "outer-token", 1);
  std::remove(vars.c_str());
  CHECK(launch(concat({"--quiet", "--"}, script(log, "echo \"$TETRA_JOB\" >> " + vars))).rc == 0);
  ::unsetenv("TETRA_JOB");
  CHECK(lines(vars) == std::vector<std::string>{"outer-token"});
}

TEST_CASE("launch: exit 73 (another job holds --ckpt-dir) is not restarted") {
  const TempDir tmp;
  const std::string log = tmp / "log";
  const Launch r = launch(concat({"--restarts", "3", "--"}, script(log, "exit 73")));
  CHECK(r.rc == 73);
  CHECK(lines(log).size() == 1);
  CHECK(contains(r.err, "another job holds the checkpoint directory, not restarting"));
}

TEST_CASE("launch: a pre-empted attempt (exit 75) resumes; pre-empting the supervisor returns 75") {
  const TempDir tmp;
  const std::string log = tmp / "log";
  // The trainer alone was pre-empted (an injected preempt, a signal to its ranks): restart.
  const Launch alone = launch(
      concat({"--restarts", "1", "--"}, script(log, "[ \"$TETRA_RESTART\" = 1 ] || exit 75")));
  CHECK(alone.rc == 0);
  CHECK(lines(log).size() == 2);
  CHECK(contains(alone.out, "exit 75 before any step, then exit 0"));
  // The job is being stopped (SIGUSR1 before a time limit, as sbatch --signal sends): the
  // attempt gets it, checkpoints and exits 75; the supervisor passes 75 up for its caller to
  // resume the job later.
  std::remove(log.c_str());
  std::thread sender([&] {
    for (int i = 0; i < 500 && lines(log).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the trap is set
    ::kill(::getpid(), SIGUSR1);
  });
  const Launch stopped = launch(concat(
      {"--restarts", "3", "--"},
      script(log,
             "trap 'exit 75' USR1; i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done")));
  sender.join();
  CHECK(stopped.rc == 75);
  CHECK(lines(log).size() == 1);
  CHECK(contains(stopped.err, "not restarting"));
  CHECK(contains(stopped.err, "pre-empted by "));
}

TEST_CASE("launch: the temporary metrics file lies in the command's --ckpt-dir") {
  const TempDir tmp;
  const std::string log = tmp / "log", ck = tmp / "ck";
  const Launch r =
      launch(concat({"--quiet", "--"}, script(log, "echo \"$metrics\" >> \"$log\"; steps 0 2 0 7",
                                              {"--ckpt-dir=" + ck})));
  CHECK(r.rc == 0);
  const std::vector<std::string> got = lines(log);
  REQUIRE(got.size() == 2);
  CHECK(got[1].rfind(ck + "/.tetra_launch_", 0) == 0);
  CHECK(!exists(got[1]));
  CHECK(parse_summary(r.out).kept == 3);
}
