// The fast path's fusions ([22/29]), each with a switch back to the plain path it replaced, so
// that one fusion that fails on a device does not stop the rest of a check. The plain path stays
// the reference: every fusion is tested against it on the CPU, where CI runs.
//
//   TETRA_UNFUSED=rope_in_place,norm_residual   back to the plain path for those two
//   TETRA_UNFUSED=all                           every fusion off
//
// The names, and what each replaces:
//   rope_in_place     RoPE rotated in place on the fused [q;k;v] buffer, attention reading
//                     strided q, k, v from it and writing dq, dk, dv into one buffer
//                     (plain: rope_split_qkv / rope_merge_qkv copies)
//   norm_residual     the residual stream's gradient added inside RMSNorm's backward
//                     (plain: rmsnorm_backward, then add)
//   classifier        at TP 1, one pass over the logits: online softmax, loss statistics and
//                     dlogits in place (plain: ce_row_max, ce_stats, ce_backward)
//   vector_io         16-byte loads and stores in the GPU's memory-bound kernels (plain: one
//                     element a thread)
//   wgrad_beta0       the first micro-batch's weight-gradient GEMM writes (beta 0) instead of a
//                     fill then accumulate
//   grad_alias        at a data-parallel group of one, the gradient shard is the gradients
//                     themselves (plain: a copy)
//   embedding_spread  the GPU's embedding backward over (run of one token, column group)
//                     (plain: one block a run, serial over the run)
#pragma once
#include <string>

namespace tetra {

enum class Fusion {
  RopeInPlace,
  NormResidual,
  Classifier,
  VectorIo,
  WgradBeta0,
  GradAlias,
  EmbeddingSpread,
};
inline constexpr int kFusionCount = 7;

const char* fusion_name(Fusion f);
// Whether fusion f is on: TETRA_UNFUSED, read once per process (throws tetra::Error naming an
// unknown name).
bool fused(Fusion f);
// "fusions: all on" or "fusions: on except norm_residual, classifier (TETRA_UNFUSED)".
std::string fusions_line();
// Tests: set the switches as TETRA_UNFUSED would (the variable itself is then ignored).
void set_unfused(const std::string& list);

}  // namespace tetra
