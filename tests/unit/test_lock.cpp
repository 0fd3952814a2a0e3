// The lock on a checkpoint directory: one holder at a time, named in the refusal (exit status
// 73, not 2); a lock whose process is gone (dead, a zombie, its pid reused) is taken over; a
// restart of the same job takes it over from another host; a holder this machine cannot check
// (another host, another PID namespace) is refused with the command that breaks the lock; a
// supervised restart waits for a holder that is still exiting; without hard links the lock is
// created exclusively.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "../support/test_util.hpp"
#include "checkpoint/lock.hpp"
#include "util/clock.hpp"
#include "util/json.hpp"

using namespace tetra;
using tetra::test::error_of;
using tetra::test::TempDir;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// A child that sleeps `seconds` and exits; the caller reaps it.
pid_t sleeper(double seconds) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::usleep(useconds_t(seconds * 1e6));
    ::_exit(0);
  }
  REQUIRE(pid > 0);
  return pid;
}

// This process's lock text with some fields replaced: another host, job or namespace.
std::string holder_text(const json& changes, int pid = int(::getpid())) {
  json v = json::parse(ckpt::lock_text("", pid));
  for (const auto& [k, x] : changes.items()) v[k] = x;
  return v.dump() + "\n";
}

std::string my_host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

// The exit status a refusal carries (0 when nothing is thrown) and its message.
std::pair<int, std::string> refusal(const std::string& dir, const ckpt::LockRequest& req) {
  try {
    ckpt::DirLock l(dir, req);
  } catch (const ckpt::LockedError& e) {
    return {e.status, e.what()};
  }
  return {0, ""};
}

}  // namespace

TEST_CASE("lock: one holder; a second is refused with the holder, exit status 73") {
  TempDir tmp;
  const std::string dir = tmp.path.string(), lock = tmp.file("lock");
  {
    const ckpt::DirLock first(dir, {"slurm:c/41", false, 0});
    CHECK(read_text(lock) == ckpt::lock_text("slurm:c/41", int(::getpid())));
    const auto [status, err] = refusal(dir, {"slurm:c/42", false, 0.3});
    CHECK(status == exit_status::kLocked);
    CHECK(status != 2);
    CHECK(err.find("checkpoint directory '" + dir +
                   "' is in use by another job (job slurm:c/41, pid " + std::to_string(::getpid()) +
                   " on host " + my_host() + ")") == 0);
    // The same job on this host, still alive, is refused too (a second step of one allocation).
    CHECK(refusal(dir, {"slurm:c/41", true, 0}).first == exit_status::kLocked);
    CHECK(read_text(lock) == ckpt::lock_text("slurm:c/41", int(::getpid())));  // untouched
  }
  CHECK_FALSE(std::filesystem::exists(lock));  // released
  { const ckpt::DirLock again(dir, {}); }
}

TEST_CASE("lock: a stale lock is taken over, an unreadable one is not") {
  TempDir tmp;
  const std::string dir = tmp.path.string(), lock = tmp.file("lock");
  const std::string mine = ckpt::lock_text("", int(::getpid()));

  SUBCASE("a dead pid") {
    const pid_t child = sleeper(0);
    ::waitpid(child, nullptr, 0);
    write_text(lock, holder_text({{"start_time", 1}}, child));
  }
  SUBCASE("a zombie: exited, not yet reaped") {
    const pid_t child = sleeper(0.1);
    write_text(lock, ckpt::lock_text("", int(child)));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    {
      const ckpt::DirLock taken(dir, {});
      CHECK(read_text(lock) == mine);
    }
    ::waitpid(child, nullptr, 0);
    write_text(lock, holder_text({{"start_time", 1}}, child));
  }
  SUBCASE("a reused pid: this process, started at another time") {
    write_text(lock, holder_text({{"start_time", 1}}));
  }
  SUBCASE("a lock of an older tetra: no job, boot id or namespace") {
    write_text(lock, "{\"host\":\"" + my_host() + "\",\"pid\":" + std::to_string(::getpid()) +
                         ",\"start_time\":1}\n");
  }
  {
    const ckpt::DirLock taken(dir, {});
    CHECK(read_text(lock) == mine);
  }
  write_text(lock, "garbage");
  std::filesystem::last_write_time(
      lock, std::filesystem::file_time_type::clock::now() - std::chrono::seconds(60));
  CHECK(error_of([&] { ckpt::DirLock l(dir, {}); }).find("cannot read") != std::string::npos);
  CHECK(read_text(lock) == "garbage");
}

