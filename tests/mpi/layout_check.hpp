// Every parallel layout is checked against a single rank training the same model on the
// same batch: per-step losses, step-0 gradients (gathered whole) and the final weights.
// A layout runs on the first TP*CP*PP*DP ranks of the mpirun while the reference runs on
// rank 0 alone; rank 0 compares.
#pragma once
#include <mpi.h>

#include <map>
#include <string>
#include <vector>

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
};

// Runs `config` for `steps` steps on the first TP*CP*PP*DP ranks of MPI_COMM_WORLD (DP 0
// counting as 1); other ranks wait. Collective over MPI_COMM_WORLD. The environment's
// TETRA_TEST_DEVICE and TETRA_TEST_COMM set the device section of every run:
// tools/gpu_check.sh runs the layouts on the GPU with "cuda" and "mpi". Every step of every
// rank is also checked against `tetra plan`'s models: the bytes each group sent equal the
// prediction exactly, the peak of backend memory is within 10% of it (a failed CHECK).
RunResult run_on(TrainConfig config, int steps);

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// How far a run is from the reference: the largest per-step relative loss gap; the largest
// step-0 gradient gap over each tensor's largest magnitude; the largest final-weight gap in
// norm over the tensor's norm.
struct Gaps {
  double loss = 0, grad = 0, weight = 0;
};
Gaps gaps(const RunResult& ref, const RunResult& run);

// The matching criteria, by default fp32's: per-step losses within 1e-5 relative; step-0
// gradients within 1e-5 of each tensor's largest magnitude; final weights within 1e-4 in
// norm per tensor. Returns an empty string when they hold, else what broke. Call on rank 0.
std::string compare(const RunResult& ref, const RunResult& run,
                    const Gaps& bound = {1e-5, 1e-5, 1e-4});

// bf16 keeps 8 significant bits, so one rounding moves a value by up to 2^-9 = 2e-3
// relative. A layout changes which partial sums get rounded (TP all-reduces bf16 partial
// sums, CP reduce-scatters bf16 dK/dV), so its activations differ from one rank's by a few
// roundings, as bf16's do from fp32's. Adam then spreads such differences into the weights:
// in its first steps each weight moves by about lr whatever its gradient's size, so where a
// gradient is near zero a rounding can flip the move. The bounds were twice the largest gaps
// measured over these layouts at lr 1e-2 (loss 1.4e-3, gradient 1.8e-2, weights 5.7e-2),
// the size of bf16's own gaps from fp32 on one rank (test_bf16.cpp's second test case prints both);
// at the layout tests' lr of 3e-3 the largest are loss 4.4e-4, gradient 1.8e-2, weights 1.3e-2. A
// real fault (a missing reduction, a wrong slice) moves the loss by orders of magnitude more.
inline const Gaps kBf16Bound{3e-3, 4e-2, 1.2e-1};

// The model every layout test trains: small enough for 16 ranks on 2 cores, shaped so that
// TP 4, CP 4 and PP 4 all divide it; on one rank, global_batch sequences a step in
// micro-batches of micro_batch.
TrainConfig tiny_model(int global_batch, int micro_batch = 1);

// c laid out as TP x CP x PP x DP.
TrainConfig laid_out(TrainConfig c, int tp, int cp, int pp, int dp);

// The layout and the settings a test varies, for messages: "TP 2 x CP 2 x PP 2 x DP 2,
// ZeRO-3, SP, interleaved V 2, recompute, bf16".
std::string describe(const TrainConfig& c);

}  // namespace tetra::test
