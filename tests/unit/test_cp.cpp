// Context parallelism's load balance: with the sequence cut into 2*CP chunks and rank c
// holding chunks c and 2*CP-1-c, every rank scores the same number of causal
// query-key pairs, and the ranks together hold every position once.
#include <doctest/doctest.h>

#include <numeric>
#include <set>

#include "parallel/cp.hpp"

using namespace tetra;

TEST_CASE("cp: chunks partition the sequence and balance causal attention work") {
  for (int cp : {1, 2, 3, 4, 8}) {
    for (int64_t S : {int64_t(2 * cp), int64_t(16 * cp), int64_t(64 * cp)}) {
      CAPTURE(cp);
      CAPTURE(S);
      std::vector<int32_t> all_keys;
      for (int c = 0; c < cp; ++c) {
        const auto p = cp_positions(S, cp, c);
        all_keys.insert(all_keys.end(), p.begin(), p.end());
      }
      const std::set<int32_t> unique(all_keys.begin(), all_keys.end());
      CHECK(int64_t(all_keys.size()) == S);
      CHECK(int64_t(unique.size()) == S);
      CHECK(*unique.begin() == 0);
      CHECK(*unique.rbegin() == S - 1);

      int64_t total = 0;
      const int64_t first = causal_pairs(cp_positions(S, cp, 0), all_keys);
      for (int c = 0; c < cp; ++c) {
        const int64_t pairs = causal_pairs(cp_positions(S, cp, c), all_keys);
        CHECK(pairs == first);  // equal work on every rank
        total += pairs;
      }
      CHECK(total == S * (S + 1) / 2);  // the whole causal triangle, once
    }
  }
  // The naive split (rank c holds the c-th contiguous S/CP tokens) is not balanced.
  const int64_t S = 64;
  std::vector<int32_t> keys(S);
  std::iota(keys.begin(), keys.end(), 0);
  const std::vector<int32_t> head(keys.begin(), keys.begin() + S / 4),
      tail(keys.end() - S / 4, keys.end());
  CHECK(causal_pairs(head, keys) * 4 < causal_pairs(tail, keys));
}
