// The optimizer step on whatever the ZeRO stage hands this rank: AdamW (torch.optim.AdamW
// semantics, the backend's adamw op) over each unit's shard, one call per unit with a segment
// per parameter, so that weight decay applies to matrices only (ParamInfo::decay). Clipping enters
// as grad_scale. Under bf16 with ZeRO-1/2 the same pass rounds the updated weights into this rank's
// slice of the compute copy (ZeroParams::Shard::copy); the caller then all-gathers the updated
// weights (ZeroParams::all_gather_weights).
#pragma once
#include "backend/backend.hpp"
#include "parallel/zero.hpp"

namespace tetra {

struct AdamWConfig {
  double lr = 3e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};

// step counts from 1; grad_scale multiplies the gradients first (clip_scale).
void adamw_step(ZeroParams& zero, Backend& be, const AdamWConfig& c, float grad_scale,
                int64_t step);

}  // namespace tetra
