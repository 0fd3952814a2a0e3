// tetra plan's output: the report (--json: its object) of the run its flags describe (--init-from's
// model when given, as tetra train would train it), with a line naming the settings given that do
// not change it (tetra plan takes tetra train's flags: the learning rate, the data and the outputs
// are read and checked, and said to be no part of a plan); or with --compare, the plan beside
// a run's metrics. cli/main.cpp prints it.
#pragma once
#include <string>

#include "cli/options.hpp"

namespace tetra {

struct PlanOutput {
  std::string text;
  int status = 0;  // 1 when --compare finds the run does not match the plan
};

// The output of `tetra plan` for `opt`; with write_files, --draw's SVG is written too. Throws
// tetra::Error for a layout or a model that tetra train would refuse.
PlanOutput plan_output(const PlanOptions& opt, bool write_files);

}  // namespace tetra
