// `tetra plan --json`: the whole plan as one JSON object, built once from the options: the
// model and its arithmetic, the batch, the rank grid (every rank's coordinates, layers,
// token positions and groups), memory per rank by component and stage and whether it fits,
// each group's calls, bytes and time, the bubble, the step time with MFU and HFU, and what a
// whole run costs. `tetra plan`'s text (plan_report.hpp) is written from this object alone,
// so the two cannot disagree. Its keys are documented in docs/design.md ("The plan as
// JSON"); sizes are bytes, times seconds, shares fractions of 1.
#pragma once
#include <string>

#include "plan/machine.hpp"
#include "plan/setup.hpp"
#include "util/json.hpp"

namespace tetra::plan {

// What tetra plan is asked beside the run: a preset, the machine and its overrides (0: the
// --gpu's), and the numbers a whole training run is timed by.
struct Request {
  std::string preset, gpu = "h100";
  double peak_tflops = 0;  // tetra train's --peak-tflops
  double memory_gb = 0, nvlink_gbs = 0, network_gbs = 0;
  int gpus_per_node = 0;
  double tokens = 0;           // D of 6ND (0: none)
  double achieved_tflops = 0;  // a measured rate per GPU, for the time of D tokens
  double mfu = 0;              // percent, where one MFU point is valued (0: the estimate)
};

// --gpu with the explicit overrides (--peak-tflops, --gpu-memory, --nvlink, --network,
// --gpus-per-node) applied; dtype: the precision computed in (fp32 runs at the fp32 peak).
Machine machine_of(const Request& req, const std::string& dtype);

// The most ranks the grid lists one by one ("ranks"): Llama 3 405B's 16,384 GPUs. Past it
// the grid gives its groups, stages and CP ranks, from which any rank follows.
inline constexpr int kMaxListedRanks = 16384;

// The plan. Throws tetra::Error for a layout tetra train would refuse.
json plan_json(const RunSpec& spec, const ModelConfig& cfg, const Request& req);

// The rank grid alone (the "grid" member of plan_json), for pictures of a layout.
json grid_json(const Setup& s, int gpus_per_node);

}  // namespace tetra::plan
