#include "parallel/mpi_comm.hpp"

#include <cstring>
#include <vector>

#include "backend/backend.hpp"
#include "parallel/comm_queue.hpp"
#include "parallel/self_comm.hpp"
#include "parallel/timed.hpp"
#include "parallel/watchdog.hpp"
#include "util/bf16.hpp"

namespace tetra {
namespace {

MPI_Datatype mpi_type(const Tensor& t) {
  switch (t.dtype) {
    case DType::F32:
      return MPI_FLOAT;
    case DType::I32:
      return MPI_INT;
    case DType::BF16:
      return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

// MPI has no bf16 type: bf16 travels as MPI_UINT16_T, which MPI's own SUM and MAX would
// treat as integers. These reduce the values instead: each pair widened to float, summed
// (or compared) and rounded back to bf16, so a reduction over N ranks rounds N - 1 times.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}
void bf16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i)
    if (bf16_to_float(a[i]) > bf16_to_float(b[i])) b[i] = a[i];
}

// The reduction for a tensor's dtype; the bf16 operations are made once, on first use.
MPI_Op mpi_op(ReduceOp op, DType t) {
  if (t != DType::BF16) return op == ReduceOp::Max ? MPI_MAX : MPI_SUM;
  static MPI_Op sum = MPI_OP_NULL, max = MPI_OP_NULL;
  if (sum == MPI_OP_NULL) {
    MPI_Op_create(bf16_sum, 1, &sum);
    MPI_Op_create(bf16_max, 1, &max);
  }
  return op == ReduceOp::Max ? max : sum;
}

void mpi_check(int rc, const char* what, const std::string& group) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail("MPI ", what, " on group ", group, " failed: ", std::string(msg, len));
}

// The reduce-scatter as a ring: in [size n], rank r's out [n] = the sum over ranks q of q's
// part r. Step t = 0 .. size - 2 sends the running sum of part (r - t - 1) mod size to the
// right and receives part (r - t - 2) mod size from the left, to which this rank adds its own
// (inout = own op received); the last step's part is r, received into out. Each rank sends
// (size - 1) n elements, the least any algorithm can. Open MPI 4.1's own algorithms for
// MPI_Reduce_scatter_block took 4 to 5 times as long on two ranks of one core each (a 5.9 MB
// part: 6.3-7.3 ms against 1.2-1.6 ms), CPU time that the data-parallel ranks' compute lost.
// The order of each part's sum is fixed by the group's size alone. `scratch` holds the
// running sum between steps from three ranks on; its memory is the communicator's, as MPI's
// own buffers are.
void ring_reduce_scatter(const void* in, void* out, int n, MPI_Datatype type, MPI_Op op,
                         MPI_Comm comm, int rank, int size, std::vector<char>& scratch,
                         const std::string& group) {
  int type_bytes = 0;
  MPI_Type_size(type, &type_bytes);
  const size_t bytes = size_t(n) * size_t(type_bytes);
  auto part = [&](int q) {
    return static_cast<const char*>(in) + size_t((q % size + size) % size) * bytes;
  };
  if (size == 1) {
    std::memcpy(out, in, bytes);
    return;
  }
  if (size > 2 && scratch.size() < bytes) scratch.resize(bytes);
  constexpr int kTag = 0x7e72;  // this communicator's collectives alone use it
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  const void* send = part(rank - 1);
  for (int t = 0; t < size - 1; ++t) {
    // out on the last step and every second step back from it, scratch between: a step's
    // receive never lands in the buffer it sends from.
    void* recv = (size - 2 - t) % 2 == 0 ? out : scratch.data();
    mpi_check(MPI_Sendrecv(send, n, type, right, kTag, recv, n, type, left, kTag, comm,
                           MPI_STATUS_IGNORE),
              "reduce_scatter", group);
    mpi_check(MPI_Reduce_local(part(rank - t - 2), recv, n, type, op), "reduce_scatter", group);
    send = recv;
  }
}

// A tensor as MPI sees it: host memory as it is; any other memory (a GPU's) through a host
// copy made by the backend in `scratch` (the backend's staging memory, pinned on a GPU),
// which grows as needed and is reused from call to call. `read` fills the copy first;
// commit() writes it back.
class HostView {
 public:
  HostView(Backend* be, const Tensor& t, bool read, HostBuffer& scratch) : be_(be), t_(t) {
    if (t.device == Device::CPU) {
      ptr_ = t.ptr;
      return;
    }
    check(be != nullptr, "the MPI communicator was given device memory but no backend");
    ptr_ = staged_ = scratch.get(*be, t.bytes());
    if (read) be->download(ptr_, t);
  }
  void* ptr() const { return ptr_; }
  void commit() {
    if (staged_) be_->upload(t_, staged_);
  }

