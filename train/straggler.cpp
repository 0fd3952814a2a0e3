#include "train/straggler.hpp"

#include <algorithm>

namespace tetra {

Straggler find_straggler(const std::vector<double>& compute, double threshold) {
  Straggler s;
  const size_t n = compute.size();
  if (n == 0) return s;
  std::vector<double> sorted = compute;
  std::sort(sorted.begin(), sorted.end());
  s.median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  if (n < 2) return s;  // nobody to hold back
  const int slowest = int(std::max_element(compute.begin(), compute.end()) - compute.begin());
  if (!(compute[slowest] > (1 + threshold) * s.median)) return s;
  s.rank = slowest;
  s.compute = compute[slowest];
  s.cost = s.compute - s.median;
  return s;
}

}  // namespace tetra
