#include "util/json.hpp"

#include <cmath>
#include <set>
#include <vector>

namespace tetra {
namespace {

// What the parse callback throws to stop the library at a problem of tetra's own.
struct Refused {
  std::string problem;
};

// The library's message without its "[json.exception.parse_error.101] " tag, which means
// nothing to a user.
std::string library_message(const json::exception& e) {
  const std::string msg = e.what();
  const std::string tag = "[json.exception.";
  const size_t tag_end = msg.find("] ");
  return msg.compare(0, tag.size(), tag) == 0 && tag_end != std::string::npos
             ? msg.substr(tag_end + 2)
             : msg;
}

}  // namespace

std::string parse_json(const std::string& text, json& out) {
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) return "invalid JSON: NUL byte at offset " + std::to_string(nul);
  // The keys of each object being parsed, innermost last. The library calls back on every
  // container and key, with the number of containers around it.
  std::vector<std::set<std::string>> keys;
  auto checks = [&](int depth, json::parse_event_t event, json& parsed) {
    using Event = json::parse_event_t;
    const bool opens = event == Event::object_start || event == Event::array_start;
    if (opens && depth >= kMaxJsonDepth)
      throw Refused{"nesting deeper than " + std::to_string(kMaxJsonDepth)};
    if (event == Event::object_start) {
      keys.emplace_back();
    } else if (event == Event::object_end) {
      keys.pop_back();
    } else if (event == Event::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(key).second) throw Refused{"duplicate key '" + key + "'"};
    }
    return true;
  };
  try {
    out = json::parse(text, checks);
  } catch (const json::exception& e) {
    return "invalid JSON: " + library_message(e);
  } catch (const Refused& r) {
    return "invalid JSON: " + r.problem;
  }
  return "";
}

std::optional<int64_t> json_int(const json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    return u <= uint64_t(INT64_MAX) ? std::optional(int64_t(u)) : std::nullopt;
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_number_float()) return std::nullopt;
  // 2^63 is exact as a double; the int64 range is [-2^63, 2^63). NaN fails the first test.
  const double d = v.get<double>();
  if (d != std::trunc(d) || d < -0x1p63 || d >= 0x1p63) return std::nullopt;
  return int64_t(d);
}

}  // namespace tetra
