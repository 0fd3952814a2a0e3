// Counter-based randomness for the synthetic data source: every random choice is a pure
// function of a few integers (seed, what is being drawn, where), so any rank can generate
// any sequence on its own, in any order, and get the same bits on every platform
// (std:: random engines and distributions are not specified bit-exactly).
#pragma once
#include <cstdint>
#include <initializer_list>

namespace tetra::data {

// The splitmix64 finalizer: a bijection on 64-bit words that scrambles every input bit
// into every output bit.
inline uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// Hashes an ordered list of words, e.g. hash_words({seed, tag, k, pos}). Each word is
// offset by the golden-ratio constant before mixing so that small counters (0, 1, 2 ...)
// land far apart, and the running state is re-mixed after each word so order matters.
inline uint64_t hash_words(std::initializer_list<uint64_t> words) {
  uint64_t h = 0x243F6A8885A308D3ull;  // any nonzero start; these are digits of pi
  for (uint64_t w : words) h = mix(h ^ mix(w + 0x9E3779B97F4A7C15ull));
  return h;
}

}  // namespace tetra::data
