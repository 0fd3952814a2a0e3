// ZeroParams' queue (--overlap, parallel/zero.hpp): made with overlap, it opens its group's
// queue at once (so that no member sets up NCCL's second communicator in the middle of a
// step), and hands the gradients over and gathers the updated weights through the queue
// wherever there are gradients to hand over: on a group of one only with grad_alias off, the
// queue one GPU can run (tools/gpu_check.sh's gpu_resume). The updated weights' gathers are
// waited for at each unit's acquire, not at the next step's start. The bits of that path
// against the blocking one are the layout tests' (tests/mpi/test_dp.cpp).
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/fusions.hpp"
#include "model/config.hpp"
#include "parallel/self_comm.hpp"
#include "parallel/zero.hpp"

namespace tetra {
namespace {

// A request that counts its waits.
class Counted final : public Comm::Request {
 public:
  explicit Counted(int& waits) : waits_(waits) {}
  void wait() override { ++waits_; }

 private:
  int& waits_;
};

// A group of one that counts what ZeroParams asks of the queue.
class CountingComm final : public Comm {
 public:
  CountingComm() : Comm("dp_cp"), one_(make_self_comm("dp_cp")) {}
  const char* kind() const override { return "self"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce(Tensor x, ReduceOp op) override { one_->all_reduce(x, op); }
  void reduce_scatter(Tensor out, const Tensor& in) override { one_->reduce_scatter(out, in); }
  void all_gather(Tensor out, const Tensor& in) override { one_->all_gather(out, in); }
  void broadcast(Tensor x, int root) override { one_->broadcast(x, root); }
  void send(const Tensor& x, int peer, int tag) override { one_->send(x, peer, tag); }
  void recv(Tensor x, int peer, int tag) override { one_->recv(x, peer, tag); }
  std::unique_ptr<Request> isend(const Tensor& x, int peer, int tag) override {
    return one_->isend(x, peer, tag);
  }
  std::unique_ptr<Request> irecv(Tensor x, int peer, int tag) override {
    return one_->irecv(x, peer, tag);
  }
  void barrier() override { one_->barrier(); }
  void all_reduce_host(double* x, int n, ReduceOp op) override { one_->all_reduce_host(x, n, op); }
  std::unique_ptr<Request> queue_reduce_scatter(Tensor out, const Tensor& in) override {
    ++reduce_scatters;
    return Comm::queue_reduce_scatter(out, in);
  }
  std::unique_ptr<Request> queue_all_gather(Tensor out, const Tensor& in) override {
    ++all_gathers;
    all_gather(out, in);
    return std::make_unique<Counted>(gathers_waited);
  }
  void open_queue() override { ++opened; }

  int opened = 0, reduce_scatters = 0, all_gathers = 0, gathers_waited = 0;

 private:
  std::unique_ptr<Comm> one_;
};

}  // namespace

TEST_CASE(
    "zero: --overlap opens the queue when made, queues a group of one's hand-over only without "
    "grad_alias, and waits for a unit's weights at its acquire") {
  ModelConfig cfg;
  cfg.vocab = 32, cfg.layers = 2, cfg.dim = 16, cfg.heads = 4, cfg.kv_heads = 2;
  cfg.ffn_dim = 24, cfg.seq_len = 8;
  cfg.validate();
  const std::vector<UnitSpec> units = make_units(cfg, 1, 0);
  const int n = int(units.size());
  const char* env = std::getenv("TETRA_UNFUSED");
  for (const bool alias : {true, false})
    for (const int zero : {1, 2}) {
      CAPTURE(alias);
      CAPTURE(zero);
      set_unfused(alias ? "" : "grad_alias");
      CHECK(ZeroParams::queues(true, 1) == !alias);
      CHECK_FALSE(ZeroParams::queues(false, 1));
      auto be = make_cpu_backend(1);
      CountingComm dp;
      {
        ZeroParams params(*be, dp, units, zero, nullptr, DType::F32, true);
        CHECK(dp.opened == (alias ? 0 : 1));
        // A step's gradients, handed over unit by unit, then the updated weights gathered.
        params.begin_step(1);
        std::vector<std::vector<float>> want(n);
        for (int u = 0; u < n; ++u) {
          const int64_t numel = params.layout(u).numel;
          want[u].resize(size_t(numel));
          for (int64_t i = 0; i < numel; ++i) want[u][size_t(i)] = float(u + 1) + 1e-3f * float(i);
          be->upload(params.grads(u).flat(0, numel), want[u].data());
          params.hand_over_grads(u);
        }
        for (int u = 0; u < n; ++u) CHECK(params.gather_grads_to_host(u) == want[u]);
        // The updated weights' gathers run on into the next step: its start waits for none
        // of them, a unit's acquire for its own.
        params.all_gather_weights();
        params.begin_step(1);
        CHECK(dp.gathers_waited == 0);
        params.acquire(0);
        CHECK(dp.gathers_waited == (alias ? 0 : 1));
        params.release(0);
      }
      CHECK(dp.reduce_scatters == (alias ? 0 : n));
      CHECK(dp.all_gathers == (alias ? 0 : n));
    }
  set_unfused(env ? env : "");
}

}  // namespace tetra
