#include "parallel/comm.hpp"

namespace tetra {
namespace {

// The request of a call that ran before it was returned.
class Done final : public Comm::Request {
 public:
  void wait() override {}
};

}  // namespace

std::unique_ptr<Comm::Request> Comm::queue_reduce_scatter(Tensor out, const Tensor& in) {
  reduce_scatter(out, in);
  return std::make_unique<Done>();
}

std::unique_ptr<Comm::Request> Comm::queue_all_gather(Tensor out, const Tensor& in) {
  all_gather(out, in);
  return std::make_unique<Done>();
}

}  // namespace tetra
