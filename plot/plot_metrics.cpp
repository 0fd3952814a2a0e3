// tetra plot --loss and --barrier: pictures from a metrics JSONL file.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <sstream>

#include "plot/plot.hpp"
#include "plot/svg.hpp"
#include "train/straggler.hpp"
#include "util/error.hpp"
#include "util/format.hpp"
#include "util/input_file.hpp"

namespace tetra {
namespace {

// The number at `key`, or NaN when it is missing or null (a diverged step's loss).
double number(const json& record, const char* key) {
  const auto it = record.find(key);
  return it != record.end() && it->is_number() ? it->get<double>() : std::nan("");
}

int64_t step_of(const json& record, const std::string& where) {
  const auto it = record.find("step");
  const std::optional<int64_t> s = it == record.end() ? std::nullopt : json_int(*it);
  check(s.has_value(), where, ": a record without an integer \"step\"");
  return *s;
}

std::string fixed4(double x) {
  return format_number(std::abs(x) < 1e9 ? "%.4f" : "%.4g", x);
}

constexpr double kMax = std::numeric_limits<double>::max();

// a + b, or the largest double where it would overflow: times of 1e308 ms still stack.
double sum(double a, double b) {
  return std::clamp(a + b, -kMax, kMax);
}

// Where v falls in [lo, hi], as a fraction: in halves, so that hi - lo cannot overflow
// (a loss of 1e308 and one of -1e308 span more than a double holds).
double fraction(double v, double lo, double hi) {
  const double span = hi / 2 - lo / 2;
  return span > 0 ? (v / 2 - lo / 2) / span : 0.5;
}

// The axes of a plot area [x0, x0+w] x [y0, y0+h] for data [xlo, xhi] x [ylo, yhi].
struct Frame {
  double x0, y0, w, h, xlo, xhi, ylo, yhi;
  double x(double v) const { return x0 + fraction(v, xlo, xhi) * w; }
  double y(double v) const { return y0 + h - fraction(v, ylo, yhi) * h; }
};

void draw_axes(Svg& svg, const Frame& f, const std::string& xlabel, const std::string& ylabel) {
  for (double t : nice_ticks(f.ylo, f.yhi, 6)) {
    svg.line(f.x0, f.y(t), f.x0 + f.w, f.y(t), "#e4e4e4");
    svg.text(f.x0 - 6, f.y(t) + 4, short_number(t), {.size = 10, .anchor = "end"});
  }
  for (double t : nice_ticks(f.xlo, f.xhi, 8, 1)) {
    svg.line(f.x(t), f.y0 + f.h, f.x(t), f.y0 + f.h + 4, "#888");
    svg.text(f.x(t), f.y0 + f.h + 16, short_number(t), {.size = 10, .anchor = "middle"});
  }
  svg.line(f.x0, f.y0 + f.h, f.x0 + f.w, f.y0 + f.h, "#888");
  svg.line(f.x0, f.y0, f.x0, f.y0 + f.h, "#888");
  svg.text(f.x0 + f.w / 2, f.y0 + f.h + 32, xlabel, {.size = 11, .anchor = "middle"});
  svg.text(f.x0, f.y0 - 8, ylabel, {.size = 11, .anchor = "middle"});
}

}  // namespace

std::vector<json> read_metrics(const std::string& path) {
  std::string text;
  const std::string problem = read_input_file(path, text);
  check(problem.empty(), "cannot read metrics file '", path, "': ", problem);
  std::istringstream in(text);
  std::vector<json> records;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json v;
    const std::string problem = parse_json(line, v);
    check(problem.empty(), path, " line ", n, ": ", problem);
    check(v.is_object(), path, " line ", n, ": not a JSON object");
    step_of(v, path + " line " + std::to_string(n));
    records.push_back(std::move(v));
  }
  check(!records.empty(), "metrics file '", path, "' holds no record");
  return records;
}

