// Stragglers: the rank whose compute held a step back. Every rank's compute and wait time
// per step (compute: the step's time outside communication calls; wait: inside them,
// pipeline receives included) are gathered at the step's end; the slowest rank is named
// when its compute is more than 10 % above the median; what it cost the others is the
// wait it added to them, its compute less the median.
#pragma once
#include <vector>

namespace tetra {

struct Straggler {
  int rank = -1;       // -1: no rank is more than `threshold` above the median
  double compute = 0;  // the straggler's compute time
  double median = 0;   // the median compute time over all ranks
  double cost = 0;     // compute - median: the wait it added to a typical other rank
};

// compute[r]: rank r's compute time (any unit; the result is in the same one). The
// slowest rank counts as a straggler when compute > (1 + threshold) * median; ties go to
// the lowest rank. With one rank there is nobody to hold back.
Straggler find_straggler(const std::vector<double>& compute, double threshold = 0.10);

}  // namespace tetra
