#include "plan/compare.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "plan/memory.hpp"
#include "plan/traffic.hpp"
#include "util/input_file.hpp"
#include "util/json.hpp"

namespace tetra::plan {

Comparison compare_metrics(const Setup& s, const std::string& path) {
  std::string text;
  const std::string unread = read_input_file(path, text);
  check(unread.empty(), "--compare: cannot read '", path, "': ", unread);
  std::istringstream in(text);
  const std::map<std::string, double> predicted = bytes_by_group(step_traffic(s, 0));
  const double peak = peak_memory(s).memory.peak();
  Comparison c;
  std::ostringstream os;
  os << "step  group   predicted B      measured B       \n";
  int records = 0, n = 0;
  for (std::string line; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    json j;
    const std::string err = parse_json(line, j);
    check(err.empty(), "--compare: '", path, "' line ", n + 1, ": ", err);
    if (!j.is_object() || !j.contains("comm_bytes") || !j.contains("peak_memory_bytes")) continue;
    ++records;
    // Values of the wrong type are bad input, named, not a JSON library's exception.
    const std::string where = "--compare: '" + path + "' line " + std::to_string(n + 1) + ": ";
    const json& counted = j["comm_bytes"];
    check(counted.is_object(), where, "comm_bytes is not an object");
    // A byte count: a row's width and the percentage stay finite (1e308 printed 309 digits).
    const json& measured_peak = j["peak_memory_bytes"];
    check(measured_peak.is_number() && measured_peak.get<double>() >= 0 &&
              measured_peak.get<double>() < 0x1p63,
          where, "peak_memory_bytes is not a byte count (a number from 0 to 2^63)");
    const int64_t step = j.contains("step") ? json_int(j["step"]).value_or(-1) : -1;
    for (const auto& [group, bytes] : predicted) {
      const int64_t want = std::llround(bytes);
      const bool have = counted.contains(group);
      const std::optional<int64_t> measured = have ? json_int(counted[group]) : std::nullopt;
      check(!have || measured, where, "comm_bytes.", group, " is not an integer");
      const bool ok = have && *measured == want;
      c.match = c.match && ok;
      char row[160];
      std::snprintf(row, sizeof row, "%4lld  %-6s  %15lld  %15s  %s\n", (long long)step,
                    group.c_str(), (long long)want,
                    have ? std::to_string(*measured).c_str() : "absent", ok ? "ok" : "MISMATCH");
      os << row;
    }
    const double got = measured_peak.get<double>();
    const double rel = std::abs(got - peak) / peak;
    const bool ok = rel <= 0.10;
    c.match = c.match && ok;
    char row[200];
    std::snprintf(row, sizeof row, "%4lld  peak    %15.0f  %15.0f  %+.1f%% %s\n", (long long)step,
                  peak, got, 100 * (got - peak) / peak, ok ? "ok (within 10%)" : "MISMATCH");
    os << row;
  }
  check(records > 0, "--compare: '", path, "' holds no step records with comm_bytes");
  c.table = os.str();
  return c;
}

}  // namespace tetra::plan
