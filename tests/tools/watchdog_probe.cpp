// A small MPI program that hangs one rank on purpose, for the watchdog tests (run with 4
// ranks): `watchdog_probe MODE [TIMEOUT]`.
//
// The ranks split into two groups of alternate world ranks, {0, 2} and {1, 3}, so that
// group ranks differ from world ranks. The even group keeps talking the whole time (and so
// must never trip the watchdog); in the odd group, world rank 1 stops answering for 60 s:
//   all_reduce  rank 1 skips the 4th all-reduce on group dp_cp; rank 3 waits in it
//   recv        rank 1 skips the 4th send on group pp; rank 3 waits in recv
//   wait        the same, rank 3 waiting on an irecv
//   queued      as all_reduce, each all-reduce entered when it is queued and waited for
//               later, as the NCCL communicator does: rank 3 waits in the 4th, shown as #4
//   overlap     each reduce-scatter queued on the MPI communicator's thread (--overlap)
//               and waited for a little later: rank 3 waits for the 4th, which rank 1
//               has not queued, shown as #4
//   quiet       nobody hangs, but every rank computes (sleeps) longer than the timeout
//               between calls and rank 1 arrives late, by less than the timeout: the run
//               must end normally, stopping the watchdog in MPI_Finalize
// `watchdog_probe bench` (2 ranks) prints the cost of a size-1 all-reduce with and without
// the watchdog, and of the watchdog's bookkeeping alone.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "parallel/mpi_comm.hpp"
#include "parallel/watchdog.hpp"
#include "util/clock.hpp"

namespace {

using namespace tetra;

void sleep_s(double s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

// The even group: small all-reduces until rank 1's 60 s stall would be over.
void keep_busy(Comm& c) {
  float x = 1;
  for (const auto end = Clock::now() + std::chrono::seconds(60); Clock::now() < end;) {
    c.all_reduce(Tensor(&x, {1}));
    sleep_s(0.01);
  }
}

// The odd group: three rounds that go through, then rank 1 stalls in the fourth.
void stall_in_fourth(Comm& c, const std::string& mode, int world_rank) {
  float x = 1;
  const Tensor t(&x, {1});
  for (int round = 0; round < 4; ++round) {
    if (round == 3 && world_rank == 1) sleep_s(60);
    if (mode == "all_reduce") {
      c.all_reduce(t);
    } else if (c.rank() == 0) {
      c.send(t, 1, round);
    } else if (mode == "recv") {
      c.recv(t, 0, round);
    } else {
      c.irecv(t, 0, round)->wait();
    }
  }
}

// The odd group as the NCCL communicator sees its calls: each all-reduce entered when queued
// (its number taken then), a little later waited for under that number (MPI's call stands for
// the GPU's; a group of the same name and members shares the communicator's counts).
void stall_in_fourth_queued(MPI_Comm half, int world_rank) {
  const watchdog::Group g(half, "dp_cp");
  float x = 1;
  for (int round = 0; round < 4; ++round) {
    if (round == 3 && world_rank == 1) sleep_s(60);
    const int64_t seq = watchdog::Call(g, watchdog::Op::AllReduce).seq();
    sleep_s(0.01);  // the host queues more work before its next wait
    const watchdog::Call wait(g, watchdog::Op::AllReduce, -1, seq);
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_FLOAT, MPI_SUM, half);
  }
}

// The odd group under --overlap: the communicator's own queued calls (parallel/comm_queue.hpp).
void stall_in_fourth_overlapped(Comm& c, int world_rank) {
  float in[2] = {1, 1}, out = 0;
  for (int round = 0; round < 4; ++round) {
    if (round == 3 && world_rank == 1) sleep_s(60);
    const auto r = c.queue_reduce_scatter(Tensor(&out, {1}), Tensor(in, {2}));
    sleep_s(0.01);  // the rank computes before it needs the result
    r->wait();
  }
}

void quiet(Comm& c, int world_rank, double timeout) {
  float x = 1;
  for (int round = 0; round < 3; ++round) {
    sleep_s(1.5 * timeout);                       // compute: outside calls, never counted
    if (world_rank == 1) sleep_s(0.5 * timeout);  // late, but within the timeout
    c.all_reduce(Tensor(&x, {1}));
  }
}

double seconds_per_all_reduce(Comm& c, int n) {
  float x = 1;
  c.barrier();
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) c.all_reduce(Tensor(&x, {1}));
  return seconds_since(t0) / n;
}

void bench(int world_rank) {
  const int n = 100000;
  auto world = make_mpi_comm(MPI_COMM_WORLD, "world");
  seconds_per_all_reduce(*world, n / 10);  // warm-up
  // Best of five, alternating, so that both see the same machine (and start / stop repeat).
  double off = 1, on = 1;
  for (int rep = 0; rep < 5; ++rep) {
    off = std::min(off, seconds_per_all_reduce(*world, n));
    watchdog::start(MPI_COMM_WORLD, 60);
    on = std::min(on, seconds_per_all_reduce(*world, n));
    watchdog::stop();
  }
  watchdog::start(MPI_COMM_WORLD, 60);
  const watchdog::Group group(MPI_COMM_WORLD, "bench");
  const auto t0 = Clock::now();
  for (int i = 0; i < 10 * n; ++i) watchdog::Call call(group, watchdog::Op::AllReduce);
  const double alone = seconds_since(t0) / (10 * n);
  watchdog::stop();
  if (world_rank == 0)
    std::printf(
        "size-1 all_reduce: %.0f ns without the watchdog, %.0f ns with it; "
        "its bookkeeping alone: %.1f ns per call\n",
        off * 1e9, on * 1e9, alone * 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &threads);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string mode = argc > 1 ? argv[1] : "";
  const double timeout = argc > 2 ? std::atof(argv[2]) : 2;
  if (mode == "bench") {
    bench(rank);
  } else {
    watchdog::start(MPI_COMM_WORLD, timeout);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Comm odd;
    MPI_Comm_dup(half, &odd);
    auto group = make_mpi_comm(
        half, mode == "all_reduce" || mode == "queued" || mode == "overlap" ? "dp_cp" : "pp");
    if (mode == "quiet") {
      quiet(*group, rank, timeout);
    } else if (rank % 2 == 0) {
      keep_busy(*group);
    } else if (mode == "queued") {
      stall_in_fourth_queued(odd, rank);
    } else if (mode == "overlap") {
      stall_in_fourth_overlapped(*group, rank);
    } else {
      stall_in_fourth(*group, mode, rank);
    }
    if (rank == 0) std::printf("watchdog probe: %s run finished\n", mode.c_str());
    MPI_Comm_free(&odd);
  }
  MPI_Finalize();
  return 0;
}
