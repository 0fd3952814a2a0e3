// Memory of one rank during a step, as tetra allocates it: the persistent ZeRO state, then a
// walk through the rank's schedule that allocates and frees what each forward and backward
// of a unit does (the activations a micro-batch keeps until its backward, the temporaries of
// each layer, the gathered ZeRO-3 weights and full gradients, the messages in flight). The
// peak is what Backend::alloc_stats reports; the trainer checks it against the machine
// before step 0 and `tetra plan --compare` against measured runs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plan/setup.hpp"

namespace tetra::plan {

struct Memory {
  // Persistent, this rank: weights (the full compute copy under ZeRO-1/2, the fp32 master
  // shard where it is separate), gradients (full and/or shard; at dp_cp 1 under grad_alias
  // the full gradients are the shard), Adam m and v.
  double weights = 0, grads = 0, adam = 0;
  double other = 0;        // token positions and the blocks' norm-gradient sums, kept across steps
  double step_peak = 0;    // above the persistent bytes, at the step's peak
  double activations = 0;  // of that: the most the micro-batches in flight keep for backward
  int in_flight = 0;       // most micro-batch chunks whose backward had not run yet
  double peak() const { return weights + grads + adam + other + step_peak; }
};

// One rank of pipeline stage `stage` (ranks of one stage hold the same sizes).
Memory stage_memory(const Setup& s, int stage);
// Its persistent part alone (weights, grads, adam, other), without walking the schedule.
Memory persistent_memory(const Setup& s, int stage);

// The largest peak over the stages, and its stage (of the stages that can be the fullest:
// the first two and the last; tests check it against every stage).
struct PeakMemory {
  Memory memory;
  int stage = 0;
};
PeakMemory peak_memory(const Setup& s);

// The fullest rank's peak were the run's schedule 1F1B (the bound ZB-H1 is held to).
double one_f_one_b_peak(const Setup& s);

// ZB-H1's W delay for this run (RankWork::weight_delay): the paper's (kPaperWeightDelay) where
// its fullest rank holds no more than 1F1B's fullest, else the largest delay below PP - 1 whose
// does (0, W right after B, where none does). Any other schedule: kPaperWeightDelay, unused.
int zb_weight_delay(const Setup& s);

// One change of a setting that brings the fullest stage's peak within `capacity` bytes: the
// setting's key (layout.schedule, optimizer.recompute, optimizer.zero, layout.sp), its new
// value, the peak with it, and why it helps.
struct MemoryFix {
  std::string key, value;
  double peak = 0;
  std::string why;
};
// The changes tried one at a time: 1F1B for GPipe (fewer micro-batches in flight),
// --recompute full, each higher ZeRO stage, SP. Those that fit, in that order.
std::vector<MemoryFix> memory_fixes(const Setup& s, double capacity);

// Scratch the CPU backend's attention takes outside its buffers: one [kAttentionBlock, S] score
// matrix per thread forward, two backward (backend/cpu/cpu_attention.cpp).
double cpu_attention_scratch(const Setup& s, int threads);

}  // namespace tetra::plan
