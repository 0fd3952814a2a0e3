// Reading back what --tensorboard writes: the records of a TFRecord file, each checked
// against its two masked CRC-32Cs, and bytes written by hand.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "train/tensorboard.hpp"

namespace tetra::test {

inline std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s += char(x);
  return s;
}

inline uint64_t read_le(const std::string& s, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | uint8_t(s[at + i]);
  return v;
}

// The records of an event file, each checked against its two masked CRCs.
inline std::vector<std::string> records(const std::string& file) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < file.size()) {
    REQUIRE(at + 12 <= file.size());
    const uint64_t n = read_le(file, at, 8);
    CHECK(read_le(file, at + 8, 4) == tensorboard::masked_crc(file.substr(at, 8)));
    REQUIRE(at + 12 + n + 4 <= file.size());
    const std::string record = file.substr(at + 12, n);
    CHECK(read_le(file, at + 12 + n, 4) == tensorboard::masked_crc(record));
    out.push_back(record);
    at += 12 + n + 4;
  }
  return out;
}

}  // namespace tetra::test
