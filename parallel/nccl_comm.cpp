#include "parallel/nccl_comm.hpp"

#ifdef TETRA_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "parallel/mpi_comm.hpp"
#include "parallel/timed.hpp"
#include "parallel/watchdog.hpp"
#endif

namespace tetra {

#ifndef TETRA_HAVE_NCCL

bool have_nccl() {
  return false;
}

std::unique_ptr<Comm> make_nccl_comm(MPI_Comm comm, const std::string& name, Backend&) {
  MPI_Comm_free(&comm);
  fail("group ", name, ": this build has no NCCL (it was not found when tetra was configured)");
}

#else

bool have_nccl() {
  return true;
}

namespace {

void nccl_check(ncclResult_t r, const char* what, const std::string& group) {
  if (r == ncclSuccess) return;
  fail("NCCL ", what, " on group ", group, " failed: ", ncclGetErrorString(r));
}

ncclDataType_t nccl_type(const Tensor& t) {
  check(t.device == Device::CUDA, "the NCCL communicator needs tensors in GPU memory");
  switch (t.dtype) {
    case DType::F32:
      return ncclFloat32;
    case DType::BF16:
      return ncclBfloat16;
    case DType::I32:
      return ncclInt32;
  }
  return ncclUint8;
}

class NcclComm;

// Every live NCCL communicator of this process: the watchdog's abort hook aborts them, and a
// blocking call of any of them first posts every one's held-back sends.
std::mutex live_mu;
std::vector<NcclComm*> live;

class NcclComm final : public Comm {
 public:
  NcclComm(MPI_Comm c, const std::string& name, Backend& be)
      : Comm(name),
        host_(make_mpi_comm(c, name)),
        watched_(c, name),
        stream_(static_cast<cudaStream_t>(be.stream())) {
    bind_backend(&be);
    check(stream_ != nullptr, "group ", name, ": NCCL needs a CUDA backend");
    // Rank 0 makes the id; the group's MPI communicator carries it to the others.
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (host_->rank() == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId", name_);
    static_assert(sizeof id % sizeof(int32_t) == 0);
    host_->broadcast(Tensor(&id, {int64_t(sizeof id / sizeof(int32_t))}, DType::I32), 0);
    nccl_check(ncclCommInitRank(&comm_, host_->size(), id, host_->rank()), "ncclCommInitRank",
               name_);
    std::lock_guard lock(live_mu);
    live.push_back(this);
  }
  ~NcclComm() override {
    {
      std::lock_guard lock(live_mu);
      live.erase(std::find(live.begin(), live.end(), this));
    }
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
  }

  const char* kind() const override { return "nccl"; }
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }

  // Size-1 groups still run their NCCL calls (they are the calls a one-GPU machine can test)
  // but count nothing, as the MPI communicator's shortcuts count nothing.
  void all_reduce(Tensor x, ReduceOp op) override {
    Counted c(*this, CommOp::AllReduce, 2.0 * (size() - 1) / size() * x.bytes(), "all_reduce");
    nccl_check(ncclAllReduce(x.ptr, x.ptr, size_t(x.numel()), nccl_type(x),
                             op == ReduceOp::Max ? ncclMax : ncclSum, comm_, stream_),
               "all_reduce", name_);
    complete(watchdog::Op::AllReduce);
  }
  void reduce_scatter(Tensor out, const Tensor& in) override {
    check(in.numel() == out.numel() * size(), "reduce_scatter of ", in.shape_str(), " into ",
          out.shape_str(), " over ", size(), " ranks");
    Counted c(*this, CommOp::ReduceScatter, double(size() - 1) / size() * in.bytes(),
              "reduce_scatter");
    nccl_check(ncclReduceScatter(in.ptr, out.ptr, size_t(out.numel()), nccl_type(in), ncclSum,
                                 comm_, stream_),
               "reduce_scatter", name_);
    complete(watchdog::Op::ReduceScatter);
  }
  void all_gather(Tensor out, const Tensor& in) override {
    check(out.numel() == in.numel() * size(), "all_gather of ", in.shape_str(), " into ",
          out.shape_str(), " over ", size(), " ranks");
    Counted c(*this, CommOp::AllGather, double(size() - 1) / size() * out.bytes(), "all_gather");
    // NCCL handles in == out + rank * count (ZeRO's updated shard in place) itself.
    nccl_check(ncclAllGather(in.ptr, out.ptr, size_t(in.numel()), nccl_type(in), comm_, stream_),
               "all_gather", name_);
    complete(watchdog::Op::AllGather);
  }
  void broadcast(Tensor x, int root) override {
    Counted c(*this, CommOp::Broadcast, rank() == root ? double(x.bytes()) : 0.0, "broadcast");
    nccl_check(ncclBroadcast(x.ptr, x.ptr, size_t(x.numel()), nccl_type(x), root, comm_, stream_),
               "broadcast", name_);
    complete(watchdog::Op::Broadcast);
  }

