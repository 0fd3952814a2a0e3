// The learning-rate schedule (docs/design.md, conventions): linear warmup, then cosine.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tetra {

struct LrSchedule {
  double lr = 3e-3, min_lr = 3e-4;
  int64_t warmup = 10, steps = 100;

  // Linear warmup lr*(s+1)/warmup for s < warmup, then cosine from lr to min_lr, reaching
  // min_lr at the last step (steps - 1).
  double at(int64_t s) const {
    if (s < warmup) return lr * double(s + 1) / double(warmup);
    const int64_t span = steps - 1 - warmup;
    if (span <= 0) return lr;
    const double t = std::min(1.0, double(s - warmup) / double(span));
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * t));
  }
};

}  // namespace tetra
