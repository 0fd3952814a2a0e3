// Whole tensors from shards: every rank holds TP-local pieces of the units of its pipeline
// stage (and, under ZeRO-3, only a dp_cp shard of those). gather_full assembles each
// parameter (or its gradient) whole on world rank 0, in Hugging Face names and shapes.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "parallel/chunks.hpp"
#include "parallel/grid.hpp"
#include "parallel/zero.hpp"

namespace tetra {

// Collective over the whole grid. Returns the full tensors on world rank 0, nothing
// elsewhere. grads = true gathers the reduced gradients of the last step instead.
std::map<std::string, std::vector<float>> gather_full(const Grid& grid, ZeroParams& params,
                                                      const ModelConfig& cfg,
                                                      const UnitPlacement& place, bool grads);

}  // namespace tetra
