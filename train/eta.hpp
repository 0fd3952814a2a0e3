// The time a run has left, for the step line: the mean wall time between the ends of its recent
// steps (validation, samples and checkpoints included, since they take wall time too) times
// the steps to go. The first step of a run warms up and ends no interval, so it counts only
// as the start of the first one.
#pragma once
#include <cstdint>
#include <deque>
#include <string>

namespace tetra {

class Eta {
 public:
  static constexpr int kWindow = 20;  // intervals the mean is taken over
  static constexpr int kMinimum = 3;  // intervals before an estimate is given

  // A step ended at `now` (seconds on any steady clock).
  void step_ended(double now);
  // Seconds for `remaining` more steps; negative while fewer than kMinimum intervals are
  // known.
  double seconds_left(int64_t remaining) const;

 private:
  std::deque<double> ends_;  // the last kWindow + 1 step ends
};

// "42s", "3m05s", "2h07m", "3d04h": two units at most, the larger first.
std::string short_duration(double seconds);

}  // namespace tetra
