// The lock notices a second holder (issue 38, class 6). A job that copies a live job's token
// and claims a restart from another PID namespace cannot check the holder, so it takes the
// lock over; the first holder reads its lock again before each checkpoint and stops, exit
// status 73 and one line, at its next checkpoint. Neither moves the other's checkpoints to
// .abandoned, and the checkpoint `latest` names verifies. Needs unshare(1) with a PID
// namespace (root, or user namespaces); skipped where there is none.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"

using namespace tetra::test;
namespace fs = std::filesystem;

TEST_CASE(
    "split brain: the first holder stops at its next checkpoint, exit 73; nothing abandoned") {
  if (spawn("unshare --pid --fork --mount-proc true", 20).status != 0) {
    MESSAGE("skipped: unshare cannot make a PID namespace here");
    return;
  }
  TempDir d;
  const std::string ck = d / "ck";
  // The same command for both: 1,000 steps, a checkpoint every 10; the first job's rank 0
  // sleeps 50 ms a step (an injected straggler, first attempt only), so that it is still
  // running when the second starts, and reaches its next checkpoint within 10 of its steps,
  // while the second still holds the lock (with 200 steps a loaded CI machine once let the
  // second finish and release the lock first, and the first said "removed").
  const std::string args = tiny_model_flags({.steps = 1000}) + " --ckpt-dir " + ck +
                           " --ckpt-every 10 --inject-failure 0@1:slow=50";
  const std::string first = "TETRA_JOB=split " + tetra_bin() + " train " + args + " >" +
                            (d / "a.out") + " 2>" + (d / "a.err") + "; echo $? >" + (d / "a.rc");
  const std::string second = "TETRA_JOB=split TETRA_RESTART=1 unshare --pid --fork --mount-proc " +
                             tetra_bin() + " train " + args + " --resume auto";
  // The first in the background; the second once the first has a checkpoint.
  const Spawned r =
      spawn("(" + first + ") & for i in $(seq 600); do [ -s " + ck + "/latest ] && grep -q step_ " +
                ck + "/latest && break; sleep 0.1; " + "done; " + second + "; echo second $?; wait",
            180);
  CAPTURE(r.out);
  CAPTURE(r.err);
  const std::string a_err = slurp(d / "a.err");
  CAPTURE(a_err);
  CHECK(r.out.find("second 0") != std::string::npos);
  CHECK(r.err.find("taking over the lock of checkpoint directory '" + ck +
                   "' left by job launch:split, pid ") != std::string::npos);
  CHECK(r.err.find("tetra cannot check from here that it has stopped (it ran in another PID "
                   "namespace): if it still runs, it stops at its next checkpoint") !=
        std::string::npos);
  // The first: exit 73, one line naming the second as the new holder.
  CHECK(slurp(d / "a.rc") == "73\n");
  CHECK(count(a_err, "tetra: error:") == 1);
  CHECK(a_err.find("tetra: error: checkpoint directory '" + ck +
                   "' is no longer this job's: its lock was taken over by job launch:split, "
                   "attempt 1, pid ") != std::string::npos);
  // Nothing set aside by either; `latest` names the second's last checkpoint, which verifies.
  CHECK(r.err.find("rather than replace it") == std::string::npos);
  CHECK(a_err.find("rather than replace it") == std::string::npos);
  for (const auto& e : fs::directory_iterator(ck))
    CHECK_MESSAGE(e.path().filename().string().find("abandoned") == std::string::npos, e.path());
  CHECK(slurp(ck + "/latest") == "step_00001000\n");
  const Spawned v = spawn(tetra_bin() + " ckpt verify " + ck);
  CAPTURE(v.err);
  CHECK(v.status == 0);
  CHECK(v.out == ck + "/step_00001000: ok\n");
}
