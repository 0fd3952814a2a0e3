// `tetra plan --compare METRICS`: the plan against a run's --metrics file (the run made with
// the same flags). The file holds rank 0's bytes per group for each step and the largest
// peak of backend memory over the ranks; the plan predicts both.
#pragma once
#include <string>

#include "plan/setup.hpp"

namespace tetra::plan {

struct Comparison {
  std::string table;  // predicted beside measured, per group; the run's throughput
  bool match = true;  // every group's bytes equal, every peak within 10%
};

// Throws tetra::Error when the file cannot be read or holds no step records.
Comparison compare_metrics(const Setup& s, const std::string& metrics_path);

}  // namespace tetra::plan
