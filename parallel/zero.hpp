// Data parallelism with ZeRO sharding (stage 3 is what PyTorch calls FSDP) over the dp_cp
// group (the N ranks that hold the same weights). Each unit (embedding, block, head) keeps its
// TP-local parameters in one flat buffer of n elements, padded to np = ceil(n/N)*N and split into N
// shards of s = np/N; rank r owns elements [r*s, (r+1)*s).
//
//            persistent per rank                      transient
//   ZeRO-1   weights np, grads np + s, Adam 2s         -
//   ZeRO-2   weights np, grad shard s, Adam 2s         full grads np during backward
//   ZeRO-3   weight shard s, grad shard s, Adam 2s     full weights np around each use,
//                                                      full grads np during backward
// At a dp_cp group of one (s = np) the grad shard is the full gradients themselves under
// grad_alias (backend/fusions.hpp): grads np, kept at every stage, and no copy between them.
//
// Precision: the weights the model computes with are in the compute dtype (fp32, or bf16
// under --dtype bf16); the master weights, gradients and Adam moments are always fp32. In
// fp32 under ZeRO-1/2 the master shard is this rank's slice of the full weights; otherwise
// (ZeRO-3, or bf16) it is a separate fp32 shard of s, rounded into the compute copy before
// each all-gather, so bf16 runs gather bf16 (the ZeRO paper's 2 + 2 + 12 bytes per
// parameter: bf16 weights, and here fp32 rather than bf16 gradients, fp32 master and Adam).
//
// Gradients are summed (the loss is already divided by the global token count) by one
// reduce-scatter per unit per step, issued when the unit's last micro-batch's weight-gradient
// pass (W, transformer/block.hpp) is done; AdamW (optim/adamw.hpp) updates the shard; ZeRO-1/2 then
// all-gather the updated weights, ZeRO-3 gathers them before each forward and each input-gradient
// pass (B) instead (W reads no weights).
//
// Overlap (--overlap on): the same collectives, queued (parallel/comm.hpp) so that they run
// while the rank computes. A unit is a bucket: its flat buffer is already contiguous, and a
// collective over exactly the blocking path's buffer, with its count, is the blocking call
// itself (Open MPI chooses its algorithm by size, so a larger bucket could sum in another
// order and change bits). The reduce-scatter of a unit's gradients runs under the backward of
// the units before it; ZeRO-1/2's all-gather of the updated weights under the end of the step
// and the next step's forward up to the unit; ZeRO-3 gathers the next unit's weights one
// unit ahead within the unit's pipeline chunk (the unit after the one acquired, or the one
// before it once acquires walk backwards), into a prefetch slot of one unit. A chunk's
// forward walks its units up from its first and its backward down from its last, so a walk
// starts at a chunk's end, where a guess of the wrong direction leaves the chunk and is not
// made, the embedding is not prefetched on the way down (zb-h1's B does not acquire it), and
// the tied matrix the head reads is no step of the walk (PP 1, zb-v's rank 0):
// every prefetched unit is the next acquired, and the bytes are the blocking path's. Under a
// schedule whose W runs apart from its B (zb-h1, zb-v) the backward walk prefetches nothing:
// there the units above still hold what their W reads (transformer/block.hpp), almost what
// they held awaiting B, so a second unit's weights beside a lower unit's B would lift the
// peak above 1F1B's, whose W freed the units above (docs/design.md, "ZB-H1"). Each
// result is waited for where the blocking path would have it: a unit's weights at its acquire, its
// reduced gradients at shard() (the optimizer, the gradient norm) and its full gradients' next use.
// Under ZeRO-2/3 a unit's full gradients live until the next unit's hand-over (a unit more than the
// blocking path holds), and ZeRO-3's prefetch slot holds one unit's weights more. ZeRO-1/2's
// all-gathers of the updated weights run on into the next step's forward, each waited for at its
// unit's acquire. At a dp_cp group of one the blocking path runs, unless grad_alias is off
// (queues()).
#pragma once
#include <span>
#include <vector>

#include "backend/backend.hpp"
#include "backend/fusions.hpp"
#include "model/config.hpp"
#include "model/unit_params.hpp"
#include "parallel/comm.hpp"

namespace tetra {

struct MemoryBytes {
  int64_t params = 0, grads = 0, adam = 0;  // persistent, this rank
};

// The model's chunks see it as their UnitParams: acquire and release are the ZeRO-3 gather and
// free around each use, and a unit's gradients handed over after its last micro-batch are
// reduce-scattered at once, overlapping the rest of the backward.
class ZeroParams final : public UnitParams {
 public:
  // units: the units this rank holds (its pipeline chunks), TP-local layouts.
  // sequence_parallel: the TP group under --sp, where each TP rank sees only its share of
  // the tokens, so the gradients of TP-replicated weights (norms) are partial and are
  // all-reduced over it before the dp_cp reduce-scatter; nullptr otherwise.
  // compute: the dtype of weights(u); bf16 needs a mixed-precision backend
  // (make_mixed_precision_backend).
  // overlap: queue the dp_cp collectives (see above) rather than block on them (queues()).
  ZeroParams(Backend& be, Comm& dp_cp, std::vector<UnitSpec> units, int zero_stage,
             Comm* sequence_parallel = nullptr, DType compute = DType::F32, bool overlap = false);
  ~ZeroParams() override;  // waits for what is still queued

