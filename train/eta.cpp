#include "train/eta.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tetra {

void Eta::step_ended(double now) {
  ends_.push_back(now);
  if (ends_.size() > size_t(kWindow) + 1) ends_.pop_front();
}

double Eta::seconds_left(int64_t remaining) const {
  const int intervals = int(ends_.size()) - 1;
  if (intervals < kMinimum) return -1;
  return (ends_.back() - ends_.front()) / intervals * double(remaining);
}

std::string short_duration(double seconds) {
  const long long s = std::llround(std::max(0.0, seconds));
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%llds", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else if (s < 86400)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  else
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
  return buf;
}

}  // namespace tetra