TEST_CASE("lock: a holder this machine cannot check is refused with the command to break it") {
  TempDir tmp;
  const std::string dir = tmp.path.string(), lock = tmp.file("lock");
  const pid_t dead = sleeper(0);
  ::waitpid(dead, nullptr, 0);
  const std::string breaks =
      "which this machine cannot check); if that job is gone, break the "
      "lock with: rm '" +
      lock + "'";
  SUBCASE("another host") {
    write_text(lock, holder_text({{"host", "elsewhere.example"}, {"job", "slurm:c/7"}}, 4242));
    const auto [status, err] = refusal(dir, {"slurm:c/8", true, 0});
    CHECK(status == exit_status::kLocked);
    CHECK(err == "checkpoint directory '" + dir +
                     "' is in use by another job (job slurm:c/7, pid 4242 on host "
                     "elsewhere.example, " +
                     breaks);
  }
  SUBCASE("another PID namespace of this host: a dead pid here says nothing about it there") {
    write_text(lock, holder_text({{"pid_ns", "pid:[1]"}}, dead));
    const auto [status, err] = refusal(dir, {"", false, 0});
    CHECK(status == exit_status::kLocked);
    CHECK(err.find("on host " + my_host() + " in another PID namespace (a container), " + breaks) !=
          std::string::npos);
  }
  SUBCASE("another boot id: a reboot, or another machine of the same name") {
    write_text(lock, holder_text({{"boot_id", "00000000-0000-0000-0000-000000000000"}}, dead));
    CHECK(
        refusal(dir, {"", false, 0}).second.find("or on another machine of that name, " + breaks) !=
        std::string::npos);
  }
  CHECK_FALSE(read_text(lock).empty());  // untouched
}

TEST_CASE("lock: a restart of the same job takes the lock over from another host") {
  TempDir tmp;
  const std::string dir = tmp.path.string(), lock = tmp.file("lock");
  write_text(lock, holder_text({{"host", "h1"}, {"job", "launch:abc"}}, 4242));
  // The first attempt of a job with the same identity is not a restart: refused.
  CHECK(refusal(dir, {"launch:abc", false, 0}).first == exit_status::kLocked);
  CHECK(refusal(dir, {"launch:xyz", true, 0}).first == exit_status::kLocked);
  CHECK(refusal(dir, {"", true, 0}).first == exit_status::kLocked);
  {
    const ckpt::DirLock taken(dir, {"launch:abc", true, 0, 1});
    CHECK(read_text(lock) == ckpt::lock_text("launch:abc", int(::getpid()), 1));
  }
  CHECK_FALSE(std::filesystem::exists(lock));
}

