// The pipeline executor: runs one pipeline rank's schedule (parallel/schedule.hpp) over
// its model chunks, receiving activations from the previous chunk's rank and gradients
// from the next one's, sending its own as soon as they exist.
//
// Sends are non-blocking (each outgoing tensor is copied into a buffer the request owns);
// a receive is posted when its action needs it and waited for at once, and that wait is
// the rank's bubble (with its tail, the time from its last pass to its pipeline's last rank's:
// train/trainer.cpp). The schedules' lists cannot deadlock (tests/unit/test_schedule*.cpp
// simulate every valid PP, V, m). Each message has its own tag (kind, chunk, micro-batch),
// and each link's messages are posted in the order its receiver takes them (the peer's list,
// a pure function, says which): the looped schedules make them in that order; zb-v's greedy
// order may make a gradient after an activation its peer takes later, and that activation
// then waits at the sender until the gradient exists, which costs the peer nothing (it takes
// the gradient first). So NCCL, whose point-to-point calls match in order and ignore tags,
// receives what it expects. Between two chunks on one rank
// (one pipeline rank and V > 1, or zb-v's turn from chunk PP - 1 to chunk PP on rank PP - 1)
// the "messages" go through a local mailbox. The ranks of a chunk's neighbours come from the
// schedule's placement (parallel/schedule.hpp: chunk_rank).
//
// A sent buffer is waited for and freed at the first receive that proves the peer has it
// (parallel/retire.hpp: a pure function of the lists, so at the same action on every run),
// the rest at the step's end.
//
// A chunk is a stage behind three calls: forward gives its output (or the loss), backward
// (B) takes the output's gradient and gives the input's, backward_weight (W) computes the
// weight gradients. Schedules without W actions have B run W at once. Each chunk keeps its
// own activations from a micro-batch's forward to its W.
//
// Training and evaluation are one loop over the schedule's list (ScheduleMode, as Megatron's
// schedules take forward_only): evaluation's list is training's forwards, and each forward's
// activations are discarded at once. Every message, either way, is one buffer of
// activation_numel elements of activation_dtype, made in one place and checked at the send,
// so that what one rank sends is what its peer allocated to receive.
#pragma once
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "model/batch.hpp"
#include "parallel/comm.hpp"
#include "parallel/retire.hpp"
#include "parallel/schedule.hpp"

namespace tetra {

// What a stage's forward gives the pipeline: its output, to send to the next chunk (empty on
// the chunk with the head, which keeps the loss on the device: PipelineStage::take_loss).
struct StageOutput {
  Tensor activation;  // [Tl, d], valid until the micro-batch's backward
};

// One model chunk as the executor sees it (transformer/chunk.hpp's ModelChunk).
class PipelineStage {
 public:
  virtual ~PipelineStage() = default;
  // Forward of micro-batch `id`; x_in is the previous chunk's output (null on the first).
  // loss_scale: what its backward will scale the loss's gradient by, or 0 when no backward
  // follows (evaluation), so that the head may start the backward in its forward (the fused
  // classifier).
  virtual StageOutput forward(int id, const MicroBatch& mb, const Tensor* x_in,
                              float loss_scale) = 0;
  // B, the input-gradient pass of micro-batch `id`; dout is the output's gradient (null on
  // the chunk with the head). Returns the input's gradient (empty on the first chunk).
  // run_weights: W follows at once (schedules without W actions), else backward_weight will.
  virtual Buffer backward(int id, const MicroBatch& mb, const Tensor* dout, float loss_scale,
                          bool run_weights) = 0;
  // W, the weight-gradient pass of micro-batch `id`, after its B.
  virtual void backward_weight(int id, const MicroBatch& mb) = 0;
  // Frees the activations of micro-batch `id`, whose backward will not come (evaluation).
  virtual void discard(int id) = 0;
  // The sum of the per-token losses of the forwards since the last call (the chunk with the
  // head; 0 elsewhere): the one wait for the loss, after the schedule.
  virtual double take_loss() { return 0; }
};

struct PipelineStats {
  double loss_sum = 0;      // over the micro-batches whose loss this rank computed
  double seconds = 0;       // wall time of the whole schedule
  double wait_seconds = 0;  // blocked in receives: the measured bubble, less the rank's tail
  // Per virtual stage of this rank: the wall seconds of its F, B and W passes, summed over the
  // step's micro-batches, each from its input received to its output's send posted (the time
  // the rank is not waiting). Where the schedule has no W actions B is the whole backward and
  // W stays 0. Wall time, as the wait beside it: the simulation at these costs
  // (train/trainer.cpp) then counts the same seconds as the measured bubble.
  std::vector<PassCosts> pass_seconds;
};

class PipelineExecutor {
 public:
  // chunks[v]: this rank's chunk of virtual stage v (model chunk chunk_id(placement(kind), PP,
  // rank, v): v * PP + rank looped).
  // activation_numel, activation_dtype: one activation or gradient sent between chunks.
  // weight_delay: ZB-H1's (make_schedule), RankWork's.
  PipelineExecutor(Backend& be, Comm& pp, std::vector<PipelineStage*> chunks, ScheduleKind kind,
                   int micro_batches, int64_t activation_numel, DType activation_dtype,
                   int weight_delay = kPaperWeightDelay);

  // Runs one training step; micro_batches[j] is micro-batch j (valid for the whole call).
  PipelineStats train_step(const std::vector<MicroBatch>& micro_batches, float loss_scale) {
    return execute(micro_batches, ScheduleMode::Train, loss_scale);
  }
  // Forward only (evaluation): the step's forwards in their order, which the schedule
  // simulation shows cannot deadlock either. Returns the loss sum as train_step does.
  PipelineStats evaluate(const std::vector<MicroBatch>& micro_batches) {
    return execute(micro_batches, ScheduleMode::ForwardOnly, 0);
  }

 private:
  enum Direction { kActivation = 0, kGradient = 1 };
  // The one loop: this rank's actions of make_schedule(kind, ..., mode), in order.
  PipelineStats execute(const std::vector<MicroBatch>& micro_batches, ScheduleMode mode,
                        float loss_scale);
  int tag(Direction d, int chunk_id, int micro_batch) const;
  // links_ anew for a step: to each peer, the tags of this rank's messages in the order the
  // peer's list receives them (retired_sends' to_peer).
  void plan_links(const RetiredSends& retired);
  // A message buffer [activation_numel] of activation_dtype: every receive's, every copy sent.
  Buffer message() const;
  void send(Buffer payload, int peer, int tag);
  // Waits for the sends a receive proved delivered and frees their buffers.
  void retire(std::span<const PipeMessage> delivered);
  void receive(Buffer& into, int peer, Direction d, int chunk_id, int micro_batch,
               PipelineStats& stats);

  Backend& be_;
  Comm& pp_;
  std::vector<PipelineStage*> chunks_;
  ScheduleKind kind_;
  int micro_batches_;
  int weight_delay_;
  int64_t activation_numel_;
  DType activation_dtype_;
  struct PendingSend {
    Buffer payload;
    std::unique_ptr<Comm::Request> request;
  };
  std::map<int, PendingSend> sends_;  // posted and not yet retired, by tag
  std::map<ScheduleMode, RetiredSends> retired_;
  struct Link {
    std::deque<int> order;       // tags not yet posted, in the peer's order of receiving them
    std::map<int, Buffer> made;  // messages made but not yet posted, by tag
  };
  std::map<int, Link> links_;      // by peer
  std::map<int, Buffer> mailbox_;  // messages to this rank itself (between its own chunks)
};

}  // namespace tetra
