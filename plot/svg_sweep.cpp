#include "plot/svg_sweep.hpp"

#include <algorithm>

#include "plot/svg.hpp"

namespace tetra {

std::string sweep_svg(const std::vector<SweepBar>& bars, const std::string& title,
                      const std::string& note) {
  const char* kCompute = "#3b8c84";
  const char* kComm = "#f2a541";
  const char* kBubble = "#f0a6a6";
  const char* kEstimate = "#1c3f95";
  const double line = note.empty() ? 0 : 16;  // the note's line, under the title
  const double lane = 20, top = 66 + line, x0 = 250, w = 470;
  double end = 1e-3;
  for (const SweepBar& b : bars)
    end = std::max({end, b.compute_ms + b.comm_ms + b.bubble_ms, b.estimate_ms});
  end *= 1.04;
  const auto x = [&](double ms) { return x0 + ms / end * w; };
  const double rows = double(bars.size());
  Svg svg(x0 + w + 110, top + rows * lane + 46);
  svg.text(20, 20, title, {.size = 13, .bold = true});
  if (!note.empty()) svg.text(20, 38, note, {.size = 11, .fill = "#c92a2a"});
  svg.text(20, 38 + line,
           "ms per step, fastest first: measured compute, exposed communication and bubble; "
           "the plan's estimate marked",
           {.size = 11, .fill = "#333"});
  double lx = 20;
  for (const auto& [fill, label] : {std::pair{kCompute, "compute"},
                                    {kComm, "communication (exposed)"},
                                    {kBubble, "pipeline bubble"}}) {
    svg.rect(lx, 46 + line, 10, 10, fill);
    svg.text(lx + 14, 55 + line, label, {.size = 10});
    lx += 24 + 6.2 * double(std::string(label).size());
  }
  svg.rect(lx, 45 + line, 2, 12, kEstimate);
  svg.text(lx + 6, 55 + line, "the plan's step time (at peak, no latency)", {.size = 10});

  const double bottom = top + rows * lane;
  for (double t : nice_ticks(0, end, 8)) {
    svg.line(x(t), top - 2, x(t), bottom, "#e4e4e4");
    svg.text(x(t), bottom + 16, short_number(t), {.size = 10, .anchor = "middle"});
  }
  svg.text(x0 + w, bottom + 34, "ms per step", {.size = 10, .anchor = "end", .fill = "#555"});
  for (size_t i = 0; i < bars.size(); ++i) {
    const SweepBar& b = bars[i];
    const double y = top + double(i) * lane;
    const bool ran = b.status == "ok" || b.status == "mismatch";
    const bool flagged = !ran || b.status == "mismatch" || !b.fits;
    if (flagged) svg.rect(10, y, x0 + w + 90, lane, "#fff0f0");
    svg.text(x0 - 8, y + 14, b.name,
             {.size = 10, .anchor = "end", .fill = flagged ? "#c92a2a" : "#222"});
    svg.begin_group({{"class", "layout"},
                     {"data-name", b.name},
                     {"data-status", b.status},
                     {"data-fits", b.fits ? "1" : "0"}});
    struct Part {
      double ms;
      const char *fill, *cls;
    };
    double at = 0;
    for (const Part& p : {Part{b.compute_ms, kCompute, "compute"}, Part{b.comm_ms, kComm, "comm"},
                          Part{b.bubble_ms, kBubble, "bubble"}}) {
      if (!ran) break;
      svg.rect(x(at), y + 4, x(at + p.ms) - x(at), lane - 8, p.fill, {{"class", p.cls}},
               b.name + ": " + p.cls + " " + short_number(p.ms, 2) + " ms");
      at += p.ms;
    }
    if (b.estimate_ms >= 0)
      svg.rect(x(b.estimate_ms) - 1, y + 1, 2, lane - 2, kEstimate, {{"class", "estimate"}},
               b.name + ": the plan's step time " + short_number(b.estimate_ms, 3) + " ms");
    svg.end_group();
    std::string note = b.note;
    if (note.empty()) note = short_number(at, 1) + " ms";
    if (ran && b.status == "mismatch") note += ", does not match one rank";
    if (!b.fits) note += ", does not fit";
    svg.text(ran ? x(at) + 6 : x0 + 4, y + 14, note,
             {.size = 10, .fill = flagged ? "#c92a2a" : "#555"});
  }
  return svg.str();
}

}  // namespace tetra
