#include "parallel/self_comm.hpp"

#include <cstring>

#include "backend/backend.hpp"
#include "util/error.hpp"

namespace tetra {
namespace {

class SelfComm final : public Comm {
 public:
  explicit SelfComm(const std::string& name) : Comm(name) {}
  const char* kind() const override { return "self"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }

  void all_reduce(Tensor, ReduceOp) override {}
  void reduce_scatter(Tensor out, const Tensor& in) override {
    check(in.numel() == out.numel(), "reduce_scatter of ", in.shape_str(), " into ",
          out.shape_str(), " over 1 rank");
    copy(out, in);
  }
  void all_gather(Tensor out, const Tensor& in) override {
    check(in.numel() == out.numel(), "all_gather of ", in.shape_str(), " into ", out.shape_str(),
          " over 1 rank");
    copy(out, in);
  }
  void broadcast(Tensor, int root) override {
    check(root == 0, "group ", name_, " has one rank: no broadcast from rank ", root);
  }
  // A group of one has no other rank to exchange with (the pipeline keeps its messages to
  // itself in a mailbox and never calls these).
  void send(const Tensor&, int peer, int) override { no_peer("send to", peer); }
  void recv(Tensor, int peer, int) override { no_peer("recv from", peer); }
  std::unique_ptr<Request> isend(const Tensor&, int peer, int) override {
    no_peer("isend to", peer);
  }
  std::unique_ptr<Request> irecv(Tensor, int peer, int) override { no_peer("irecv from", peer); }
  void barrier() override {}
  void all_reduce_host(double*, int, ReduceOp) override {}

 private:
  [[noreturn]] void no_peer(const char* what, int peer) const {
    fail("group ", name_, " has one rank: nothing to ", what, " rank ", peer);
  }
  void copy(Tensor out, const Tensor& in) {
    if (out.ptr == in.ptr) return;
    if (be_) return be_->copy(out, in);
    check(in.device == Device::CPU && out.device == Device::CPU, "group ", name_,
          " was given device memory but no backend");
    std::memcpy(out.ptr, in.ptr, in.bytes());
  }
};

}  // namespace

std::unique_ptr<Comm> make_self_comm(const std::string& name) {
  return std::make_unique<SelfComm>(name);
}

}  // namespace tetra
