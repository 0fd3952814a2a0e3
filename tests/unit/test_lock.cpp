// The lock on a checkpoint directory: one holder at a time, named in the refusal; a lock
// whose process is gone (dead, a zombie, its pid reused) is taken over; a supervised
// restart waits for a holder that is still exiting.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "../test_util.hpp"
#include "checkpoint/lock.hpp"
#include "util/clock.hpp"

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

std::string holder_text(const std::string& host, int64_t pid, int64_t start) {
  return "{\"host\":\"" + host + "\",\"pid\":" + std::to_string(pid) +
         ",\"start_time\":" + std::to_string(start) + "}\n";
}

std::string my_host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace

TEST_CASE("lock: one holder; a second is refused with the holder's host and pid") {
  TempDir tmp;
  const std::string dir = tmp.path.string(), lock = tmp.file("lock");
  {
    const ckpt::DirLock first(dir, 0);
    CHECK(read_text(lock) == ckpt::lock_text(int(::getpid())));
    const std::string err = error_of([&] { ckpt::DirLock second(dir, 0.3); });
    CHECK(err.find("checkpoint directory '" + dir + "' is in use by another job (pid " +
                   std::to_string(::getpid()) + " on host " + my_host() + ")") == 0);
    CHECK(read_text(lock) == ckpt::lock_text(int(::getpid())));  // untouched
  }
  CHECK_FALSE(std::filesystem::exists(lock));  // released
  { const ckpt::DirLock again(dir, 0); }
}

TEST_CASE("lock: a stale lock is taken over, a foreign or unreadable one is not") {
  TempDir tmp;
  const std::string dir = tmp.path.string(), lock = tmp.file("lock");
  const std::string mine = ckpt::lock_text(int(::getpid()));

  SUBCASE("a dead pid") {
    const pid_t child = sleeper(0);
    ::waitpid(child, nullptr, 0);
    write_text(lock, holder_text(my_host(), child, 1));
  }
  SUBCASE("a zombie: exited, not yet reaped") {
    const pid_t child = sleeper(0.1);
    write_text(lock, ckpt::lock_text(int(child)));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    {
      const ckpt::DirLock taken(dir, 0);
      CHECK(read_text(lock) == mine);
    }
    ::waitpid(child, nullptr, 0);
    write_text(lock, holder_text(my_host(), child, 1));
  }
  SUBCASE("a reused pid: this process, started at another time") {
    write_text(lock, holder_text(my_host(), ::getpid(), 1));
  }
  {
    const ckpt::DirLock taken(dir, 0);
    CHECK(read_text(lock) == mine);
  }

  write_text(lock, holder_text("elsewhere.example", 4242, 7));
  CHECK(error_of([&] { ckpt::DirLock l(dir, 0); }) ==
        "checkpoint directory '" + dir +
            "' is in use by another job (pid 4242 on host elsewhere.example, which this "
            "machine cannot check); if that job is gone, delete '" +
            lock + "'");
  write_text(lock, "garbage");
  CHECK(error_of([&] { ckpt::DirLock l(dir, 0); }).find("cannot read") != std::string::npos);
  CHECK(read_text(lock) == "garbage");
}

TEST_CASE("lock: a restart waits for a holder that is still exiting") {
  TempDir tmp;
  const std::string dir = tmp.path.string();
  const pid_t child = sleeper(1.5);
  write_text(tmp.file("lock"), ckpt::lock_text(int(child)));
  CHECK(error_of([&] { ckpt::DirLock l(dir, 0); }).find("in use by another job") !=
        std::string::npos);
  std::thread reaper([&] { ::waitpid(child, nullptr, 0); });
  const tetra::Clock::time_point t0 = tetra::Clock::now();
  {
    const ckpt::DirLock waited(dir, 20);
    const double s = tetra::seconds_since(t0);
    CHECK(s > 0.5);
    CHECK(s < 10);
  }
  reaper.join();
}
