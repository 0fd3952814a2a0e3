// The picture of a `tetra sweep`: one row per layout, fastest first, its measured step time
// split into compute, exposed communication and the pipeline bubble, with the plan's
// estimate of the step marked; a layout that failed gets its row with the reason instead.
#pragma once
#include <string>
#include <vector>

namespace tetra {

struct SweepBar {
  std::string name;    // the layout, as the table names it
  std::string status;  // ok, mismatch, failed, timeout
  bool fits = true;    // within the machine's memory, by the plan
  // Measured, ms per step (averaged over the timed steps); zero for a layout that failed.
  double compute_ms = 0, comm_ms = 0, bubble_ms = 0;
  double estimate_ms = -1;  // the plan's step time; < 0: none (no peak known)
  std::string note;         // why it failed, or other words for the row's end
};

// Each row is <g class="layout" data-name=... data-status=... data-fits=0|1> holding its
// rects (class compute, comm, bubble) and, where known, a line of class estimate. note: a
// line under the title that says how to read the bars (empty: none).
std::string sweep_svg(const std::vector<SweepBar>& bars, const std::string& title,
                      const std::string& note = "");

}  // namespace tetra