std::string loss_svg(const std::vector<json>& records, const std::string& source) {
  std::map<int64_t, double> loss;  // a step written again by a resumed run: the last one
  for (const json& r : records) {
    const double l = number(r, "loss");
    if (std::isfinite(l)) loss[step_of(r, source)] = l;
  }
  check(!loss.empty(), source, ": no step with a finite loss");
  const double floor = number(records.back(), "entropy_floor");
  const double ln_vocab = number(records.back(), "ln_vocab");
  double lo = 0, hi = 0;  // from 0, or below it for a file whose losses are negative
  for (const auto& [s, l] : loss) lo = std::min(lo, l), hi = std::max(hi, l);
  if (std::isfinite(ln_vocab)) hi = std::max(hi, ln_vocab);
  if (!(hi > lo)) hi = lo + 1;  // every loss 0: an empty range would divide by zero
  // Steps as doubles: one step alone, or steps past 2^53 that round together, still get a
  // range.
  const double first = double(loss.begin()->first);
  const double last =
      std::max(double(loss.rbegin()->first), first + std::max(1.0, std::abs(first) * 1e-6));

  Svg svg(720, 400);
  // 8 % of the range as a margin, above and (for negative losses) below.
  const double margin = 0.16 * (hi / 2 - lo / 2);
  const Frame f{60, 50, 620, 290, first, last, lo < 0 ? sum(lo, -margin) : lo, sum(hi, margin)};
  svg.text(60, 20,
           "loss per step (" + std::filesystem::path(source).filename().string() + "): final " +
               fixed4(loss.rbegin()->second),
           {.size = 13, .bold = true});
  draw_axes(svg, f, "step", "nats/token");
  // The reference lines, labelled at their right end: ln(vocab) above its line, the floor
  // below its own (the curve comes down onto it from above).
  auto level = [&](double v, const char* color, const std::string& label, double dy) {
    svg.line(f.x0, f.y(v), f.x0 + f.w, f.y(v), color, 1.2, "6,4");
    svg.text(f.x0 + f.w - 4, f.y(v) + dy, label, {.size = 10, .anchor = "end", .fill = color});
  };
  if (std::isfinite(ln_vocab))
    level(ln_vocab, "#777", "ln(vocab) " + fixed4(ln_vocab) + ": a uniform guess", -5);
  if (std::isfinite(floor))
    level(floor, "#2f9e44", "entropy floor " + fixed4(floor) + ": the best any model can do", 13);
  else
    svg.text(f.x0 + f.w, 36, "entropy floor unknown for this data (known for synthetic data only)",
             {.size = 10, .anchor = "end", .fill = "#555"});
  std::vector<std::pair<double, double>> points;
  for (const auto& [s, l] : loss) points.push_back({f.x(double(s)), f.y(l)});
  svg.begin_group({{"class", "loss"}, {"data-steps", std::to_string(loss.size())}});
  svg.polyline(points, "#1c7ed6", 1.6);
  svg.end_group();
  return svg.str();
}

