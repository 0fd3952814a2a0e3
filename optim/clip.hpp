// Global-norm gradient clipping (torch.nn.utils.clip_grad_norm_). The norm is over every
// parameter of the model: each rank sums the squares of its reduced gradient shards, which
// are disjoint over dp_cp and pipeline stages; parameters that TP replicates (norms) are
// the same on every TP rank, so only TP rank 0 counts them, and a tied embedding's copy on the
// last pipeline stage is the first stage's matrix, counted there. The caller all-reduces the
// sums over the world.
#pragma once
#include "backend/backend.hpp"
#include "parallel/zero.hpp"

namespace tetra {

double local_grad_sum_squares(ZeroParams& zero, Backend& be, bool tp_rank0);

// Gradients are scaled by clip / (norm + 1e-6) when that is below 1; clip <= 0 turns
// clipping off.
inline float clip_scale(double grad_norm, double clip) {
  if (clip <= 0) return 1.f;
  const double s = clip / (grad_norm + 1e-6);
  return s < 1.0 ? float(s) : 1.f;
}

}  // namespace tetra