TEST_CASE(
    "lock: an attempt takes over only an earlier attempt's lock, and says what it could not "
    "check") {
  TempDir tmp;
  const std::string dir = tmp.path.string(), lock = tmp.file("lock");
  // Attempt 2 of the job holds it, in another PID namespace: attempts 0 to 2 are refused.
  write_text(lock,
             holder_text({{"pid_ns", "pid:[1]"}, {"job", "launch:abc"}, {"attempt", 2}}, 4242));
  for (int attempt : {0, 1, 2}) {
    CAPTURE(attempt);
    const auto [status, err] = refusal(dir, {"launch:abc", true, 0, attempt});
    CHECK(status == exit_status::kLocked);
    CHECK(err.find("attempt 2 of this job, which this run (attempt " + std::to_string(attempt) +
                   ") does not follow") != std::string::npos);
  }
  // Attempt 3 takes it over, and the warning says what it could not check.
  const std::string warned = dir + "/warned";
  {
    const int saved = ::dup(2);
    const int file = ::open(warned.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(file, 2);
    {
      const ckpt::DirLock taken(dir, {"launch:abc", true, 0, 3});
      CHECK(read_text(lock) == ckpt::lock_text("launch:abc", int(::getpid()), 3));
    }
    ::dup2(saved, 2);
    ::close(file);
    ::close(saved);
  }
  const std::string text = read_text(warned);
  CHECK(text.find("left by job launch:abc, attempt 2, pid 4242 on host " + my_host() +
                  " in another PID namespace (a container), an earlier attempt of this job (this "
                  "is attempt 3); tetra cannot check from here that it has stopped (it ran in "
                  "another PID namespace): if it still runs, it stops at its next checkpoint") !=
        std::string::npos);
}

TEST_CASE("lock: a holder whose lock was taken over or removed finds out (exit status 73)") {
  TempDir tmp;
  const std::string dir = tmp.path.string(), lock = tmp.file("lock");
  const ckpt::DirLock held(dir, {"launch:abc", false, 0});
  CHECK_NOTHROW(held.check_held());
  // Another attempt, elsewhere, wrote its own lock in its place.
  write_text(lock, holder_text({{"host", "h2"}, {"job", "launch:abc"}, {"attempt", 1}}, 77));
  try {
    held.check_held();
    FAIL("check_held did not throw");
  } catch (const ckpt::LockedError& e) {
    CHECK(e.status == exit_status::kLocked);
    CHECK(std::string(e.what()) ==
          "checkpoint directory '" + dir +
              "' is no longer this job's: its lock was taken over by job launch:abc, attempt 1, "
              "pid 77 on host h2; stopping without saving this checkpoint, so that two jobs do "
              "not write one directory");
  }
  std::filesystem::remove(lock);
  CHECK(error_of([&] { held.check_held(); }).find("its lock was removed") != std::string::npos);
  // A takeover moves the lock aside before it links its own: a holder that looks in between
  // names the new holder, not a removal.
  std::thread taker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    write_text(lock + ".new",
               holder_text({{"host", "h3"}, {"job", "launch:abc"}, {"attempt", 2}}, 78));
    std::filesystem::rename(lock + ".new", lock);  // whole, as the takeover's link is
  });
  const std::string seen = error_of([&] { held.check_held(); });
  taker.join();
  CHECK(seen.find("its lock was taken over by job launch:abc, attempt 2, pid 78 on host h3") !=
        std::string::npos);
  // A taker the machine's load holds up past that second: while the lock it moved aside is
  // there (`lock.<pid>.stale`), the holder keeps looking.
  std::filesystem::remove(lock);
  write_text(lock + ".79.stale", holder_text({{"host", "h3"}, {"job", "launch:abc"}}, 78));
  std::thread slow_taker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    write_text(lock + ".new",
               holder_text({{"host", "h4"}, {"job", "launch:abc"}, {"attempt", 3}}, 79));
    std::filesystem::rename(lock + ".new", lock);
    std::filesystem::remove(lock + ".79.stale");
  });
  const std::string late = error_of([&] { held.check_held(); });
  slow_taker.join();
  CHECK(late.find("its lock was taken over by job launch:abc, attempt 3, pid 79 on host h4") !=
        std::string::npos);
}

TEST_CASE("lock: the job identity is Slurm's job id, else tetra launch's token") {
  ::setenv("SLURM_JOB_ID", "77", 1);
  ::setenv("SLURM_CLUSTER_NAME", "lab", 1);
  ::setenv("TETRA_JOB", "tok", 1);
  CHECK(ckpt::job_identity() == "slurm:lab/77");
  ::unsetenv("SLURM_JOB_ID");
  CHECK(ckpt::job_identity() == "launch:tok");
  ::unsetenv("TETRA_JOB");
  ::unsetenv("SLURM_CLUSTER_NAME");
  CHECK(ckpt::job_identity() == "");
}

TEST_CASE("lock: a restart waits for a holder that is still exiting") {
  TempDir tmp;
  const std::string dir = tmp.path.string();
  const pid_t child = sleeper(1.5);
  write_text(tmp.file("lock"), ckpt::lock_text("", int(child)));
  CHECK(refusal(dir, {}).second.find("in use by another job") != std::string::npos);
  std::thread reaper([&] { ::waitpid(child, nullptr, 0); });
  const tetra::Clock::time_point t0 = tetra::Clock::now();
  {
    const ckpt::DirLock waited(dir, {"", true, 20});
    const double s = tetra::seconds_since(t0);
    CHECK(s > 0.5);
    CHECK(s < 10);
  }
  reaper.join();
}

TEST_CASE(
    "lock: without hard links, created exclusively; a lock still being written is waited for") {
  TempDir tmp;
  const std::string lock = tmp.file("lock");
  CHECK(ckpt::create_exclusive(lock, "one\n") == 0);
  CHECK(ckpt::create_exclusive(lock, "two\n") == EEXIST);
  CHECK(read_text(lock) == "one\n");
  // An exclusive creator writes after it creates: a fresh empty file is a lock being written.
  write_text(lock, "");
  const pid_t dead = sleeper(0);
  ::waitpid(dead, nullptr, 0);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    write_text(lock, holder_text({{"start_time", 1}}, dead));
  });
  {
    const ckpt::DirLock taken(tmp.path.string(), {});
    CHECK(read_text(lock) == ckpt::lock_text("", int(::getpid())));
  }
  writer.join();
}
