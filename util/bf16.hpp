// bfloat16 <-> float: bf16 is the top half of an IEEE float (8 exponent bits, 7 mantissa
// bits), so widening is a shift and narrowing rounds the dropped half to nearest, ties to
// even. Used by safetensors files and by communicators that reduce bf16 on the host.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

namespace tetra {

inline float bf16_to_float(uint16_t b) {
  return std::bit_cast<float>(uint32_t(b) << 16);
}

inline uint16_t float_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  // Truncating a NaN whose payload sits in the low half would give infinity: keep it quiet.
  if (std::isnan(f)) return uint16_t((bits >> 16) | 0x0040);
  // Round to nearest, ties to even: add just under half an ulp, plus the low kept bit.
  return uint16_t((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

}  // namespace tetra
