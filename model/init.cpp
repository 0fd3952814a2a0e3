#include "model/init.hpp"

#include <cmath>

namespace tetra {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t hash_name(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

double counter_normal(uint64_t seed, uint64_t stream, uint64_t counter) {
  const uint64_t r = splitmix64(splitmix64(seed ^ splitmix64(stream)) + counter);
  // Two 26-bit uniforms in (0, 1] and [0, 1).
  const double u1 = (double((r >> 38) & ((1ull << 26) - 1)) + 1.0) / double(1ull << 26);
  const double u2 = double((r >> 6) & ((1ull << 26) - 1)) / double(1ull << 26);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

std::vector<float> init_unit(const UnitSpec& u, uint64_t seed, int tp_rank) {
  std::vector<float> out(u.numel);
  for (const ParamInfo& p : u.params) {
    float* dst = out.data() + p.offset;
    if (!p.decay()) {  // norm weights
      std::fill(dst, dst + p.numel(), 1.f);
      continue;
    }
    const uint64_t stream = hash_name(p.name);
    for (int64_t i = 0; i < p.numel(); ++i)
      dst[i] = float(kInitStd * counter_normal(seed, stream, uint64_t(p.global_index(i, tp_rank))));
  }
  return out;
}

}  // namespace tetra
