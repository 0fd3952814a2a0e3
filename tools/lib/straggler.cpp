#include "tools/lib/straggler.hpp"

#include <algorithm>

namespace tetra {

Straggler find_straggler(const std::vector<double>& compute, const std::vector<double>& wait,
                         double threshold) {
  Straggler s;
  const size_t n = compute.size();
  if (n < 2 || wait.size() != n) return s;
  std::vector<double> sorted = compute;
  std::sort(sorted.begin(), sorted.end());
  s.median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  const int slowest = int(std::max_element(compute.begin(), compute.end()) - compute.begin());
  if (!(compute[slowest] > (1 + threshold) * s.median)) return s;
  s.rank = slowest;
  s.compute = compute[slowest];
  for (size_t r = 0; r < n; ++r)
    if (int(r) != slowest) s.others_wait += wait[r];
  s.others_wait /= double(n - 1);
  return s;
}

}  // namespace tetra
