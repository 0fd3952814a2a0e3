// Binding that costs half the speed is said (issue 24, class 8). Open MPI binds each rank of a
// job of one or two to a single core unless told otherwise, so `mpirun -np 1` trained on one
// core of two, at half the speed of a direct run, without a word. When the launcher bound a
// rank to fewer cores than its share of the machine and no binding was asked for, tetra says
// so at start-up, with the fix; an explicit --bind-to (whatever it is) is the user's choice.
#include <doctest/doctest.h>

#include <thread>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"

using namespace tetra::test;

namespace {

const std::string kRun =
    " train --dim 32 --layers 1 --heads 2 --kv-heads 1 --ffn-dim 64 --seq-len 16 --global-batch 2"
    " --steps 1 --peak-tflops 1";
const std::string kWarning = "tetra: warning: mpirun bound rank 0 to 1 core";

}  // namespace

TEST_CASE("binding: a rank mpirun bound to fewer cores than its share is told the fix") {
  if (std::thread::hardware_concurrency() < 2) {
    MESSAGE("skipped: one core, so a rank bound to one core has its whole share");
    return;
  }
  const Spawned bound = spawn(mpirun(1) + tetra_bin() + kRun, 60);
  CAPTURE(bound.err);
  CHECK(bound.status == 0);
  CHECK(count(bound.err, kWarning) == 1);
  CHECK(count(bound.err, "pass --bind-to none to mpirun") == 1);
  // Asked for: no warning, whether it binds or not.
  for (const std::string how : {"--bind-to none ", "--bind-to core "}) {
    CAPTURE(how);
    const Spawned r = spawn(mpirun(1) + how + tetra_bin() + kRun, 60);
    CHECK(r.status == 0);
    CHECK(count(r.err, "mpirun bound rank") == 0);
  }
  // Two ranks, each bound to one core: said only where a rank's share is more than one core
  // (on two cores, one each is the share).
  const Spawned two = spawn(mpirun(2) + tetra_bin() + kRun + " --dp 2", 60);
  CAPTURE(two.err);
  CHECK(two.status == 0);
  CHECK(count(two.err, "mpirun bound rank") ==
        (std::thread::hardware_concurrency() / 2 > 1 ? 1 : 0));
  // A direct run is not launched, so not bound by a launcher.
  const Spawned direct = spawn(tetra_bin() + kRun, 60);
  CHECK(direct.status == 0);
  CHECK(count(direct.err, "mpirun bound rank") == 0);
}
