// Sums in a fixed order that the compiler vectorizes. A single running sum is a chain the
// compiler may not reorder (each add waits for the one before, four cycles apiece); here term j
// goes into running sum j mod kLanes, and the lanes are added in order at the end. The order
// depends on n alone, never on the thread count or on the data's alignment, so a row's sum has
// the same bits wherever it is computed.
#pragma once
#include <cstdint>

namespace tetra {

constexpr int64_t kLanes = 16;

// term(0) + ... + term(n - 1) in T (float or double), in the lanes' order.
template <class T, class Term>
inline T lane_sum(int64_t n, Term term) {
  T lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lane[l] += term(j + l);
  for (int64_t l = 0; j < n; ++j, ++l) lane[l] += term(j);
  T s = 0;
  for (const T v : lane) s += v;
  return s;
}

}  // namespace tetra