  void send(const Tensor& x, int peer, int tag) override {
    Counted c(*this, CommOp::SendRecv, double(x.bytes()), "send");
    held_.push_back({x, peer});
    post_held(nullptr, 0);
    complete(watchdog::Op::Send, peer);
  }
  void recv(Tensor x, int peer, int tag) override {
    Counted c(*this, CommOp::SendRecv, 0, "recv");
    post_held(&x, peer);
    complete(watchdog::Op::Recv, peer);
  }
  std::unique_ptr<Request> isend(const Tensor& x, int peer, int tag) override {
    Counted c(*this, CommOp::SendRecv, double(x.bytes()), "isend");
    held_.push_back({x, peer});
    return std::make_unique<Pending>(*this, watchdog::Op::WaitSend, peer, "wait isend");
  }
  std::unique_ptr<Request> irecv(Tensor x, int peer, int tag) override {
    Counted c(*this, CommOp::SendRecv, 0, "irecv");
    post_held(&x, peer);
    return std::make_unique<Pending>(*this, watchdog::Op::WaitRecv, peer, "wait irecv");
  }

  void barrier() override {
    post_all_held();
    host_->barrier();
    take_host_stats();
  }
  void all_reduce_host(double* x, int n, ReduceOp op) override {
    post_all_held();
    host_->all_reduce_host(x, n, op);
    take_host_stats();
  }

  // The watchdog's abort hook: no lock, the process is about to end.
  void abort() { ncclCommAbort(comm_); }

 private:
  struct Held {
    Tensor x;
    int peer;
  };

  // Counts a call (unless the group has one rank) and times it, posting every NCCL
  // communicator's held-back sends first.
  class Counted {
   public:
    Counted(NcclComm& c, CommOp op, double bytes, const char* what)
        : timed_(c.size() > 1 ? Timed(c.stats, op, bytes, what, c.name_)
                              : Timed(c.uncounted_, what, c.name_)) {
      post_all_held();
    }

   private:
    Timed timed_;
  };

  class Pending final : public Request {
   public:
    Pending(NcclComm& c, watchdog::Op op, int peer, const char* what)
        : c_(c), op_(op), peer_(peer), what_(what) {}
    // A request nobody waited for still has its send posted and completed; a destructor
    // must not throw.
    ~Pending() override {
      try {
        c_.post_held(nullptr, 0);
      } catch (const Error&) {
      }
      cudaStreamSynchronize(c_.stream_);
    }
    void wait() override {
      Timed t(c_.size() > 1 ? c_.stats : c_.uncounted_, what_, c_.name_);
      c_.post_held(nullptr, 0);
      c_.complete(op_, peer_);
    }

   private:
    NcclComm& c_;
    watchdog::Op op_;
    int peer_;
    const char* what_;
  };

  // Posts the held-back sends, and the receive `into` from `peer` if given, as one group.
  void post_held(Tensor* into, int peer) {
    if (held_.empty() && !into) return;
    nccl_check(ncclGroupStart(), "ncclGroupStart", name_);
    for (const Held& h : held_)
      nccl_check(ncclSend(h.x.ptr, size_t(h.x.numel()), nccl_type(h.x), h.peer, comm_, stream_),
                 "send", name_);
    if (into)
      nccl_check(ncclRecv(into->ptr, size_t(into->numel()), nccl_type(*into), peer, comm_, stream_),
                 "recv", name_);
    nccl_check(ncclGroupEnd(), "ncclGroupEnd", name_);
    held_.clear();
  }
  static void post_all_held() {
    std::lock_guard lock(live_mu);
    for (NcclComm* c : live) c->post_held(nullptr, 0);
  }

  // Waits for an event recorded after this call's NCCL kernels on the backend's stream,
  // shown to the watchdog as a blocking call, and turns NCCL's asynchronous errors into
  // tetra::Error.
  void complete(watchdog::Op op, int peer = -1) {
    watchdog::Call w(watched_, op, peer);
    const std::unique_ptr<Backend::Event> done = be_->record_event();
    for (;;) {
      if (done->done()) return;
      ncclResult_t async = ncclSuccess;
      nccl_check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError", name_);
      if (async != ncclSuccess && async != ncclInProgress) {
        ncclCommAbort(comm_);
        fail("NCCL error on group ", name_, ": ", ncclGetErrorString(async));
      }
      std::this_thread::yield();
    }
  }

  // The host communicator counts its own calls; they are this group's calls.
  void take_host_stats() {
    CommStats& h = host_->stats;
    stats.calls += h.calls;
    stats.bytes += h.bytes;
    stats.seconds += h.seconds;
    for (int i = 0; i < int(CommOp::kCount); ++i) stats.by_op[i] += h.by_op[i];
    h.clear();
  }

  std::unique_ptr<Comm> host_;  // the group over MPI: bootstrap, host reductions, barriers
  watchdog::Group watched_;
  cudaStream_t stream_;
  ncclComm_t comm_ = nullptr;
  std::vector<Held> held_;
  CommStats uncounted_;  // where size-1 groups time their calls
};

void abort_all() {
  for (NcclComm* c : live) c->abort();
}

}  // namespace

std::unique_ptr<Comm> make_nccl_comm(MPI_Comm comm, const std::string& name, Backend& be) {
  watchdog::set_abort_hook(abort_all);
  return std::make_unique<NcclComm>(comm, name, be);
}

#endif  // TETRA_HAVE_NCCL

}  // namespace tetra
