// Threads per rank come from the cores a rank may run on (its affinity), not from the whole
// machine: a rank pinned to one core runs one thread, and asking for more threads than
// cores is said once.
#include <doctest/doctest.h>

#include <cstdio>
#include <regex>
#include <string>
#include <thread>

#include "../support/spawn.hpp"

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

TEST_CASE("threads: the thread count changes no bit of a run, fp32 or bf16") {
  // Odd sizes so that matmul's tiles are ragged; three steps so that Adam runs too. The
  // metrics file writes losses and gradient norms with every bit.
  const std::string args =
      " train --steps 3 --dim 96 --layers 2 --heads 4 --kv-heads 2 --ffn-dim 200 --seq-len 24"
      " --global-batch 6 --peak-tflops 1";
  const std::regex field(R"re("(grad_norm|loss)":[-0-9.eE+]+)re");
  for (const std::string dtype : {"fp32", "bf16"}) {
    CAPTURE(dtype);
    std::string seen[3];
    for (int t = 1; t <= 3; ++t) {
      const TempDir tmp;
      const std::string metrics = tmp / ("threads_" + dtype + std::to_string(t) + ".jsonl");
      const Spawned r = spawn("OMP_NUM_THREADS=" + std::to_string(t) + " " + tetra_bin() + args +
                              " --dtype " + dtype + " --metrics " + metrics);
      REQUIRE(r.status == 0);
      const std::string text = slurp(metrics);
      for (auto it = std::sregex_iterator(text.begin(), text.end(), field);
           it != std::sregex_iterator(); ++it)
        seen[t - 1] += it->str() + "\n";
    }
    CHECK(count(seen[0], "loss") == 3);
    CHECK(seen[0] == seen[1]);
    CHECK(seen[0] == seen[2]);
  }
}

TEST_CASE("threads: ranks that share an affinity mask divide its cores") {
  // Two ranks unbound by mpirun but confined to one set of cores: each takes its share, not
  // the whole set (which would run twice the threads the cores have). On a machine of fewer
  // than 4 cores the set is one core, and one thread each is all there is to see.
  const unsigned cores = std::thread::hardware_concurrency();
  const int set = cores >= 4 ? 4 : 1;
  const std::string mask = set == 4 ? "0-3" : "0";
  const Spawned r = spawn("env -u OMP_NUM_THREADS taskset -c " + mask + " " + mpirun(2) +
                          "--bind-to none " + tetra_bin() + kTrain);
  REQUIRE(r.status == 0);
  const int each = set / 2 > 0 ? set / 2 : 1;
  CHECK(count(r.out, "(1024^3 fp32, " + std::to_string(each) + " thread" + (each > 1 ? "s" : "") +
                         " per rank)") == 1);
  CHECK(count(r.err, "warning") == 0);
}
