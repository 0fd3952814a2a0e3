// A communicator for one group of ranks (tp, cp, pp, dp or dp_cp). Collectives work on
// tensors in the backend's memory. The MPI communicator hands host tensors to MPI as they
// are and stages any other memory (a GPU's) through host buffers by the backend's own
// copies; a group of one (self_comm.hpp) does nothing or copies through the backend. Host
// code never reads or writes backend memory itself. Every call adds its bytes and seconds to
// the group's counters, which the metrics and the trace read.
//
// Bytes are counted as a ring algorithm moves them out of each rank, so that the numbers
// are the textbook volumes: all-reduce 2(N-1)/N * size, reduce-scatter and all-gather
// (N-1)/N * (full size), broadcast and send the payload.
//
// Queued collectives (--overlap on): queue_reduce_scatter and queue_all_gather return at once
// and run while the rank computes, in the order they were queued: on the MPI communicator on
// a thread of its own (parallel/comm_queue.hpp), on NCCL on a stream of its own. Each is the
// blocking call's own call on the same tensors, so its result is the blocking call's, bit for
// bit; the tensors must stay untouched until the request's wait(). A group of one, or a
// communicator without a queue, runs them at once (wait() then does nothing).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/tensor.hpp"

namespace tetra {

class Backend;

enum class ReduceOp { Sum, Max };

enum class CommOp { AllReduce, ReduceScatter, AllGather, Broadcast, SendRecv, Barrier, kCount };

struct CommStats {
  int64_t calls = 0;
  double bytes = 0;    // ring bytes sent by this rank
  double seconds = 0;  // wall time inside calls, waiting included
  // Queued collectives: the time they ran beside the rank's compute (on the communication
  // thread or stream), and the part of `seconds` the rank spent waiting for them. What ran
  // while the rank did not wait was hidden.
  double queued_seconds = 0, waited_seconds = 0;
  int64_t by_op[int(CommOp::kCount)] = {};  // calls of each kind
  int64_t count(CommOp op) const { return by_op[int(op)]; }
  double hidden_seconds() const {
    return queued_seconds > waited_seconds ? queued_seconds - waited_seconds : 0;
  }
  void clear() { *this = CommStats{}; }
};

class Comm {
 public:
  // A pending non-blocking send or receive.
  class Request {
   public:
    virtual ~Request() = default;
    virtual void wait() = 0;
  };

  virtual ~Comm() = default;
  virtual const char* kind() const = 0;  // "mpi", "nccl" or "self" (a group of one)
  virtual int rank() const = 0;
  virtual int size() const = 0;
  const std::string& name() const { return name_; }

  virtual void all_reduce(Tensor x, ReduceOp op = ReduceOp::Sum) = 0;
  // in holds size() equal parts; part r of the sum lands in out on rank r.
  virtual void reduce_scatter(Tensor out, const Tensor& in) = 0;
  // out holds size() parts; rank r's in becomes part r.
  virtual void all_gather(Tensor out, const Tensor& in) = 0;
  virtual void broadcast(Tensor x, int root) = 0;
  virtual void send(const Tensor& x, int peer, int tag) = 0;
  virtual void recv(Tensor x, int peer, int tag) = 0;
  virtual std::unique_ptr<Request> isend(const Tensor& x, int peer, int tag) = 0;
  virtual std::unique_ptr<Request> irecv(Tensor x, int peer, int tag) = 0;
  virtual void barrier() = 0;
  // All-reduce of host doubles (loss sums, norms): small, counted like the rest.
  virtual void all_reduce_host(double* x, int n, ReduceOp op = ReduceOp::Sum) = 0;

  // reduce_scatter and all_gather, queued (see above). Here: run at once, done when returned.
  virtual std::unique_ptr<Request> queue_reduce_scatter(Tensor out, const Tensor& in);
  virtual std::unique_ptr<Request> queue_all_gather(Tensor out, const Tensor& in);
  // Makes what the queued calls need (the MPI thread's duplicate communicator, NCCL's stream
  // and second communicator), collectively over the group, at a point every member reaches
  // in the same order: the user of the queue opens it when made, not in the middle of a step.
  // The first queued call opens it otherwise. Here: nothing to make.
  virtual void open_queue() {}

  // The backend whose memory the tensors live in: needed for tensors that are not in host
  // memory, and for local copies (make_grid sets it).
  void bind_backend(Backend* be) { be_ = be; }

  CommStats stats;

 protected:
  explicit Comm(std::string name) : name_(std::move(name)) {}
  std::string name_;
  Backend* be_ = nullptr;
};

}  // namespace tetra
