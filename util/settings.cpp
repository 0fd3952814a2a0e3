#include "util/settings.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace tetra::settings {

Check number_rule(std::function<bool(double)> ok, std::string words) {
  return [ok = std::move(ok), words = std::move(words)](const std::string& text) -> std::string {
    char* end = nullptr;
    const double x = std::strtod(text.c_str(), &end);
    const bool read = !text.empty() && *end == '\0' && !std::isnan(x);
    return read && ok(x) ? std::string() : words + " (got " + text + ")";
  };
}

Check positive() {
  return number_rule([](double x) { return x > 0; }, "must be positive");
}
Check non_negative() {
  return number_rule([](double x) { return x >= 0; }, "must not be negative");
}
Check at_least_1() {
  return number_rule([](double x) { return x >= 1; }, "must be at least 1");
}

std::string flag_of(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return "--" + name;
}

}  // namespace tetra::settings
