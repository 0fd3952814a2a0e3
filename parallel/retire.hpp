// When a pipeline rank may free a message it sent: the first point at which one of its own
// receives proves that the peer has it. The executor (parallel/pipeline.cpp) waits for each
// such send and frees its buffer there; the planner (plan/memory.cpp) walks the same frees.
//
// The rule. Every rank's list is a pure function (make_schedule), so this rank knows the
// order of its peer q's actions. q's receives block until their data is in, and q posts a
// message no earlier than the action that makes it (a message held back for the link's order
// is posted later still). So when this rank receives a message that q made at its action j,
// q has received every message of this rank's that its actions up to j take. Those sends are
// delivered: their waits return at once (MPI still wants the wait before the buffer goes; on
// the NCCL path the free is ordered on the stream after the send), and they are freed there.
// The point depends on the lists alone, not on timing, so every run frees at the same action
// and the planner predicts the peak to the byte. What no receive proves (the last messages
// to a peer that sends nothing more) is freed at the step's end.
//
// Bound: on 1f1b, zb-h1, interleaved and zb-v a rank's sends to the next rank are retired by
// the gradients coming back, its sends to the previous rank by the activations coming
// forward, so it holds about one warm-up's worth, whatever m is, and no more than the
// schedule's most chunk activations in flight (max_in_flight_bound of rank 0), instead of
// every message of the step. GPipe's forwards get nothing back until the backwards begin:
// all m activations stay sent until then (beside m micro-batches' activations anyway).
// tests/unit/test_retire.cpp checks both, and the rule against simulations.
#pragma once
#include <map>
#include <span>
#include <vector>

#include "parallel/schedule.hpp"

namespace tetra {

// A message between chunks on two ranks: the activation into model chunk `chunk` (made by
// chunk - 1's forward) or the gradient into chunk `chunk` (made by chunk + 1's B), of one
// micro-batch. The receiving chunk names it, as the executor's tags do.
struct PipeMessage {
  bool gradient;
  int chunk;
  int micro_batch;
  bool operator==(const PipeMessage&) const = default;
};

// For each action i of make_schedule(kind, pp, vpp, micro_batches, rank, mode, weight_delay):
// the messages this rank sent to other ranks that action i's receive proves delivered and no
// earlier action's did (each message once, in the order its peer received them). Messages between
// two chunks of the rank itself (its local mailbox) are never listed.
struct RetiredSends {
  std::vector<PipeMessage> messages;  // all of them, in the order they are retired
  std::vector<int> first;             // [actions + 1]: action i's are [first[i], first[i + 1])
  // Per peer (another rank): every message this rank sends it, in the order the peer's list
  // receives them, which is the order the executor posts that link's messages in.
  std::map<int, std::vector<PipeMessage>> to_peer;
  std::span<const PipeMessage> at(size_t action) const {
    return {messages.data() + first[action], size_t(first[action + 1] - first[action])};
  }
};
RetiredSends retired_sends(ScheduleKind kind, int pp, int vpp, int micro_batches, int rank,
                           ScheduleMode mode = ScheduleMode::Train,
                           int weight_delay = kPaperWeightDelay);

}  // namespace tetra
