#include "parallel/mpi_comm.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "parallel/trace.hpp"
#include "parallel/watchdog.hpp"

namespace tetra {
namespace {

MPI_Datatype mpi_type(const Tensor& t) {
  check(t.device == Device::CPU, "the MPI communicator needs host tensors");
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

void mpi_check(int rc, const char* what, const std::string& group) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail("MPI ", what, " on group ", group, " failed: ", std::string(msg, len));
}

// Adds one call's bytes and wall time to the stats when it goes out of scope, and shows
// the call as a span on the trace's comm lane ("all_reduce tp").
class Timed {
 public:
  Timed(CommStats& s, CommOp op, double bytes, const char* what, const std::string& group)
      : Timed(s, what, group, bytes) {
    s_.calls += 1;
    s_.by_op[int(op)] += 1;
    s_.bytes += bytes;
  }
  // Time only, for the wait of a call already counted.
  Timed(CommStats& s, const char* what, const std::string& group, double bytes = 0)
      : s_(s),
        t0_(std::chrono::steady_clock::now()),
        span_(trace::Lane::Comm, [&](trace::Event& e) {
          e.name = std::string(what) + " " + group;
          e.arg("bytes", int64_t(std::llround(bytes)));
          e.arg("group", group);
        }) {}
  ~Timed() {
    s_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  CommStats& s_;
  std::chrono::steady_clock::time_point t0_;
  trace::Span span_;
};

class MpiRequest final : public Comm::Request {
 public:
  MpiRequest(MPI_Request r, CommStats& s, const watchdog::Group& g, watchdog::Op op, int peer,
             const char* what, const std::string& group_name)
      : r_(r), s_(s), group_(g), op_(op), peer_(peer), what_(what), group_name_(group_name) {}
  // A request nobody waited for is completed here; a destructor must not throw.
  ~MpiRequest() override {
    if (r_ != MPI_REQUEST_NULL) MPI_Wait(&r_, MPI_STATUS_IGNORE);
  }
  void wait() override {
    Timed t(s_, what_, group_name_);  // the isend / irecv already counted this call
    watchdog::Call w(group_, op_, peer_);
    mpi_check(MPI_Wait(&r_, MPI_STATUS_IGNORE), what_, group_name_);
  }

