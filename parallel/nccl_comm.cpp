#include "parallel/nccl_comm.hpp"

#ifdef TETRA_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/host_wait.hpp"
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

// A call queued on a stream and not yet seen done: the event recorded after its kernels, and
// what the watchdog shows while the host waits for it.
struct Queued {
  NcclComm* comm;
  cudaEvent_t done;
  watchdog::Op op;
  int peer;
  int64_t seq;  // the collective's number on its group (watchdog::Call::seq)
  const char* what;
  cudaStream_t on;  // the stream it was queued on: the compute stream or the queue stream
  int64_t id;       // its number in this process (increasing in queue order)
};

// Every live NCCL communicator of this process: the watchdog's abort hook aborts them, and a
// call of any of them first posts every one's held-back sends. And the calls queued by all of
// them, oldest first (each stream's calls in their stream order).
// Recursive: a call posting every communicator's held sends queues each group under it.
std::recursive_mutex live_mu;
std::vector<NcclComm*> live;
std::deque<Queued> queued;
int64_t next_queued_id = 0;  // Queued::id, under live_mu

// A bound on the calls queued between two host waits (a step queues about a hundred): past it
// the oldest is waited for, so that events are not held without end.
constexpr size_t kMaxQueued = 4096;

class NcclComm final : public Comm {
 public:
  NcclComm(MPI_Comm c, const std::string& name, Backend& be)
      : Comm(name),
        watched_(c, name),
        host_(make_mpi_comm(c, name)),  // takes c (frees it for a group of one): after watched_
        stream_(static_cast<cudaStream_t>(be.stream())) {
    bind_backend(&be);
    check(stream_ != nullptr, "group ", name, ": NCCL needs a CUDA backend");
    init_comm(&comm_);
    std::lock_guard lock(live_mu);
    live.push_back(this);
  }
  ~NcclComm() override {
    // The streams drained, this communicator's queued calls are done and can be dropped.
    cudaStreamSynchronize(stream_);
    if (queue_stream_) cudaStreamSynchronize(queue_stream_);
    {
      std::lock_guard lock(live_mu);
      live.erase(std::find(live.begin(), live.end(), this));
      for (auto it = queued.begin(); it != queued.end();) {
        if (it->comm != this) {
          ++it;
          continue;
        }
        spare_.push_back(it->done);
        it = queued.erase(it);
      }
    }
    for (cudaEvent_t e : spare_) cudaEventDestroy(e);
    if (!aborted_) ncclCommDestroy(comm_);
    if (queue_stream_) {
      if (!aborted_) ncclCommDestroy(queue_comm_);
      cudaStreamDestroy(queue_stream_);
    }
  }

