// The bytes each rank sends in one step, per group and per collective, counted as tetra's
// communicators count them (parallel/comm.hpp): a ring all-reduce sends 2(N-1)/N of the
// tensor, a reduce-scatter or all-gather (N-1)/N of the full tensor, a send its payload.
// The same counts the metrics record, so `tetra plan --compare` checks them exactly.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "parallel/comm.hpp"
#include "plan/setup.hpp"

namespace tetra::plan {

// The ring factor of one call: bytes sent per byte of the tensor (the full tensor for a
// reduce-scatter's input and an all-gather's output).
double ring_factor(CommOp op, int n);

// One kind of call of one step on one rank.
struct Collective {
  std::string group;  // tp, cp, pp, dp_cp, embed or world (the metrics' names)
  int size = 1;       // ranks in the group
  CommOp op = CommOp::AllReduce;
  std::string what;   // which tensor, for the table
  double tensor = 0;  // bytes of the tensor per call
  int64_t calls = 0;  // per step
  double bytes() const { return ring_factor(op, size) * tensor * double(calls); }
};

// Every collective a rank of pipeline stage `stage` makes in one step (ranks of one stage
// all send the same).
std::vector<Collective> step_traffic(const Setup& s, int stage);

// Bytes per group: tp, cp, pp, dp_cp and world, each present (0 for a group of one).
std::map<std::string, double> bytes_by_group(const std::vector<Collective>& calls);

}  // namespace tetra::plan
