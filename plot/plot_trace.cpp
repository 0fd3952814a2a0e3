// tetra plot --trace: one step of a Chrome trace written by tetra train --trace, one lane per
// rank. The pipeline's forward and backward spans become boxes colored by micro-batch (as
// in the schedule pictures of plot/svg_schedule.hpp), the rest of the compute gray, and
// a strip below shows communication and, over it in red, the waits for pipeline activations
// and gradients (the bubble).
#include <algorithm>
#include <filesystem>
#include <map>

#include "plot/plot.hpp"
#include "plot/svg_schedule.hpp"
#include "util/error.hpp"

namespace tetra {
namespace {

struct Span {
  std::string name, lane;  // lane: step, compute, wait or comm
  double ts = 0, dur = 0;  // microseconds
  json args;
};

int64_t arg_int(const Span& s, const char* key) {
  const auto it = s.args.find(key);
  const std::optional<int64_t> v = it == s.args.end() ? std::nullopt : json_int(*it);
  check(v.has_value(), "trace span '", s.name, "' has no integer \"", key, "\"");
  return *v;
}

// Spans closer than half a pixel merged, so a lane of many short calls stays a few shapes.
std::vector<std::pair<double, double>> merged(std::vector<std::pair<double, double>> xs) {
  std::sort(xs.begin(), xs.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& [a, b] : xs) {
    if (!out.empty() && a <= out.back().second + 0.5)
      out.back().second = std::max(out.back().second, b);
    else
      out.push_back({a, b});
  }
  return out;
}

}  // namespace

std::string trace_step_svg(const json& trace, int64_t step, const std::string& source) {
  check(trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array(),
        source, ": not a Chrome trace (no traceEvents array)");
  std::map<int, std::string> names;        // rank -> "rank 5 (tp 1 cp 0 pp 1 dp 0)"
  std::map<int, std::vector<Span>> spans;  // rank -> its spans
  for (const json& e : trace["traceEvents"]) {
    check(e.is_object() && e.contains("ph") && e.contains("pid"), source,
          ": a trace event without ph or pid");
    const int pid = int(json_int(e["pid"]).value_or(-1));
    check(pid >= 0, source, ": a trace event whose pid is not a rank");
    if (e["ph"] == "M") {
      if (e.value("name", "") == "process_name")
        names[pid] = e.value("args", json::object()).value("name", "");
      continue;
    }
    if (e["ph"] != "X") continue;
    Span s{e.value("name", ""), e.value("cat", ""), e.value("ts", 0.0), e.value("dur", 0.0),
           e.value("args", json::object())};
    spans[pid].push_back(std::move(s));
  }
  check(!spans.empty(), source, ": the trace holds no spans");

  // The step: each rank's step span; the picture spans all of them.
  std::map<int64_t, int> steps;  // step -> ranks that traced it
  for (const auto& [rank, list] : spans)
    for (const Span& s : list)
      if (s.lane == "step") ++steps[arg_int(s, "step")];
  check(!steps.empty(), source, ": the trace holds no step spans");
  if (step < 0) step = steps.begin()->first;
  check(steps.count(step), source, " traces steps ", steps.begin()->first, "-",
        steps.rbegin()->first, ", not step ", step);
  std::map<int, std::pair<double, double>> window;  // rank -> its step span
  double t0 = 1e300, t1 = -1e300;
  for (const auto& [rank, list] : spans)
    for (const Span& s : list)
      if (s.lane == "step" && arg_int(s, "step") == step) {
        window[rank] = {s.ts, s.ts + s.dur};
        t0 = std::min(t0, s.ts);
        t1 = std::max(t1, s.ts + s.dur);
      }
  int micro_batches = 1, vpp = 1;
  for (const auto& [rank, list] : spans)
    for (const Span& s : list)
      if (s.lane == "compute" && s.args.contains("micro_batch")) {
        micro_batches = std::max(micro_batches, int(arg_int(s, "micro_batch")) + 1);
        vpp = std::max(vpp, int(arg_int(s, "virtual_stage")) + 1);
      }

  const int lanes = int(window.size());
  const double left = 190, right = 20, top = 66, lane = 30, box = 18, strip = 6;
  const double plot_w = 760, scale = plot_w / std::max(t1 - t0, 1.0);
  Svg svg(left + plot_w + right, top + lanes * lane + 36);
  svg.text(20, 20,
           "step " + std::to_string(step) + " of " +
               std::filesystem::path(source).filename().string() + ", as traced: " +
               std::to_string(lanes) + " ranks, " + short_number((t1 - t0) / 1e3, 1) + " ms",
           {.size = 13, .bold = true});
  const double legend_x = draw_micro_batch_legend(svg, 20, 30, micro_batches);
  double x = std::min(legend_x, 20.0 + 560);
  double y = legend_x > 580 ? 46 : 30;
  for (const auto& [color, label] :
       std::vector<std::pair<const char*, const char*>>{{"#9a9a9a", "other compute"},
                                                        {"#5b6b7b", "communication"},
                                                        {"#e03131", "waiting for the pipeline"},
                                                        {"#7a1f1f", "injected slow"}}) {
    svg.rect(x, y, 10, 10, color);
    svg.text(x + 13, y + 9, label, {.size = 10});
    x += 26 + 5.6 * double(std::string(label).size());
  }

  int row = 0;
  for (const auto& [rank, w] : window) {
    const double y0 = top + row++ * lane;
    const std::string name = names.count(rank) ? names[rank] : "rank " + std::to_string(rank);
    svg.text(left - 8, y0 + box / 2 + 4, name, {.size = 10, .anchor = "end"});
    svg.rect(left, y0, plot_w, box, "#f4f4f4");
    svg.begin_group({{"class", "lane"}, {"data-rank", std::to_string(rank)}});
    std::vector<std::pair<double, double>> comm, wait;
    for (const Span& s : spans[rank]) {
      if (s.lane == "step" || s.ts < w.first - 1 || s.ts + s.dur > w.second + 1) continue;
      const double sx = left + (s.ts - t0) * scale, sw = s.dur * scale;
      const std::string tip = s.name + ": " + short_number(s.dur / 1e3, 3) + " ms";
      if (s.lane == "comm") {
        comm.push_back({sx, sx + sw});
      } else if (s.lane == "wait") {
        wait.push_back({sx, sx + sw});
      } else if (s.lane == "compute" && (s.name.rfind("F ", 0) == 0 || s.name.rfind("B ", 0) == 0 ||
                                         s.name.rfind("W ", 0) == 0)) {
        const Action::Kind kind = s.name[0] == 'F'   ? Action::Forward
                                  : s.name[0] == 'W' ? Action::Weight
                                                     : Action::Backward;
        draw_action(svg, sx, y0, sw, box, kind, int(arg_int(s, "micro_batch")),
                    int(arg_int(s, "chunk")), int(arg_int(s, "virtual_stage")), vpp, tip);
      } else if (s.lane == "compute") {
        const bool slow = s.name == "injected slow";
        svg.rect(sx, y0 + 2, sw, box - 4, slow ? "#7a1f1f" : "#9a9a9a",
                 {{"class", slow ? "slow" : "other"}}, tip);
      }
    }
    for (const auto& [a, b] : merged(comm))
      svg.rect(a, y0 + box + 1, b - a, strip, "#5b6b7b", {{"class", "comm"}});
    for (const auto& [a, b] : merged(wait))
      svg.rect(a, y0 + box + 1, b - a, strip, "#e03131", {{"class", "wait"}});
    svg.end_group();
  }
  const double axis = top + lanes * lane;
  svg.line(left, axis, left + plot_w, axis, "#888");
  for (double t : nice_ticks(0, (t1 - t0) / 1e3, 10)) {
    svg.line(left + t * 1e3 * scale, axis, left + t * 1e3 * scale, axis + 4, "#888");
    svg.text(left + t * 1e3 * scale, axis + 15, short_number(t), {.size = 10, .anchor = "middle"});
  }
  svg.text(left + plot_w, axis + 30,
           "ms since the step's start; box label: micro-batch" +
               std::string(vpp > 1 ? ".virtual stage" : "") + "; hover a box for its name and time",
           {.size = 10, .anchor = "end", .fill = "#555"});
  return svg.str();
}

}  // namespace tetra