std::string barrier_svg(const std::vector<json>& records, int64_t step) {
  const json* chosen = nullptr;
  for (const json& r : records) {  // the last record of the step (or of any step)
    const int64_t s = step_of(r, "metrics");
    if (step >= 0 ? s == step : r.contains("straggler") && r["straggler"].is_number()) chosen = &r;
  }
  if (step < 0 && chosen == nullptr) chosen = &records.back();
  check(chosen != nullptr, "the metrics hold no step ", step);
  const json& r = *chosen;
  check(r.contains("compute_ms") && r["compute_ms"].is_array() && r.contains("wait_ms") &&
            r["wait_ms"].is_array() && r["compute_ms"].size() == r["wait_ms"].size(),
        "step ", step_of(r, "metrics"),
        " of the metrics has no per-rank compute_ms and wait_ms (written by an older tetra?)");
  // A rank's time, or 0 where the record has none (null: not finite when written).
  const auto ms = [](const json& v) {
    return v.is_number() ? std::max(0.0, v.get<double>()) : 0.0;
  };
  std::vector<double> compute, wait;
  for (size_t q = 0; q < r["compute_ms"].size(); ++q) {
    compute.push_back(ms(r["compute_ms"][q]));
    wait.push_back(ms(r["wait_ms"][q]));
  }
  const int ranks = int(compute.size());
  check(ranks > 0, "step ", step_of(r, "metrics"), " of the metrics has no ranks");
  const std::optional<int64_t> named =
      r.contains("straggler") ? json_int(r["straggler"]) : std::nullopt;
  check(!named || (*named >= 0 && *named < ranks), "step ", step_of(r, "metrics"),
        " of the metrics names straggler ", named.value_or(0), " of ", ranks, " ranks");
  const int straggler = named ? int(*named) : -1;
  const double median = find_straggler(compute).median;
  check(ranks <= kMaxBarrierRanks, "step ", step_of(r, "metrics"), " of the metrics has ", ranks,
        " ranks, more than the 16,384 tetra draws");
  double end = 0;
  for (int q = 0; q < ranks; ++q) end = std::max(end, sum(compute[q], wait[q]));

  const double lane = 18, top = 62;
  Svg svg(720, top + ranks * lane + 44);
  const Frame f{70, top, 560, ranks * lane, 0, std::min(std::max(end, 1e-3) * 1.02, kMax), 0, 1};
  std::string title =
      "step " + std::to_string(step_of(r, "metrics")) + ": compute and wait per rank";
  svg.text(20, 20, title, {.size = 13, .bold = true});
  const std::string sub =
      straggler >= 0 ? "straggler rank " + std::to_string(straggler) + ": compute " +
                           short_number(compute[straggler], 1) + " ms against a median of " +
                           short_number(median, 1) + " ms: it cost the others " +
                           short_number(compute[straggler] - median, 1) + " ms of waiting"
                     : "no straggler: the slowest rank is within 10 % of the median compute";
  svg.text(20, 38, sub, {.size = 11, .fill = straggler >= 0 ? "#c92a2a" : "#333"});
  svg.rect(20, 46, 10, 10, "#3b8c84");
  svg.text(34, 55, "compute (outside communication)", {.size = 10});
  svg.rect(210, 46, 10, 10, "#f0a6a6");
  svg.text(224, 55, "wait (inside communication calls)", {.size = 10});
  for (int q = 0; q < ranks; ++q) {
    const double y = top + q * lane;
    const bool marked = q == straggler;
    if (marked) svg.rect(f.x0 - 64, y, f.w + 64 + 86, lane, "#fff0f0");
    svg.text(f.x0 - 6, y + 13, "rank " + std::to_string(q),
             {.size = 10, .anchor = "end", .fill = marked ? "#c92a2a" : "#222", .bold = marked});
    svg.begin_group({{"class", "rank"},
                     {"data-rank", std::to_string(q)},
                     {"data-straggler", marked ? "1" : "0"}});
    svg.rect(f.x(0), y + 3, f.x(compute[q]) - f.x(0), lane - 6, "#3b8c84", {{"class", "compute"}},
             "rank " + std::to_string(q) + " compute " + short_number(compute[q], 2) + " ms");
    svg.rect(f.x(compute[q]), y + 3, f.x(sum(compute[q], wait[q])) - f.x(compute[q]), lane - 6,
             "#f0a6a6", {{"class", "wait"}},
             "rank " + std::to_string(q) + " wait " + short_number(wait[q], 2) + " ms");
    svg.end_group();
    if (marked)
      svg.text(f.x0 + f.w + 6, y + 13, "\u25c0 straggler",
               {.size = 10, .fill = "#c92a2a", .bold = true});
  }
  svg.line(f.x(median), top - 4, f.x(median), top + ranks * lane, "#333", 1, "4,3");
  svg.text(f.x(median) + 3, top + ranks * lane + 12, "median compute", {.size = 9, .fill = "#333"});
  svg.line(f.x(end), top - 4, f.x(end), top + ranks * lane, "#c92a2a", 1.2);
  svg.text(f.x(end), top - 6, "step end (all ranks meet)",
           {.size = 9, .anchor = "end", .fill = "#c92a2a"});
  for (double t : nice_ticks(0, f.xhi, 8)) {
    svg.line(f.x(t), top + ranks * lane, f.x(t), top + ranks * lane + 4, "#888");
    svg.text(f.x(t), top + ranks * lane + 26, short_number(t), {.size = 10, .anchor = "middle"});
  }
  svg.text(f.x0 + f.w, top + ranks * lane + 40,
           "ms of the step: each rank's compute and wait, stacked",
           {.size = 10, .anchor = "end", .fill = "#555"});
  return svg.str();
}

}  // namespace tetra
