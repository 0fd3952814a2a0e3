// Data parallelism with ZeRO / FSDP sharding over the dp_cp group (the N ranks that hold
// the same weights). Each unit (embedding, block, head) keeps its TP-local parameters in
// one flat buffer of n elements, padded to np = ceil(n/N)*N and split into N shards of
// s = np/N; rank r owns elements [r*s, (r+1)*s).
//
//            persistent per rank                      transient
//   ZeRO-1   weights np, grads np + s, Adam 2s         -
//   ZeRO-2   weights np, grad shard s, Adam 2s         full grads np during backward
//   ZeRO-3   weight shard s, grad shard s, Adam 2s     full weights np around each use,
//                                                      full grads np during backward
//
// Gradients are summed (the loss is already divided by the global token count) by one
// reduce-scatter per unit per step, issued when the unit's last micro-batch backward is
// done; AdamW updates the shard; ZeRO-1/2 all-gather the updated weights, ZeRO-3 gathers
// them before each forward and each backward instead.
#pragma once
#include <vector>

#include "model/backend.hpp"
#include "model/config.hpp"
#include "parallel/comm.hpp"

namespace tetra {

struct MemoryBytes {
  int64_t params = 0, grads = 0, adam = 0;  // persistent, this rank
};

class ShardedParams {
 public:
  // units: the units this rank holds (its pipeline chunks), TP-local layouts.
  // sequence_parallel: the TP group under --sp, where each TP rank sees only its share of
  // the tokens, so the gradients of TP-replicated weights (norms) are partial and are
  // all-reduced over it before the dp_cp reduce-scatter; nullptr otherwise.
  ShardedParams(Backend& be, Comm& dp_cp, std::vector<UnitLayout> units, int zero_stage,
                Comm* sequence_parallel = nullptr);

  int size() const { return int(units_.size()); }
  const UnitLayout& layout(int u) const { return units_[u].layout; }
  int zero_stage() const { return zero_; }

  // Writes the unit's TP-local weights from a host vector of layout(u).numel floats (every
  // dp_cp rank passes the same values; each keeps what its stage keeps).
  void load(int u, const std::vector<float>& host);
  // The unit's full TP-local weights on the host (all-gathers under ZeRO-3: collective
  // over dp_cp).
  std::vector<float> gather_to_host(int u);

  // Forward / backward bracket for one unit: gather (ZeRO-3) and release.
  void acquire(int u);
  void release(int u);
  Tensor weights(int u) const;  // valid between acquire and release under ZeRO-3
  Tensor grads(int u);          // full accumulator for this step, allocated on first use

  void begin_step(int micro_batches);
  // Call after each micro-batch's backward of unit u; after the last one it reduce-scatters
  // the unit's gradients into this rank's shard.
  void backward_done(int u);

  // Sum of squared gradient entries in this rank's shards, split into parameters that TP
  // splits (count on every TP rank) and those it replicates (count on one).
  void grad_sum_squares(double& split, double& replicated) const;
  // The gradient shard of unit u, reduced (valid after backward_done for every micro-batch).
  Tensor grad_shard(int u) const;
  // Full reduced gradient of unit u on the host (all-gathers the shards; for tests).
  std::vector<float> gather_grads_to_host(int u);

  // AdamW on every shard, then (ZeRO-1/2) all-gather the updated weights.
  void adam_step(const Backend::AdamW& h);

  MemoryBytes persistent_bytes() const;

  // Checkpoints. The piece of each parameter this rank owns: [begin, end) of the
  // parameter's TP-local flattened elements, with host copies of the master weights and
  // both Adam moments. Every element of every unit is in exactly one rank's shard of its
  // dp_cp group.
  struct OwnedSlice {
    const ParamInfo* param;
    int64_t begin, end;
    std::vector<float> weights, adam_m, adam_v;
  };
  std::vector<OwnedSlice> owned_slices() const;
  // Restores unit u from whole TP-local host vectors (weights, Adam m and v), keeping what
  // this rank's ZeRO stage keeps.
  void load_state(int u, const std::vector<float>& weights, const std::vector<float>& adam_m,
                  const std::vector<float>& adam_v);

 private:
  struct Unit {
    UnitLayout layout;
    int64_t padded = 0, shard = 0;      // np and s
    Buffer weights;                     // np (ZeRO-1/2, or gathered under ZeRO-3)
    Buffer weight_shard;                // s (ZeRO-3 only: the master copy)
    Buffer grads;                       // np (ZeRO-1: persistent; else during backward)
    Buffer grad_shard, adam_m, adam_v;  // s each
    int backward_calls = 0;
  };
  Tensor master_shard(Unit& u);
  // Calls f(param, begin, end) for the part [begin, end) of this rank's shard (offsets
  // relative to the shard) that holds each parameter.
  template <typename F>
  void for_each_segment(const Unit& u, F f) const;

  Backend& be_;
  Comm& comm_;
  Comm* sp_tp_;
  int zero_;
  int micro_batches_ = 1;
  std::vector<Unit> units_;
};

}  // namespace tetra
