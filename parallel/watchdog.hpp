// The watchdog: when a blocking communication call (a collective, a recv, the wait of a
// non-blocking send or receive) has waited longer than --timeout, it aborts the whole job
// with one message that names the call, its group and the ranks that did not arrive:
//
//   tetra: error: watchdog: all_reduce #57 on group dp_cp (world ranks 0, 2, 4, 6) has
//   waited 10.0 s; ranks that did not arrive: 4 (outside communication)
//
// How it knows: every rank keeps a small board in memory shared with the other ranks of its
// machine (an MPI shared-memory window), holding how many collectives it has entered on each
// group and the call it is in now. Members call a group's collectives in the same order, so
// a rank stuck in the group's call #57 finds the absent members as those whose count is
// below 57. A thread per rank checks its own board a few times a second; it never calls MPI
// except MPI_Abort. Communicators update the board with a few stores per call, no syscall.
//
// A rank can also hang outside any call (a loop in compute, a stalled read): inside a training
// step (a StepWatch's life) a rank that enters no call for longer than the timeout is reported
// too, as making no progress in that step.
//
// Boards are only readable on the same machine: across machines the message still names the
// call and the group, and lists the members on other machines as not checked, with their
// hosts.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tetra::watchdog {

struct Board;  // a rank's progress board, in watchdog.cpp

// Collective over world: every rank calls it with the same timeout; timeout_seconds <= 0
// leaves the watchdog off. Communicators made before or after it are watched alike.
// MPI_Finalize stops it; stop() stops it earlier (collective over the same world too).
void start(MPI_Comm world, double timeout_seconds);
void stop();

// Training step `step` runs while it lives: its start is progress, and until its end the
// rank's progress is watched (what runs outside the steps, such as start-up, checkpoints,
// evaluation and the export, is watched in its calls only). Two stores; nothing while off.
class StepWatch {
 public:
  explicit StepWatch(int64_t step);
  ~StepWatch();
  StepWatch(const StepWatch&) = delete;
  StepWatch& operator=(const StepWatch&) = delete;
};

// Called by the reporting rank after its report and before MPI_Abort: the NCCL
// communicators abort themselves here (ncclCommAbort), so that no GPU stays spinning in a
// collective. One hook; null clears it.
void set_abort_hook(void (*hook)());

enum class Op : uint8_t {
  AllReduce,
  ReduceScatter,
  AllGather,
  Broadcast,
  Barrier,
  Send,
  Recv,
  WaitSend,  // the wait of an isend
  WaitRecv,  // the wait of an irecv
};

// A communicator's group as the watchdog knows it: a name and the members' world ranks.
// Groups with the same name and members share their counts, which keeps them consistent.
class Group {
 public:
  Group(MPI_Comm comm, const std::string& name);  // local, not collective
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

 private:
  friend class Call;
  int slot_;  // this rank's entry for the group; -1 (not watched) past 256 groups alive
  std::vector<int> world_;  // world rank of each group rank
};

// One blocking call, shown to the watchdog for as long as this object lives. peer is the
// group rank of a send or receive's other side (ignored for collectives).
//
// A call queued on a GPU's stream and waited for later (NCCL's, parallel/nccl_comm.cpp) is
// entered once, when it is queued (the first form, whose seq() is the collective's number on
// its group), and shown again with that number while the host waits for it (the second form,
// which enters nothing): the members' counts stay those of the calls they have queued.
class Call {
 public:
  Call(const Group& g, Op op, int peer = -1);
  Call(const Group& g, Op op, int peer, int64_t seq);
  ~Call();
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  int64_t seq() const { return seq_; }  // 0 for a send or receive, or while the watchdog is off

 private:
  void show(const Group& g, Op op, int peer);
  Board* board_ = nullptr;  // null while the watchdog is off
  int64_t seq_ = 0;
};

}  // namespace tetra::watchdog
