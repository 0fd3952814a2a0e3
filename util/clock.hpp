// Wall time for measurements (step times, waits, probes): a steady clock, which no change of
// the system time moves, and the seconds elapsed since a point of it.
#pragma once
#include <chrono>

namespace tetra {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace tetra
