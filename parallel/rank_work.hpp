// The work of one rank: from the layout, the batch and the model, everything that decides
// which rank does what (its coordinates, the micro-batches, the pipeline chunks and their
// units, the token positions of context parallelism), as a pure function: no MPI, no
// backend, so it is tested alone and every rank computes the same.
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.hpp"
#include "parallel/chunks.hpp"
#include "parallel/config.hpp"
#include "parallel/grid.hpp"
#include "parallel/schedule.hpp"

namespace tetra {

struct RankWork {
  Layout layout;
  Coord coord;  // the rank's
  // Each DP rank takes global_batch / DP sequences per step, as micro_batches micro-batches
  // of micro_batch sequences.
  int micro_batch = 1, micro_batches = 1;
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  // ZB-H1's W delay (parallel/schedule.hpp): the paper's unless the planner lowers it so that
  // no rank holds more than 1F1B's fullest (plan::make_setup sets it, the trainer takes it).
  int weight_delay = kPaperWeightDelay;
  std::vector<ChunkPlan> chunks;  // every pipeline chunk, in model order
  UnitPlacement place;            // the units of the rank's pipeline stage
  // Positions in a sequence of the rank's tokens (its CP chunks), and of every CP rank's
  // tokens in the order the K/V all-gather lays them out.
  std::vector<int32_t> seq_pos, key_pos;

  // Tokens of one micro-batch on the rank: micro_batch * S / CP.
  int64_t local_tokens() const { return int64_t(micro_batch) * int64_t(seq_pos.size()); }
};

// Throws tetra::Error naming the first thing that does not fit: a layout that does not
// multiply to the world, a sequence CP cannot cut into 2*CP chunks, a batch DP or the
// micro-batch does not divide, a schedule that does not fit, tokens --sp cannot split.
RankWork rank_work(const LayoutConfig& layout, const BatchConfig& batch, const ModelConfig& cfg,
                   int world_size, int rank);

}  // namespace tetra
