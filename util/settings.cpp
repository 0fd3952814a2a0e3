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
Check positive_up_to(int64_t limit, std::string unit) {
  return [limit, unit = std::move(unit), positive = positive()](const std::string& text) {
    if (std::string words = positive(text); !words.empty()) return words;
    if (std::strtod(text.c_str(), nullptr) <= double(limit)) return std::string();
    return text + " is more than tetra's limit of " + std::to_string(limit) + " " + unit;
  };
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

std::string worded(const std::string& text, const Origin& origin) {
  // A key is "section.name", lower case words joined by '_'; other text between backquotes
  // is left as it is.
  const auto is_key = [](const std::string& k) {
    const size_t dot = k.find('.');
    return dot != std::string::npos && dot > 0 && dot + 1 < k.size() &&
           k.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_.") == std::string::npos &&
           k.find('.', dot + 1) == std::string::npos;
  };
  std::string out;
  bool from_file = false;
  size_t at = 0;
  for (size_t open; (open = text.find('`', at)) != std::string::npos;) {
    const size_t close = text.find('`', open + 1);
    if (close == std::string::npos) break;
    const std::string key = text.substr(open + 1, close - open - 1);
    if (!is_key(key)) {
      out += text.substr(at, close - at);
      at = close;
      continue;
    }
    const bool in_file = !origin.file.empty() && origin.keys.count(key) > 0;
    from_file = from_file || in_file;
    out += text.substr(at, open - at) + (in_file ? key : flag_of(key.substr(key.find('.') + 1)));
    at = close + 1;
  }
  out += text.substr(at);
  return from_file ? origin.file + ": " + out : out;
}

}  // namespace tetra::settings