 private:
  Backend* be_;
  Tensor t_;
  void* ptr_ = nullptr;
  char* staged_ = nullptr;  // the host copy, when the tensor is not host memory
};

// Staging buffers for non-blocking calls, kept for reuse: pinned memory is slow to allocate.
// Shared with the requests, which may outlive their communicator.
struct StagingPool {
  std::vector<std::unique_ptr<HostBuffer>> spare;
};

// The staging memory and view of a non-blocking call, which must live until its wait.
struct Staging {
  std::shared_ptr<StagingPool> pool;
  std::unique_ptr<HostBuffer> scratch;
  HostView view;
  Staging(std::shared_ptr<StagingPool> p, Backend* be, const Tensor& t, bool read)
      : pool(std::move(p)), scratch(take(*pool)), view(be, t, read, *scratch) {}
  ~Staging() { pool->spare.push_back(std::move(scratch)); }
  static std::unique_ptr<HostBuffer> take(StagingPool& p) {
    if (p.spare.empty()) return std::make_unique<HostBuffer>();
    auto b = std::move(p.spare.back());
    p.spare.pop_back();
    return b;
  }
};

class MpiRequest final : public Comm::Request {
 public:
  // staging: the host copy MPI reads or writes, which must outlive the request; a receive
  // commits it to the backend's memory once the data is in.
  MpiRequest(MPI_Request r, std::unique_ptr<Staging> staging, CommStats& s,
             const watchdog::Group& g, watchdog::Op op, int peer, const char* what,
             const std::string& group_name)
      : r_(r),
        staging_(std::move(staging)),
        s_(s),
        group_(g),
        op_(op),
        peer_(peer),
        what_(what),
        group_name_(group_name) {}
  // A request nobody waited for is completed here; a destructor must not throw.
  ~MpiRequest() override {
    if (r_ != MPI_REQUEST_NULL) MPI_Wait(&r_, MPI_STATUS_IGNORE);
  }
  void wait() override {
    Timed t(s_, what_, group_name_);  // the isend / irecv already counted this call
    watchdog::Call w(group_, op_, peer_);
    mpi_check(MPI_Wait(&r_, MPI_STATUS_IGNORE), what_, group_name_);
    if (op_ == watchdog::Op::WaitRecv) staging_->view.commit();
  }

 private:
  MPI_Request r_;
  std::unique_ptr<Staging> staging_;
  CommStats& s_;
  const watchdog::Group& group_;
  watchdog::Op op_;
  int peer_;
  const char* what_;
  const std::string& group_name_;
};

class MpiComm;

// A collective queued on the communicator's thread. Its wait shows the call to the watchdog
// under the number it was entered with when queued, adds the time waited to the group's
// seconds, and writes a staged output back to the backend's memory.
class QueuedRequest final : public Comm::Request {
 public:
  QueuedRequest(MpiComm& comm, int64_t ticket, watchdog::Op op, int64_t seq, const char* what,
                std::unique_ptr<Staging> in, std::unique_ptr<Staging> out)
      : comm_(comm),
        ticket_(ticket),
        op_(op),
        seq_(seq),
        what_(what),
        in_(std::move(in)),
        out_(std::move(out)) {}
  // A request nobody waited for is completed here; a destructor must not throw.
  ~QueuedRequest() override {
    try {
      wait();
    } catch (...) {
    }
  }
  void wait() override;

