// Counts that come from user input (the layout's product, parameters, bytes, tokens,
// positions), computed in 64 bits with overflow checks: each returns nullopt where the exact
// result does not fit, for the caller to refuse with its own words. A product of flags must
// never wrap to 0 (and divide by it) or to a negative count.
#pragma once
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <optional>

namespace tetra {

inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::nullopt : std::optional(r);
}

inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::nullopt : std::optional(r);
}

// The product of all factors; nullopt when any partial product overflows.
inline std::optional<int64_t> checked_product(std::initializer_list<int64_t> factors) {
  int64_t r = 1;
  for (int64_t f : factors)
    if (__builtin_mul_overflow(r, f, &r)) return std::nullopt;
  return r;
}

// v as an int, or nullopt outside int's range.
inline std::optional<int> checked_int(int64_t v) {
  return v < INT_MIN || v > INT_MAX ? std::nullopt : std::optional(int(v));
}

}  // namespace tetra
