// bfloat16 <-> float: bf16 is the top half of an IEEE float (8 exponent bits, 7 mantissa
// bits), so widening is a shift and narrowing rounds the dropped half to nearest, ties to
// even. Used by safetensors files, by communicators that reduce bf16 on the host, and (through
// backend/op_math.hpp) by both backends' kernels: g++ and nvcc compile the same two functions,
// so host and device round to the same bits.
#pragma once
#include <cstdint>
#ifndef __CUDA_ARCH__
#include <bit>
#endif

// __host__ __device__ inline under nvcc, plain inline under g++.
#ifdef __CUDACC__
#define TETRA_HD __host__ __device__ inline
#else
#define TETRA_HD inline
#endif

namespace tetra {

TETRA_HD uint32_t float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  return std::bit_cast<uint32_t>(f);
#endif
}

TETRA_HD float bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

TETRA_HD float bf16_to_float(uint16_t b) {
  return bits_float(uint32_t(b) << 16);
}

TETRA_HD uint16_t float_to_bf16(float f) {
  const uint32_t bits = float_bits(f);
  // Truncating a NaN whose payload sits in the low half would give infinity: keep it quiet.
  if (f != f) return uint16_t((bits >> 16) | 0x0040);
  // Round to nearest, ties to even: add just under half an ulp, plus the low kept bit.
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace tetra
