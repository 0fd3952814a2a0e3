// ZB-V's order (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", section 6): two chunks
// per rank placed as a V (Placement::V in parallel/schedule.hpp), F, B and W per chunk.
#pragma once
#include <vector>

#include "parallel/schedule.hpp"

namespace tetra {

// Every pipeline rank's list of one training step: lists[r] holds F, B and W of each
// (micro-batch < m, virtual stage < 2) once. Action::chunk is the virtual stage: 0 is model
// chunk r, 1 is model chunk 2 PP - 1 - r. Deterministic; see schedule_v.cpp for the rule.
// The lists are kept per thread for the last (PP, m) asked: valid until a call with others.
const std::vector<std::vector<Action>>& zero_bubble_v(int pp, int micro_batches);

}  // namespace tetra