  // Whether the gradient shard is the gradients themselves (grad_alias): at a dp_cp group of
  // one, with the fusion on. The planner asks the same question.
  static bool aliases_grads(int dp_cp_size) { return dp_cp_size == 1 && fused(Fusion::GradAlias); }
  // Whether --overlap queues the dp_cp collectives: wherever there are gradients to hand over,
  // so at a group of one too when they are not aliased (with grad_alias off, the queue that one
  // GPU can run: NCCL's second stream and communicator, tools/gpu_check.sh). The planner asks
  // the same question.
  static bool queues(bool overlap, int dp_cp_size) { return overlap && !aliases_grads(dp_cp_size); }

  int size() const { return int(units_.size()); }
  // The units of each pipeline chunk of this rank (indices into units), for ZeRO-3's
  // prefetch under overlap, which stays inside a chunk; unset: all one chunk. weights_apart:
  // the schedule runs W apart from B, and the backward walk prefetches nothing (see above).
  void set_chunks(const std::vector<std::vector<int>>& chunks, bool weights_apart = false);
  const UnitSpec& layout(int u) const override { return units_[u].layout; }
  int zero_stage() const { return zero_; }
  DType compute_dtype() const override { return compute_; }

  // Writes the unit's TP-local weights from a host vector of layout(u).numel floats (every
  // dp_cp rank passes the same values; each keeps what its stage keeps).
  void load(int u, const std::vector<float>& host);
  // The unit's full TP-local master weights on the host (all-gathers the master shards under
  // ZeRO-3 or bf16: collective over dp_cp).
  std::vector<float> gather_to_host(int u);

  // Forward / backward bracket for one unit: the ZeRO-3 all-gather of its weights (returning
  // the compute copy, valid until release), and freeing them again (both no-ops under
  // ZeRO-1/2, which keep the full weights).
  Tensor acquire(int u) override;
  void release(int u) override;
  Tensor grads(int u) override;  // full accumulator for this step, allocated on first use
  // Under wgrad_beta0 (backend/fusions.hpp): no weight-gradient pass (W) of unit u yet this
  // step, so its gradients hold last step's values, which that W overwrites (begin_step fills
  // nothing). Otherwise always false: begin_step zeroed them and backwards add.
  bool grads_fresh(int u) const override;
  bool last_weight_pass(int u) const override;

  // Tied embeddings (model/config.hpp: tie_embeddings): unit `unit` of this rank holds the
  // matrix the embedding and the LM head share. Where one rank runs both ends (PP 1, zb-v) the unit
  // has two backwards per micro-batch (the head's, then the embedding's: uses 2), and its
  // gradient is the sum of both. At PP > 1 the first stage's embedding unit and the last
  // stage's copy of it (`copy`, UnitPlacement::tied_copy) each hold the matrix, and
  // sum_tied_grads adds their gradients over `group` (the embedding group) before the update,
  // so that both take the same step; the copy counts in neither the gradient norm nor
  // checkpoints (counted).
  struct Tied {
    int unit = -1;
    int uses = 1;
    bool copy = false;
    Comm* group = nullptr;
  };
  void tie(const Tied& t);
  // After the step's backwards (every unit's reduce-scatter issued): the tied matrix's gradient
  // shard all-reduced over the embedding group; nothing without one. Collective over it.
  void sum_tied_grads();
  // Whether unit u is the model's own here, rather than the copy of a tied matrix another stage
  // holds: what the gradient norm sums and checkpoints store.
  bool counted(int u) const { return !(tied_.copy && u == tied_.unit); }

  // A step of `micro_batches` micro-batches begins: gradients zeroed (unless wgrad_beta0 has
  // each unit's first W overwrite them), W passes counted anew.
  void begin_step(int micro_batches);
  // Counts the weight-gradient passes (W) of unit u; after the step's last micro-batch's (and
  // the unit's last use in it) the unit's gradients are complete and are synced
  // (reduce_scatter_grads).
  void hand_over_grads(int u) override;
  // Under --overlap, ZeRO-2/3: waits for the queued gradient reduce-scatter and frees the full
  // gradients it read (held until the next hand-over otherwise: on the last stage of a
  // zero-bubble schedule the head's, handed over in its last B, beside the pending W).
  void begin_weight_pass() override;
  // ZeRO-1/2, after the optimizer step: every rank's updated master shard, rounded to the
  // compute dtype (by AdamW itself into Shard::copy under bf16), all-gathered into the full
  // weights. ZeRO-3 gathers at each use instead (a no-op here).
  void all_gather_weights();