 private:
  MpiComm& comm_;
  int64_t ticket_;
  watchdog::Op op_;
  int64_t seq_;
  const char* what_;
  std::unique_ptr<Staging> in_, out_;  // host copies MPI reads and writes (device tensors)
  bool done_ = false;
};

class MpiComm final : public Comm {
 public:
  MpiComm(MPI_Comm c, std::string name) : Comm(std::move(name)), comm_(c), watched_(c, name_) {
    MPI_Comm_rank(c, &rank_);
    MPI_Comm_size(c, &size_);
  }
  ~MpiComm() override {
    if (queue_) {
      queue_.reset();  // runs what is queued
      MPI_Comm_free(&queued_comm_);
    }
    if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF) MPI_Comm_free(&comm_);
  }
  const char* kind() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce(Tensor x, ReduceOp op) override {
    Timed t(stats, CommOp::AllReduce, 2.0 * (size_ - 1) / size_ * x.bytes(), "all_reduce", name_);
    watchdog::Call w(watched_, watchdog::Op::AllReduce);
    HostView h(be_, x, true, stage_in_);
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, h.ptr(), int(x.numel()), mpi_type(x), mpi_op(op, x.dtype),
                            comm_),
              "all_reduce", name_);
    h.commit();
  }
  void reduce_scatter(Tensor out, const Tensor& in) override {
    check(in.numel() == out.numel() * size_, "reduce_scatter of ", in.shape_str(), " into ",
          out.shape_str(), " over ", size_, " ranks");
    Timed t(stats, CommOp::ReduceScatter, double(size_ - 1) / size_ * in.bytes(), "reduce_scatter",
            name_);
    watchdog::Call w(watched_, watchdog::Op::ReduceScatter);
    HostView hi(be_, in, true, stage_in_), ho(be_, out, false, stage_out_);
    ring_reduce_scatter(hi.ptr(), ho.ptr(), int(out.numel()), mpi_type(in),
                        mpi_op(ReduceOp::Sum, in.dtype), comm_, rank_, size_, ring_scratch_, name_);
    ho.commit();
  }
  void all_gather(Tensor out, const Tensor& in) override {
    check(out.numel() == in.numel() * size_, "all_gather of ", in.shape_str(), " into ",
          out.shape_str(), " over ", size_, " ranks");
    Timed t(stats, CommOp::AllGather, double(size_ - 1) / size_ * out.bytes(), "all_gather", name_);
    watchdog::Call w(watched_, watchdog::Op::AllGather);
    // A rank's own part may already sit in place inside out (ZeRO's updated shard); a staged
    // in is a copy of its own, so only host memory can alias.
    HostView hi(be_, in, true, stage_in_), ho(be_, out, false, stage_out_);
    const bool in_place = hi.ptr() == static_cast<char*>(ho.ptr()) + rank_ * in.bytes();
    mpi_check(MPI_Allgather(in_place ? MPI_IN_PLACE : hi.ptr(), int(in.numel()), mpi_type(in),
                            ho.ptr(), int(in.numel()), mpi_type(in), comm_),
              "all_gather", name_);
    ho.commit();
  }
  void broadcast(Tensor x, int root) override {
    Timed t(stats, CommOp::Broadcast, rank_ == root ? double(x.bytes()) : 0.0, "broadcast", name_);
    watchdog::Call w(watched_, watchdog::Op::Broadcast);
    HostView h(be_, x, rank_ == root, stage_in_);
    mpi_check(MPI_Bcast(h.ptr(), int(x.numel()), mpi_type(x), root, comm_), "broadcast", name_);
    h.commit();
  }
  void send(const Tensor& x, int peer, int tag) override {
    Timed t(stats, CommOp::SendRecv, double(x.bytes()), "send", name_);
    watchdog::Call w(watched_, watchdog::Op::Send, peer);
    HostView h(be_, x, true, stage_in_);
    mpi_check(MPI_Send(h.ptr(), int(x.numel()), mpi_type(x), peer, tag, comm_), "send", name_);
  }
  void recv(Tensor x, int peer, int tag) override {
    Timed t(stats, CommOp::SendRecv, 0, "recv", name_);
    watchdog::Call w(watched_, watchdog::Op::Recv, peer);
    HostView h(be_, x, false, stage_in_);
    mpi_check(MPI_Recv(h.ptr(), int(x.numel()), mpi_type(x), peer, tag, comm_, MPI_STATUS_IGNORE),
              "recv", name_);
    h.commit();
  }
  std::unique_ptr<Request> isend(const Tensor& x, int peer, int tag) override {
    Timed t(stats, CommOp::SendRecv, double(x.bytes()), "isend", name_);
    MPI_Request r;
    auto h = std::make_unique<Staging>(pool_, be_, x, true);
    mpi_check(MPI_Isend(h->view.ptr(), int(x.numel()), mpi_type(x), peer, tag, comm_, &r), "isend",
              name_);
    return std::make_unique<MpiRequest>(r, std::move(h), stats, watched_, watchdog::Op::WaitSend,
                                        peer, "wait isend", name_);
  }
  std::unique_ptr<Request> irecv(Tensor x, int peer, int tag) override {
    Timed t(stats, CommOp::SendRecv, 0, "irecv", name_);
    MPI_Request r;
    auto h = std::make_unique<Staging>(pool_, be_, x, false);
    mpi_check(MPI_Irecv(h->view.ptr(), int(x.numel()), mpi_type(x), peer, tag, comm_, &r), "irecv",
              name_);
    return std::make_unique<MpiRequest>(r, std::move(h), stats, watched_, watchdog::Op::WaitRecv,
                                        peer, "wait irecv", name_);
  }
  std::unique_ptr<Request> queue_reduce_scatter(Tensor out, const Tensor& in) override {
    check(in.numel() == out.numel() * size_, "reduce_scatter of ", in.shape_str(), " into ",
          out.shape_str(), " over ", size_, " ranks");
    if (!start_queue()) return Comm::queue_reduce_scatter(out, in);
    const double bytes = double(size_ - 1) / size_ * in.bytes();
    Timed t(stats, CommOp::ReduceScatter, bytes, "queue reduce_scatter", name_);
    watchdog::Call w(watched_, watchdog::Op::ReduceScatter);  // entered now, in queue order
    auto hi = std::make_unique<Staging>(pool_, be_, in, true);
    auto ho = std::make_unique<Staging>(pool_, be_, out, false);
    const void* src = hi->view.ptr();
    void* dst = ho->view.ptr();
    const int n = int(out.numel());
    const MPI_Datatype type = mpi_type(in);
    const MPI_Op op = mpi_op(ReduceOp::Sum, in.dtype);
    const int64_t ticket =
        queue_->push({[=, this] {
                        ring_reduce_scatter(src, dst, n, type, op, queued_comm_, rank_, size_,
                                            queued_ring_scratch_, name_);
                      },
                      "reduce_scatter " + name_, bytes});
    return std::make_unique<QueuedRequest>(*this, ticket, watchdog::Op::ReduceScatter, w.seq(),
                                           "wait reduce_scatter", std::move(hi), std::move(ho));
  }
  std::unique_ptr<Request> queue_all_gather(Tensor out, const Tensor& in) override {
    check(out.numel() == in.numel() * size_, "all_gather of ", in.shape_str(), " into ",
          out.shape_str(), " over ", size_, " ranks");
    if (!start_queue()) return Comm::queue_all_gather(out, in);
    const double bytes = double(size_ - 1) / size_ * out.bytes();
    Timed t(stats, CommOp::AllGather, bytes, "queue all_gather", name_);
    watchdog::Call w(watched_, watchdog::Op::AllGather);
    auto hi = std::make_unique<Staging>(pool_, be_, in, true);
    auto ho = std::make_unique<Staging>(pool_, be_, out, false);
    const bool in_place = hi->view.ptr() == static_cast<char*>(ho->view.ptr()) + rank_ * in.bytes();
    const void* src = in_place ? MPI_IN_PLACE : hi->view.ptr();
    void* dst = ho->view.ptr();
    const int n = int(in.numel());
    const MPI_Datatype type = mpi_type(in);
    const int64_t ticket = queue_->push(
        {[=, this] {
           mpi_check(MPI_Allgather(src, n, type, dst, n, type, queued_comm_), "all_gather", name_);
         },
         "all_gather " + name_, bytes});
    return std::make_unique<QueuedRequest>(*this, ticket, watchdog::Op::AllGather, w.seq(),
                                           "wait all_gather", std::move(hi), std::move(ho));
  }
  void open_queue() override { start_queue(); }
  void barrier() override {
    Timed t(stats, CommOp::Barrier, 0, "barrier", name_);
    watchdog::Call w(watched_, watchdog::Op::Barrier);
    mpi_check(MPI_Barrier(comm_), "barrier", name_);
  }
  void all_reduce_host(double* x, int n, ReduceOp op) override {
    Timed t(stats, CommOp::AllReduce, 2.0 * (size_ - 1) / size_ * n * sizeof(double), "all_reduce",
            name_);
    watchdog::Call w(watched_, watchdog::Op::AllReduce);
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, op == ReduceOp::Max ? MPI_MAX : MPI_SUM,
                            comm_),
              "all_reduce", name_);
  }

 private:
  friend class QueuedRequest;
  // The communication thread and its duplicate communicator, made by open_queue or the first
  // queued call (collective: the members queue in the same order). False where MPI was not
  // initialised with MPI_THREAD_MULTIPLE: queued calls then run at once.
  bool start_queue() {
    if (queue_) return true;
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE) return false;
    mpi_check(MPI_Comm_dup(comm_, &queued_comm_), "MPI_Comm_dup", name_);
    queue_ = std::make_unique<CommQueue>();
    return true;
  }
  // The queued calls that have run: their time into the stats, their spans onto the trace.
  void collect_finished() {
    for (CommQueue::Job& j : queue_->take_finished()) {
      stats.queued_seconds += (j.end_us - j.start_us) * 1e-6;
      trace::Event e;
      e.name = j.name;
      e.arg("bytes", int64_t(std::llround(j.bytes)));
      e.arg("group", name_);
      trace::add_span(trace::Lane::Queued, j.start_us, j.end_us, std::move(e));
    }
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  HostBuffer stage_in_, stage_out_;  // host copies of device tensors (blocking calls)
  std::shared_ptr<StagingPool> pool_ = std::make_shared<StagingPool>();  // non-blocking calls
  watchdog::Group watched_;  // shows blocking calls to the watchdog
  MPI_Comm queued_comm_ = MPI_COMM_NULL;
  // The ring reduce-scatter's running sums: the blocking calls' and the queue thread's.
  std::vector<char> ring_scratch_, queued_ring_scratch_;
  std::unique_ptr<CommQueue> queue_;  // last: its thread ends before the members above go
};

void QueuedRequest::wait() {
  if (done_) return;
  done_ = true;
  const auto t0 = Clock::now();
  {
    Timed t(comm_.stats, what_, comm_.name_);
    watchdog::Call w(comm_.watched_, op_, -1, seq_);
    comm_.queue_->wait(ticket_);
  }
  comm_.stats.waited_seconds += seconds_since(t0);
  comm_.collect_finished();
  if (out_) out_->view.commit();
  in_.reset();
  out_.reset();
}

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(MPI_Comm comm, const std::string& name) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  if (size > 1) return std::make_unique<MpiComm>(comm, name);
  if (comm != MPI_COMM_WORLD && comm != MPI_COMM_SELF) MPI_Comm_free(&comm);
  return make_self_comm(name);
}

}  // namespace tetra