  const char* kind() const override { return "nccl"; }
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }

  // Size-1 groups still run their NCCL calls under --comm nccl (they are the calls a one-GPU
  // machine can test) but count nothing, as the group of one counts nothing.
  void all_reduce(Tensor x, ReduceOp op) override {
    Counted c(*this, CommOp::AllReduce, 2.0 * (size() - 1) / size() * x.bytes(), "all_reduce");
    enqueue(watchdog::Op::AllReduce, -1, "all_reduce", [&] {
      nccl_check(ncclAllReduce(x.ptr, x.ptr, size_t(x.numel()), nccl_type(x),
                               op == ReduceOp::Max ? ncclMax : ncclSum, comm_, stream_),
                 "all_reduce", name_);
    });
  }
  void reduce_scatter(Tensor out, const Tensor& in) override {
    check(in.numel() == out.numel() * size(), "reduce_scatter of ", in.shape_str(), " into ",
          out.shape_str(), " over ", size(), " ranks");
    Counted c(*this, CommOp::ReduceScatter, double(size() - 1) / size() * in.bytes(),
              "reduce_scatter");
    enqueue(watchdog::Op::ReduceScatter, -1, "reduce_scatter", [&] {
      nccl_check(ncclReduceScatter(in.ptr, out.ptr, size_t(out.numel()), nccl_type(in), ncclSum,
                                   comm_, stream_),
                 "reduce_scatter", name_);
    });
  }
  void all_gather(Tensor out, const Tensor& in) override {
    check(out.numel() == in.numel() * size(), "all_gather of ", in.shape_str(), " into ",
          out.shape_str(), " over ", size(), " ranks");
    Counted c(*this, CommOp::AllGather, double(size() - 1) / size() * out.bytes(), "all_gather");
    // NCCL handles in == out + rank * count (ZeRO's updated shard in place) itself.
    enqueue(watchdog::Op::AllGather, -1, "all_gather", [&] {
      nccl_check(ncclAllGather(in.ptr, out.ptr, size_t(in.numel()), nccl_type(in), comm_, stream_),
                 "all_gather", name_);
    });
  }
  void broadcast(Tensor x, int root) override {
    Counted c(*this, CommOp::Broadcast, rank() == root ? double(x.bytes()) : 0.0, "broadcast");
    enqueue(watchdog::Op::Broadcast, -1, "broadcast", [&] {
      nccl_check(ncclBroadcast(x.ptr, x.ptr, size_t(x.numel()), nccl_type(x), root, comm_, stream_),
                 "broadcast", name_);
    });
  }

  void send(const Tensor& x, int peer, int tag) override {
    Counted c(*this, CommOp::SendRecv, double(x.bytes()), "send");
    held_.push_back({x, peer});
    post_held(nullptr, 0, watchdog::Op::Send);
  }
  // The pipeline's blocking receive waits for its data, as the MPI one does: the time a stage
  // waits for its neighbour is its bubble, measured around this call.
  void recv(Tensor x, int peer, int tag) override {
    Counted c(*this, CommOp::SendRecv, 0, "recv");
    post_held(&x, peer, watchdog::Op::Recv);
    wait_queued(stream_);
  }
  std::unique_ptr<Request> isend(const Tensor& x, int peer, int tag) override {
    Counted c(*this, CommOp::SendRecv, double(x.bytes()), "isend");
    held_.push_back({x, peer});
    return std::make_unique<Pending>(*this, "wait isend");
  }
  std::unique_ptr<Request> irecv(Tensor x, int peer, int tag) override {
    Counted c(*this, CommOp::SendRecv, 0, "irecv");
    post_held(&x, peer, watchdog::Op::WaitRecv);
    return std::make_unique<Pending>(*this, "wait irecv");
  }

  // Host calls are blocking points: the queued calls are waited for first (an error of theirs
  // surfaces here, and a barrier keeps meaning that everything before it is done).
  void barrier() override {
    post_all_held();
    wait_all_queued();
    host_->barrier();
    take_host_stats();
  }
  void all_reduce_host(double* x, int n, ReduceOp op) override {
    post_all_held();
    wait_all_queued();
    host_->all_reduce_host(x, n, op);
    take_host_stats();
  }

  // Queued collectives (parallel/comm.hpp) on a stream of their own, over a second NCCL
  // communicator of the same ranks (the members queue in the same order, as the MPI thread's
  // duplicate communicator): the queue stream waits for an event recorded on the compute
  // stream after the kernels that wrote the input, and the request's wait makes the compute
  // stream wait for an event recorded after the call. The host waits for neither. The
  // full gradients ZeroParams frees after the wait are freed in the compute stream's order,
  // so after the call has read them. Groups of one run them too (what one GPU can test).
  std::unique_ptr<Request> queue_reduce_scatter(Tensor out, const Tensor& in) override {
    check(in.numel() == out.numel() * size(), "reduce_scatter of ", in.shape_str(), " into ",
          out.shape_str(), " over ", size(), " ranks");
    Counted c(*this, CommOp::ReduceScatter, double(size() - 1) / size() * in.bytes(),
              "queue reduce_scatter");
    return queue(watchdog::Op::ReduceScatter, "reduce_scatter", "wait reduce_scatter", [&] {
      nccl_check(ncclReduceScatter(in.ptr, out.ptr, size_t(out.numel()), nccl_type(in), ncclSum,
                                   queue_comm_, queue_stream_),
                 "reduce_scatter", name_);
    });
  }
  std::unique_ptr<Request> queue_all_gather(Tensor out, const Tensor& in) override {
    check(out.numel() == in.numel() * size(), "all_gather of ", in.shape_str(), " into ",
          out.shape_str(), " over ", size(), " ranks");
    Counted c(*this, CommOp::AllGather, double(size() - 1) / size() * out.bytes(),
              "queue all_gather");
    return queue(watchdog::Op::AllGather, "all_gather", "wait all_gather", [&] {
      nccl_check(ncclAllGather(in.ptr, out.ptr, size_t(in.numel()), nccl_type(in), queue_comm_,
                               queue_stream_),
                 "all_gather", name_);
    });
  }

  // The queue's stream and communicator, made once, collectively over the group: ZeroParams
  // opens the queue when it is made, so that no member sets up a communicator in the middle
  // of a step, with kernels of other groups in flight.
  void open_queue() override {
    if (queue_stream_) return;
    cuda_check(cudaStreamCreateWithFlags(&queue_stream_, cudaStreamNonBlocking),
               "cudaStreamCreate");
    init_comm(&queue_comm_);
  }

  // The watchdog's abort hook: no lock, the process is about to end.
  void abort() {
    aborted_ = true;
    ncclCommAbort(comm_);
    if (queue_comm_) ncclCommAbort(queue_comm_);
  }

  // The host-wait hook (backend/host_wait.hpp): waits for every call the work on `stream`
  // waits for, oldest first: the calls queued on it, and the queued collectives it was joined
  // to (so that a hang or an error of theirs surfaces here, not inside a stream
  // synchronisation). Queued collectives not yet joined run on: no host waits for them.
  static void wait_queued(void* stream) {
    wait_queued_if([stream](const Queued& q) {
      return q.on == stream || (q.comm->stream_ == stream && q.id <= q.comm->joined_through_);
    });
  }

  // A host-side collective (barrier, host all-reduce) keeps meaning that everything before it
  // is done: every call of every communicator on this communicator's compute stream.
  void wait_all_queued() {
    wait_queued_if([this](const Queued& q) { return q.comm->stream_ == stream_; });
  }

 private:
  struct Held {
    Tensor x;
    int peer;
  };

  template <typename Which>
  static void wait_queued_if(Which which) {
    std::lock_guard lock(live_mu);
    for (auto it = queued.begin(); it != queued.end();) {
      if (!which(*it)) {
        ++it;
        continue;
      }
      it->comm->wait_for(*it);
      it->comm->spare_.push_back(it->done);
      it = queued.erase(it);
    }
  }

  // A new NCCL communicator of the group's ranks: rank 0 makes the id, the group's MPI
  // communicator carries it to the others (collective over the group).
  void init_comm(ncclComm_t* c) {
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (host_->rank() == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId", name_);
    static_assert(sizeof id % sizeof(int32_t) == 0);
    host_->broadcast(Tensor(&id, {int64_t(sizeof id / sizeof(int32_t))}, DType::I32), 0);
    nccl_check(ncclCommInitRank(c, host_->size(), id, host_->rank()), "ncclCommInitRank", name_);
  }

  // The compute stream's wait for one queued call: the event recorded after it on the queue
  // stream. Nothing waits on the host.
  class Joined final : public Request {
   public:
    Joined(NcclComm& c, cudaEvent_t after, int64_t id, const char* what)
        : c_(c), after_(after), id_(id), what_(what) {}
    ~Joined() override {
      try {
        wait();
      } catch (const Error&) {
      }
      cudaEventDestroy(after_);
    }
    void wait() override {
      if (joined_) return;
      joined_ = true;
      Timed t(c_.size() > 1 ? c_.stats : c_.uncounted_, what_, c_.name_);
      c_.cuda_check(cudaStreamWaitEvent(c_.stream_, after_, 0), "cudaStreamWaitEvent");
      std::lock_guard lock(live_mu);
      c_.joined_through_ = std::max(c_.joined_through_, id_);
    }

   private:
    NcclComm& c_;
    cudaEvent_t after_;
    int64_t id_;
    const char* what_;
    bool joined_ = false;
  };

  // Queues `post` on the queue stream after the compute stream's work so far (the queue
  // opened first if no one opened it: collective over the group, whose members queue in the
  // same order).
  template <typename Post>
  std::unique_ptr<Request> queue(watchdog::Op op, const char* what, const char* wait_what,
                                 Post&& post) {
    open_queue();
    cudaEvent_t ready = nullptr, after = nullptr;
    cuda_check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventCreateWithFlags(&after, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventRecord(ready, stream_), "cudaEventRecord");
    cuda_check(cudaStreamWaitEvent(queue_stream_, ready, 0), "cudaStreamWaitEvent");
    cudaEventDestroy(ready);  // released once the queue stream has passed it
    const int64_t id = enqueue(op, -1, what, std::forward<Post>(post), queue_stream_);
    cuda_check(cudaEventRecord(after, queue_stream_), "cudaEventRecord");
    return std::make_unique<Joined>(*this, after, id, wait_what);
  }

  // Counts a call (unless the group has one rank) and times the host's part of it, posting
  // every NCCL communicator's held-back sends first.
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

  // The wait of an isend or irecv. Both are queued on the stream by then (the receive when it
  // was made, the send here at the latest), and the stream orders everything after them, so
  // the wait itself returns without waiting for the GPU: a payload freed after it is freed
  // in stream order (cudaFreeAsync on the same stream), after the send has read it.
  class Pending final : public Request {
   public:
    Pending(NcclComm& c, const char* what) : c_(c), what_(what) {}
    // A request nobody waited for still has its send posted; a destructor must not throw.
    ~Pending() override {
      try {
        c_.post_held(nullptr, 0, watchdog::Op::WaitSend);
      } catch (const Error&) {
      }
    }
    void wait() override {
      Timed t(c_.size() > 1 ? c_.stats : c_.uncounted_, what_, c_.name_);
      c_.post_held(nullptr, 0, watchdog::Op::WaitSend);
    }

   private:
    NcclComm& c_;
    const char* what_;
  };

  // Posts the held-back sends, and the receive `into` from `peer` if given, as one group.
  void post_held(Tensor* into, int peer, watchdog::Op op) {
    if (held_.empty() && !into) return;
    // Taken out first: a send that fails is not posted again by the next call.
    const std::vector<Held> sends = std::move(held_);
    held_.clear();
    enqueue(op, into ? peer : sends.back().peer, into ? "recv" : "send", [&] {
      nccl_check(ncclGroupStart(), "ncclGroupStart", name_);
      // The group is closed before an error is raised: a group left open would take in the
      // next NCCL call of any communicator.
      ncclResult_t r = ncclSuccess;
      const char* failed = "send";
      for (const Held& h : sends)
        if (r == ncclSuccess)
          r = ncclSend(h.x.ptr, size_t(h.x.numel()), nccl_type(h.x), h.peer, comm_, stream_);
      if (into && r == ncclSuccess) {
        r = ncclRecv(into->ptr, size_t(into->numel()), nccl_type(*into), peer, comm_, stream_);
        failed = "recv";
      }
      const ncclResult_t end = ncclGroupEnd();
      nccl_check(r, failed, name_);
      nccl_check(end, "ncclGroupEnd", name_);
    });
  }
  static void post_all_held() {
    std::lock_guard lock(live_mu);
    for (NcclComm* c : live) c->post_held(nullptr, 0, watchdog::Op::Send);
  }

  // Queues a call on the backend's stream and returns without waiting for it: `post` runs the
  // NCCL calls (shown to the watchdog meanwhile, since NCCL may block the host there, setting
  // up a connection with a peer), and an event recorded after them marks the call's end.
  //
  // Why nothing needs the host to wait here: the call's inputs were written by kernels queued
  // before it on the same stream and its outputs are read by kernels queued after it; the
  // host reads device memory only through the backend's download, which queues the copy on the
  // stream and waits after the hook (wait_queued) has seen every queued call done; Buffers
  // free their memory with cudaFreeAsync on that stream, so memory a call reads or writes is
  // reused only after it; NCCL takes device memory only (no host staging to keep alive); and
  // the bytes are counted when the call is made, as they were. An error of NCCL's surfaces at
  // the next wait (or at the next call, polled here), with the group's name.
  template <typename Post>
  int64_t enqueue(watchdog::Op op, int peer, const char* what, Post&& post,
                  cudaStream_t on = nullptr) {
    Queued q{this, nullptr, op, peer, 0, what, on ? on : stream_, 0};
    {
      watchdog::Call w(watched_, op, peer);  // enters the collective: its number on the group
      q.seq = w.seq();
      post();
    }
    poll();
    if (spare_.empty()) {
      cudaEvent_t e = nullptr;
      cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
      spare_.push_back(e);
    }
    q.done = spare_.back();
    cuda_check(cudaEventRecord(q.done, q.on), "cudaEventRecord");
    spare_.pop_back();
    std::lock_guard lock(live_mu);
    q.id = next_queued_id++;
    queued.push_back(q);
    // Drop the calls already done from the front (no wait), and past the bound wait for one.
    while (!queued.empty()) {
      Queued& front = queued.front();
      if (queued.size() <= kMaxQueued && !front.comm->done(front)) break;
      front.comm->wait_for(front);
      front.comm->spare_.push_back(front.done);
      queued.pop_front();
    }
    return q.id;
  }

  bool done(const Queued& q) const {
    const cudaError_t r = cudaEventQuery(q.done);
    if (r == cudaErrorNotReady) return false;
    cuda_check(r, q.what);
    return true;
  }

  // Waits for one queued call of this communicator, shown to the watchdog as that call (its
  // number on the group unchanged) and timed as the group's, polling NCCL's asynchronous
  // errors meanwhile.
  void wait_for(const Queued& q) {
    if (done(q)) return;
    Timed t(size() > 1 ? stats : uncounted_, q.what, name_);
    watchdog::Call w(watched_, q.op, q.peer, q.seq);
    while (!done(q)) {
      poll();
      std::this_thread::yield();
    }
  }

  // NCCL's asynchronous errors, of either communicator, as tetra::Error, both aborted first.
  void poll() {
    if (aborted_) return;  // the communicators are gone; the error is on its way
    for (ncclComm_t c : {comm_, queue_comm_}) {
      if (!c) continue;
      ncclResult_t async = ncclSuccess;
      nccl_check(ncclCommGetAsyncError(c, &async), "ncclCommGetAsyncError", name_);
      if (async == ncclSuccess || async == ncclInProgress) continue;
      abort();
      fail("NCCL error on group ", name_, ": ", ncclGetErrorString(async));
    }
  }
  void cuda_check(cudaError_t r, const char* what) const {
    if (r != cudaSuccess)
      fail("CUDA error in ", what, " on group ", name_, ": ", cudaGetErrorString(r));
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

  watchdog::Group watched_;
  std::unique_ptr<Comm> host_;  // the group over MPI: bootstrap, host reductions, barriers
  cudaStream_t stream_;
  ncclComm_t comm_ = nullptr;
  // Queued collectives: their stream and communicator, made by the first.
  cudaStream_t queue_stream_ = nullptr;
  ncclComm_t queue_comm_ = nullptr;
  // The compute stream waits for the queue stream's calls up to this Queued::id (a join waits
  // for the calls queued before it too): the host-wait hook waits for those, naming the first
  // not done. Under live_mu.
  int64_t joined_through_ = -1;
  bool aborted_ = false;
  std::vector<Held> held_;
  std::vector<cudaEvent_t> spare_;  // events of calls seen done, for reuse
  CommStats uncounted_;             // where size-1 groups time their calls
};

void abort_all() {
  for (NcclComm* c : live) c->abort();
}

}  // namespace

std::unique_ptr<Comm> make_nccl_comm(MPI_Comm comm, const std::string& name, Backend& be) {
  watchdog::set_abort_hook(abort_all);
  set_host_wait_hook(NcclComm::wait_queued);
  return std::make_unique<NcclComm>(comm, name, be);
}

#endif  // TETRA_HAVE_NCCL

}  // namespace tetra
