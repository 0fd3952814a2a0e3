#include "plan/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include "plan/memory.hpp"
#include "plan/traffic.hpp"
#include "util/format.hpp"
#include "util/input_file.hpp"
#include "util/json.hpp"

namespace tetra::plan {
namespace {

// Per group over the steps: the bytes predicted, those measured (the first that differ, if
// any), and in how many steps they differed.
struct GroupTally {
  int64_t want = 0;
  int steps = 0, wrong = 0;
  int64_t first_wrong_step = -1;
  std::string first_wrong;  // what that step measured ("absent" when not counted)
};

}  // namespace

Comparison compare_metrics(const Setup& s, const std::string& path) {
  std::string text;
  const std::string unread = read_input_file(path, text);
  check(unread.empty(), "--compare: cannot read '", path, "': ", unread);
  std::istringstream in(text);
  const std::map<std::string, double> predicted = bytes_by_group(step_traffic(s, 0));
  const double peak = peak_memory(s).memory.peak();
  Comparison c;
  std::map<std::string, GroupTally> tally;
  for (const auto& [group, bytes] : predicted) tally[group].want = std::llround(bytes);
  double most = 0;           // the largest measured peak
  std::vector<json> timing;  // each record's step_ms and tokens_per_s, in order
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
    for (auto& [group, t] : tally) {
      const bool have = counted.contains(group);
      const std::optional<int64_t> measured = have ? json_int(counted[group]) : std::nullopt;
      check(!have || measured, where, "comm_bytes.", group, " is not an integer");
      ++t.steps;
      if (have && *measured == t.want) continue;
      if (t.wrong++ == 0) {
        t.first_wrong_step = step;
        t.first_wrong = have ? std::to_string(*measured) : "absent";
      }
    }
    most = std::max(most, measured_peak.get<double>());
    if (j.contains("step_ms") && j["step_ms"].is_number() && j.contains("tokens_per_s") &&
        j["tokens_per_s"].is_number())
      timing.push_back({j["step_ms"], j["tokens_per_s"]});
  }
  check(records > 0, "--compare: '", path, "' holds no step records with comm_bytes");
  std::ostringstream os;
  os << "group   predicted B      measured B over " << records << " step"
     << (records == 1 ? "" : "s") << "\n";
  for (const auto& [group, t] : tally) {
    c.match = c.match && t.wrong == 0;
    char row[200];
    if (t.wrong == 0)
      std::snprintf(row, sizeof row, "%-6s  %15lld  %15lld in every step  ok\n", group.c_str(),
                    (long long)t.want, (long long)t.want);
    else
      std::snprintf(row, sizeof row,
                    "%-6s  %15lld  %15s at step %lld (%d of %d steps differ)  "
                    "MISMATCH\n",
                    group.c_str(), (long long)t.want, t.first_wrong.c_str(),
                    (long long)t.first_wrong_step, t.wrong, t.steps);
    os << row;
  }
  const bool ok = std::abs(most - peak) <= 0.10 * peak;
  c.match = c.match && ok;
  char row[200];
  std::snprintf(row, sizeof row, "peak    %15.0f  %15.0f the largest  %+.1f%% %s\n", peak, most,
                100 * (most - peak) / peak, ok ? "ok (within 10%)" : "MISMATCH");
  os << row;
  // The run's throughput: the tokens of its steps after the first (which warms up) over their
  // time, never a mean of the steps' rates.
  double tokens = 0, seconds = 0;
  for (size_t i = timing.size() > 1 ? 1 : 0; i < timing.size(); ++i) {
    const double sec = timing[i][0].get<double>() / 1e3;
    tokens += timing[i][1].get<double>() * sec;
    seconds += sec;
  }
  if (seconds > 0)
    os << "throughput " << std::llround(tokens / seconds) << " tok/s (" << std::llround(tokens)
       << " tokens in " << format_number("%.3f", seconds) << " s of the steps after the first)\n";
  c.table = os.str();
  return c;
}

}  // namespace tetra::plan
