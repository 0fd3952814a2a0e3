// The plan's step time: compute at the machine's peak stretched by the pipeline bubble, plus
// the traffic of each group at the speed of its link (NVLink inside a node, the network
// across). TP, CP and PP traffic waits for compute and compute for it; DP's overlaps the
// backward, so only what exceeds the compute counts. An estimate for this schedule, not a
// forecast: it leaves out kernels that run below peak, the latency of messages and any
// overlap of TP, CP and PP traffic with compute (kEstimateAssumes). tetra plan prints it;
// tetra sweep marks it.
#pragma once
#include <string>

#include "plan/machine.hpp"
#include "plan/setup.hpp"

namespace tetra::plan {

// Whether every group of dimension `dim` (0 tp, 1 cp, 2 pp, 3 dp) stays inside a node of g
// consecutive ranks.
bool inside_node(const Layout& l, int dim, int g);

// The link a group's traffic crosses (tp, cp, pp, dp_cp or world) and its speed.
struct Link {
  double bytes_per_s = 0;
  std::string name;  // the machine's node link (NVLink, shared memory) or "network"
};
Link group_link(const Setup& s, const Machine& mc, const std::string& group);

// Seconds of one step, by part. world's few bytes count with dp.
struct StepEstimate {
  bool known = false;  // false when the machine has no peak (a CPU without --peak-tflops)
  double compute = 0;  // the step's FLOPs (with recompute) over the ranks at peak
  double piped = 0;    // compute / (1 - the bubble's share of the step)
  double tp = 0, cp = 0, pp = 0, dp = 0;  // each group's bytes over its link
  double dp_exposed = 0;                  // what of dp exceeds the compute
  double step = 0;                        // piped + tp + cp + pp + dp_exposed
  double mfu = 0;                         // model FLOPs over the step at peak
  double hfu = 0;  // the FLOPs run (the recompute's forward included) over the step at peak
};
StepEstimate estimate_step(const Setup& s, const Machine& mc);

// What the estimate assumes, as the plan says it.
inline constexpr const char* kEstimateAssumes =
    "every kernel at peak (real ones run below it), messages without latency, no TP, CP or PP "
    "traffic hidden behind compute and all of DP's; it counts this schedule's bubble, which "
    "the interleaved schedule or more micro-batches shrink";

}  // namespace tetra::plan
