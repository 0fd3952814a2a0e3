// Counter-based initialisation: element i of tensor `name` is a pure function of
// (seed, name, i). Any shard of any layout is generated on its own, and every layout
// starts from the same weights.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace tetra {

uint64_t hash_name(const std::string& s);  // FNV-1a, 64-bit
// A standard normal sample from (seed, stream, counter), via splitmix64 and Box-Muller.
double counter_normal(uint64_t seed, uint64_t stream, uint64_t counter);

// Norm weights are 1; every matrix is N(0, 0.02^2).
constexpr double kInitStd = 0.02;

// The TP-local shard of every parameter of a unit, as one flat host vector.
std::vector<float> init_unit(const UnitSpec& u, uint64_t seed, int tp_rank);

}  // namespace tetra
