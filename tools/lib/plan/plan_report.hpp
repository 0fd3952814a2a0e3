// `tetra plan`: the text it prints, from the options alone (no MPI, no backend), and the
// machine they describe.
#pragma once
#include <string>

#include "tools/lib/options.hpp"
#include "tools/lib/plan/machine.hpp"
#include "tools/lib/plan/setup.hpp"

namespace tetra::plan {

// --gpu with the explicit overrides (--peak-tflops, --gpu-memory, --nvlink, --network,
// --gpus-per-node) applied.
Machine machine_of(const PlanOptions& opt);

// The whole report. Throws tetra::Error for a layout tetra train would refuse.
std::string plan_report(const PlanOptions& opt);

}  // namespace tetra::plan
