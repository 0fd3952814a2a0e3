// Threads per rank come from the cores a rank may run on (its affinity), not from the whole
// machine: a rank pinned to one core runs one thread, and asking for more threads than
// cores is said once.
#include <doctest/doctest.h>

#include <string>
#include <thread>

#include "spawn.hpp"

using namespace tetra::test;

namespace {

const std::string kTrain =
    " train --steps 1 --dim 32 --layers 1 --heads 2 --kv-heads 1 --ffn-dim 64 --seq-len 16";

}  // namespace

TEST_CASE("threads: a rank runs as many threads as the cores it may use") {
  const Spawned pinned = spawn("env -u OMP_NUM_THREADS taskset -c 0 " + tetra_bin() + kTrain);
  REQUIRE(pinned.status == 0);
  CHECK(count(pinned.out, "(1024^3 fp32, 1 thread per rank)") == 1);
  CHECK(count(pinned.err, "warning") == 0);

  const unsigned cores = std::thread::hardware_concurrency();
  if (cores > 1) {
    const Spawned free = spawn("env -u OMP_NUM_THREADS " + tetra_bin() + kTrain);
    REQUIRE(free.status == 0);
    CHECK(count(free.out, "(1024^3 fp32, " + std::to_string(cores) + " threads per rank)") == 1);
  }

  const Spawned over = spawn("OMP_NUM_THREADS=4 taskset -c 0 " + tetra_bin() + kTrain);
  REQUIRE(over.status == 0);
  CHECK(count(over.err, "tetra: warning: 4 threads per rank, but a rank may run on 1 core") == 1);
}
