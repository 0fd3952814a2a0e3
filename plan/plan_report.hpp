// `tetra plan`: the text it prints, from the options alone (no MPI, no backend), and the
// machine they describe.
#pragma once
#include <string>

#include "plan/machine.hpp"
#include "plan/setup.hpp"

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

// The whole report. Throws tetra::Error for a layout tetra train would refuse.
std::string plan_report(const RunSpec& spec, const ModelConfig& cfg, const Request& req);

}  // namespace tetra::plan
