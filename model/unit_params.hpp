// The parameters of a model's units as model code sees them: it borrows a unit's weights for
// one forward or input-gradient pass (B), accumulates into its gradients in the
// weight-gradient pass (W), and hands them over when a W is done. Who holds the parameters and how
// (sharded over data-parallel ranks and gathered for each use, or whole) is the holder's policy,
// not the model's: ZeroParams (parallel/zero.hpp) is the one tetra trains with.
#pragma once
#include "backend/tensor.hpp"
#include "model/config.hpp"

namespace tetra {

class UnitParams {
 public:
  virtual ~UnitParams() = default;

  // The unit's TP-local layout (its tensors' names, shapes and offsets in the flat buffers).
  virtual const UnitSpec& layout(int u) const = 0;
  // The dtype of the weights acquire() gives and of the activations computed with them.
  virtual DType compute_dtype() const = 0;

  // The unit's weights, flat, in the compute dtype, valid until release(u).
  virtual Tensor acquire(int u) = 0;
  virtual void release(int u) = 0;
  // The unit's gradient accumulator for this step, flat, fp32 (backwards add into it).
  virtual Tensor grads(int u) = 0;
  // Whether grads(u) holds nothing of this step yet, so that the next weight-gradient pass (W)
  // writes its gradients rather than adding them (weight-gradient GEMMs with beta 0; what
  // other ops accumulate, such as norm weights and embedding rows, zeroed first). The holder
  // decides (ZeroParams: the step's first W of u, under wgrad_beta0); false: always add.
  virtual bool grads_fresh(int u) const { return false; }
  // Whether unit u's next weight-gradient pass is its last of the step, the one whose
  // hand_over_grads completes its gradients.
  virtual bool last_weight_pass(int u) const = 0;
  // A weight-gradient pass (W) of unit u is done: its micro-batch's gradients are in grads(u).
  // The holder may sync them from here (ZeroParams reduce-scatters after the step's last
  // micro-batch's). Its input-gradient pass (B) may have run long before (a zero-bubble
  // schedule) or just before.
  virtual void hand_over_grads(int u) = 0;
  // A weight-gradient pass apart from its B begins (a zero-bubble schedule's W action). The
  // holder may finish here what earlier passes left in flight (ZeroParams under --overlap:
  // a queued reduce-scatter and the full gradients it reads, which would otherwise stay
  // beside the W states the rank still holds).
  virtual void begin_weight_pass() {}
};

}  // namespace tetra