 private:
  MPI_Request r_;
  CommStats& s_;
  const watchdog::Group& group_;
  watchdog::Op op_;
  int peer_;
  const char* what_;
  const std::string& group_name_;
};

class MpiComm final : public Comm {
 public:
  MpiComm(MPI_Comm c, std::string name) : Comm(std::move(name)), comm_(c), watched_(c, name_) {
    MPI_Comm_rank(c, &rank_);
    MPI_Comm_size(c, &size_);
  }
  ~MpiComm() override {
    if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce(Tensor x, ReduceOp op) override {
    if (size_ == 1) return;
    Timed t(stats, CommOp::AllReduce, 2.0 * (size_ - 1) / size_ * x.bytes(), "all_reduce", name_);
    watchdog::Call w(watched_, watchdog::Op::AllReduce);
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, x.ptr, int(x.numel()), mpi_type(x), mpi_op(op), comm_),
              "all_reduce", name_);
  }
  void reduce_scatter(Tensor out, const Tensor& in) override {
    check(in.numel() == out.numel() * size_, "reduce_scatter of ", in.shape_str(), " into ",
          out.shape_str(), " over ", size_, " ranks");
    if (size_ == 1) return copy_local(out, in);
    Timed t(stats, CommOp::ReduceScatter, double(size_ - 1) / size_ * in.bytes(), "reduce_scatter",
            name_);
    watchdog::Call w(watched_, watchdog::Op::ReduceScatter);
    mpi_check(
        MPI_Reduce_scatter_block(in.ptr, out.ptr, int(out.numel()), mpi_type(in), MPI_SUM, comm_),
        "reduce_scatter", name_);
  }
  void all_gather(Tensor out, const Tensor& in) override {
    check(out.numel() == in.numel() * size_, "all_gather of ", in.shape_str(), " into ",
          out.shape_str(), " over ", size_, " ranks");
    if (size_ == 1) return copy_local(out, in);
    Timed t(stats, CommOp::AllGather, double(size_ - 1) / size_ * out.bytes(), "all_gather", name_);
    watchdog::Call w(watched_, watchdog::Op::AllGather);
    // A rank's own part may already sit in place inside out (ZeRO's updated shard).
    const bool in_place = in.ptr == static_cast<char*>(out.ptr) + rank_ * in.bytes();
    mpi_check(MPI_Allgather(in_place ? MPI_IN_PLACE : in.ptr, int(in.numel()), mpi_type(in),
                            out.ptr, int(in.numel()), mpi_type(in), comm_),
              "all_gather", name_);
  }
  void broadcast(Tensor x, int root) override {
    if (size_ == 1) return;
    Timed t(stats, CommOp::Broadcast, rank_ == root ? double(x.bytes()) : 0.0, "broadcast", name_);
    watchdog::Call w(watched_, watchdog::Op::Broadcast);
    mpi_check(MPI_Bcast(x.ptr, int(x.numel()), mpi_type(x), root, comm_), "broadcast", name_);
  }
  void send(const Tensor& x, int peer, int tag) override {
    Timed t(stats, CommOp::SendRecv, double(x.bytes()), "send", name_);
    watchdog::Call w(watched_, watchdog::Op::Send, peer);
    mpi_check(MPI_Send(x.ptr, int(x.numel()), mpi_type(x), peer, tag, comm_), "send", name_);
  }
  void recv(Tensor x, int peer, int tag) override {
    Timed t(stats, CommOp::SendRecv, 0, "recv", name_);
    watchdog::Call w(watched_, watchdog::Op::Recv, peer);
    mpi_check(MPI_Recv(x.ptr, int(x.numel()), mpi_type(x), peer, tag, comm_, MPI_STATUS_IGNORE),
              "recv", name_);
  }
  std::unique_ptr<Request> isend(const Tensor& x, int peer, int tag) override {
    Timed t(stats, CommOp::SendRecv, double(x.bytes()), "isend", name_);
    MPI_Request r;
    mpi_check(MPI_Isend(x.ptr, int(x.numel()), mpi_type(x), peer, tag, comm_, &r), "isend", name_);
    return std::make_unique<MpiRequest>(r, stats, watched_, watchdog::Op::WaitSend, peer,
                                        "wait isend", name_);
  }
  std::unique_ptr<Request> irecv(Tensor x, int peer, int tag) override {
    Timed t(stats, CommOp::SendRecv, 0, "irecv", name_);
    MPI_Request r;
    mpi_check(MPI_Irecv(x.ptr, int(x.numel()), mpi_type(x), peer, tag, comm_, &r), "irecv", name_);
    return std::make_unique<MpiRequest>(r, stats, watched_, watchdog::Op::WaitRecv, peer,
                                        "wait irecv", name_);
  }
  void barrier() override {
    if (size_ == 1) return;
    Timed t(stats, CommOp::Barrier, 0, "barrier", name_);
    watchdog::Call w(watched_, watchdog::Op::Barrier);
    mpi_check(MPI_Barrier(comm_), "barrier", name_);
  }
  void all_reduce_host(double* x, int n, ReduceOp op) override {
    if (size_ == 1) return;
    Timed t(stats, CommOp::AllReduce, 2.0 * (size_ - 1) / size_ * n * sizeof(double), "all_reduce",
            name_);
    watchdog::Call w(watched_, watchdog::Op::AllReduce);
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, mpi_op(op), comm_), "all_reduce",
              name_);
  }

 private:
  static MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::Max ? MPI_MAX : MPI_SUM; }
  static void copy_local(Tensor out, const Tensor& in) {
    if (out.ptr != in.ptr)
      std::copy_n(static_cast<const char*>(in.ptr), in.bytes(), static_cast<char*>(out.ptr));
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  watchdog::Group watched_;  // shows blocking calls to the watchdog
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(MPI_Comm comm, const std::string& name) {
  return std::make_unique<MpiComm>(comm, name);
}

}  // namespace tetra
