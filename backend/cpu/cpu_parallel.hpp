// When a CPU op opens an OpenMP parallel region. Every op gives the same bits on any number of
// threads (each element, row, column block, chunk or tile is computed by one thread in a fixed
// order, and partial sums are added in a fixed order), so this decides speed only. A region
// costs microseconds on a quiet machine, but on a loaded one it lasts until the scheduler has
// run every thread of the team, milliseconds for a thread that was descheduled: a small op
// then waits far longer than it computes. Below these sizes an op runs on the calling thread
// (the region's `if` clause), so a small model's step does not depend on the other cores' load.
#pragma once
#include <cstdint>

namespace tetra {

// Elements an elementwise or row-wise op reads or writes: 2^16 floats take tens of
// microseconds on one core.
constexpr int64_t kParallelElements = int64_t(1) << 16;
// Multiply-adds of a product (m n k; attention's batch x heads x Sq x Sk x head_dim): 2^22 take
// about 50 microseconds on one core.
constexpr int64_t kParallelMacs = int64_t(1) << 22;

inline bool parallel_elements(int64_t n) {
  return n >= kParallelElements;
}
inline bool parallel_macs(int64_t n) {
  return n >= kParallelMacs;
}

}  // namespace tetra