  // This rank's shard of unit u (s elements each): master weights, reduced gradients
  // (valid after reduce_scatter_grads; waited for here under overlap) and Adam moments; segments
  // are the parameters that lie in it, as [begin, end) offsets within the shard. copy: where the
  // optimizer writes the updated weights rounded to bf16 (this rank's slice of the ZeRO-1/2 compute
  // copy), or empty (fp32, whose master is that slice, and ZeRO-3, which rounds at each gather).
  struct Segment {
    const ParamInfo* param;
    int64_t begin, end;
  };
  struct Shard {
    Tensor weights, grads, adam_m, adam_v;
    std::span<const Segment> segments;
    Tensor copy;
  };
  Shard shard(int u);
  // Full reduced gradient of unit u on the host (all-gathers the shards; for tests).
  std::vector<float> gather_grads_to_host(int u);

  MemoryBytes persistent_bytes() const;

  // Checkpoints. The piece of each parameter this rank owns: [begin, end) of the
  // parameter's TP-local flattened elements, with copies of the master weights and both Adam
  // moments in `host` (grown as needed, kept for the next checkpoint: pinned on a GPU), queued
  // behind the step's work (Backend::download_behind): read them after the backend's
  // copies_landed(). Every element of every counted unit is in exactly one rank's shard of its
  // dp_cp group (a tied copy's are the first stage's).
  struct OwnedSlice {
    const ParamInfo* param;
    int64_t begin, end;
    const float *weights, *adam_m, *adam_v;  // end - begin elements each, in `host`
  };
  std::vector<OwnedSlice> owned_slices(HostBuffer& host);
  // Restores unit u from whole TP-local host vectors (weights, Adam m and v), keeping what
  // this rank's ZeRO stage keeps.
  void load_state(int u, const std::vector<float>& weights, const std::vector<float>& adam_m,
                  const std::vector<float>& adam_v);

 private:
  struct Unit {
    UnitSpec layout;
    int64_t padded = 0, shard = 0;  // np and s
    Buffer weights;                 // np, compute dtype (ZeRO-1/2, or gathered under ZeRO-3)
    Buffer master;  // s, fp32 (ZeRO-3 or bf16; else the master is a slice of weights)
    Buffer grads;   // np (ZeRO-1 or grad_alias: persistent; else during backward)
    Buffer grad_shard, adam_m, adam_v;  // s each (grad_shard empty under grad_alias)
    std::vector<Segment> segments;      // this rank's shard, fixed at construction
    int weight_passes = 0;              // W passes handed over this step
    // Overlap: the queued reduce-scatter of the gradients (with the full gradients it reads,
    // held until it is done under ZeRO-2/3), and ZeRO-1/2's queued all-gather of the weights.
    // The buffer first: members are destroyed in reverse, so a request is waited for (its
    // destructor) before the memory it reads is freed.
    Buffer grads_in_flight;
    std::unique_ptr<Comm::Request> grad_sync, weight_sync;
  };
  // The unit's queued collectives done (a no-op without overlap); settle_grads: its gradients'
  // alone.
  void settle(Unit& u);
  void settle_grads(Unit& u);
  void settle_all();
  // settle_all, then the host waits for them, where NCCL's errors are polled and the watchdog
  // sees the call, not in a later synchronisation of another stream (a checkpoint's copies,
  // the end of a run) that waits behind them.
  void settle_all_on_host();
  // ZeRO-3 under overlap: queues the all-gather of unit i's weights into the prefetch slot,
  // replacing what the slot held; drop_prefetch empties it (weights about to change).
  void prefetch(int i);
  void drop_prefetch();
  Tensor master_shard(const Unit& u) const;
  Tensor grad_shard(const Unit& u) const;  // u.grad_shard, or u.grads under grad_alias
  // The data-parallel gradient sync of unit u: its full gradients reduce-scattered over
  // dp_cp into this rank's shard (summed first over TP under --sp for replicated weights).
  void reduce_scatter_grads(Unit& u);
  // Rounds the master shard into this rank's slice of u.weights (unless the optimizer has:
  // rounded) and all-gathers the slices.
  void publish(Unit& u, bool rounded = false);

  Backend& be_;
  Comm& comm_;
  Comm* sp_tp_;
  int zero_;
  DType compute_;
  bool alias_;         // grad_alias at dp_cp 1: the grad shard is u.grads
  bool fresh_writes_;  // wgrad_beta0: each step's first W writes the gradients
  bool overlap_;
  int micro_batches_ = 1;
  std::vector<Unit> units_;
  Tied tied_;
  std::vector<int> grads_queued_;  // units whose gradient sync is queued, oldest first
  // ZeRO-3 under overlap: the last unit acquired (walk direction), and the prefetch slot.
  int last_acquired_ = -1;
  std::vector<int> chunk_of_;  // per unit
  bool prefetch_down_ = true;  // whether the backward walk prefetches
  struct Prefetch {
    int unit = -1;
    Buffer weights;
    std::unique_ptr<Comm::Request> request;
  } prefetch_;
};

}  // namespace tetra
