// Every parallel layout is checked against a single rank training the same model on the
// same batch: per-step losses, step-0 gradients (gathered whole) and the final weights.
// A layout runs on the first TP*CP*PP*DP ranks of the mpirun while the reference runs on
// rank 0 alone; rank 0 compares.
#pragma once
#include <mpi.h>

#include <map>
#include <string>
#include <vector>

#include "train/match.hpp"
#include "train/trainer.hpp"

namespace tetra::test {

struct RunResult {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> grads0;   // after step 0, whole (rank 0)
  std::map<std::string, std::vector<float>> weights;  // after the last step, whole (rank 0)
  std::vector<StepResult> steps;                      // this rank's step results
  MemoryBytes memory;                                 // this rank's persistent bytes
  int micro_batches = 0;
  int64_t padded_params = 0;  // sum of padded unit sizes, this rank
  int64_t largest_alloc = 0;  // largest single buffer allocated inside step(), this rank
  int micro_batch = 0;
  int64_t tokens_per_micro_batch = 0;  // on this rank, after CP
  double val_loss = -1;                // after the last step, when the run validates
  std::string plan_diff;  // this rank's first disagreement with tetra plan's models, else ""
};

// Runs `config` for `steps` steps on the first TP*CP*PP*DP ranks of MPI_COMM_WORLD (DP 0
// counting as 1); other ranks wait. Collective over MPI_COMM_WORLD. The environment's
// TETRA_TEST_DEVICE and TETRA_TEST_COMM set the device section of every run:
// tools/gpu_check.sh runs the layouts on the GPU with "cuda" and "mpi". Every step of every
// rank is also checked against `tetra plan`'s models: the bytes each group sent equal the
// prediction exactly, the peak of backend memory is within 10% of it (a failed CHECK, and
// RunResult::plan_diff).
RunResult run_on(TrainConfig config, int steps);

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// How far a run is from the reference (train/match.hpp's Gaps).
Gaps gaps(const RunResult& ref, const RunResult& run);

// One tensor's gap, and the element where |run - ref| is largest.
struct TensorGap {
  double gap = 0;
  size_t at = 0;
};
// A gradient's: max |run - ref| / max |ref|.
TensorGap grad_gap(const std::vector<float>& ref, const std::vector<float>& run);
// A weight's: ||run - ref|| / ||ref||.
TensorGap weight_gap(const std::vector<float>& ref, const std::vector<float>& run);

// The matching criteria (train/match.hpp), by default fp32's: per-step losses within 1e-5
// relative; step-0 gradients within 1e-5 of each tensor's largest magnitude; final weights
// within 1e-4 in norm per tensor. Returns an empty string when they hold, else what broke.
// Call on rank 0.
std::string compare(const RunResult& ref, const RunResult& run,
                    const Gaps& bound = match_bounds("fp32"));

// The bounds of bf16 runs (train/match.cpp says why they are what they are).
inline const Gaps kBf16Bound = match_bounds("bf16");

// The model every layout test trains: small enough for 16 ranks on 2 cores, shaped so that
// TP 4, CP 4 and PP 4 all divide it; on one rank, global_batch sequences a step in
// micro-batches of micro_batch.
TrainConfig tiny_model(int global_batch, int micro_batch = 1);

// Runs c with the gradient plumbing's fusions (wgrad_beta0, grad_alias: backend/fusions.hpp)
// off, then on, the other switches as TETRA_UNFUSED sets them; returns what differs between
// the two in any bit of a loss, a step-0 gradient or a final weight ("" when nothing). The
// fusions are the plain path's arithmetic, 0 + x = x. Collective; rank 0 compares.
std::string grad_fusions_diff(const TrainConfig& c, int steps);

// Runs c with `device.overlap` off (blocking collectives), then on; returns what differs
// between the two in any bit of a loss, a step-0 gradient or a final weight, and whether the
// run with overlap queued nothing on dp_cp (c needs dp_cp > 1). Collective; rank 0 compares.
std::string overlap_diff(TrainConfig c, int steps);

// c laid out as TP x CP x PP x DP.
TrainConfig laid_out(TrainConfig c, int tp, int cp, int pp, int dp);

// The layout and the settings a test varies, for messages: "TP 2 x CP 2 x PP 2 x DP 2,
// ZeRO-3, SP, interleaved V 2, recompute, bf16".
std::string describe(const TrainConfig& c);

}  // namespace tetra::test
