#include "plot/svg_schedule.hpp"

#include <algorithm>
#include <numeric>

#include "util/error.hpp"

namespace tetra {

void draw_action(Svg& svg, double x, double y, double w, double h, Action::Kind kind,
                 int micro_batch, int chunk_id, int virtual_stage, int vpp,
                 const std::string& title) {
  const bool fwd = kind == Action::Forward;
  svg.rect(x, y, w, h, fwd ? forward_color(micro_batch) : micro_batch_color(micro_batch),
           {{"class", fwd ? "F" : "B"},
            {"data-mb", std::to_string(micro_batch)},
            {"data-chunk", std::to_string(chunk_id)},
            {"stroke", "white"},
            {"stroke-width", "0.5"}},
           title);
  std::string label = std::to_string(micro_batch);
  if (vpp > 1) label.append(1, '.').append(std::to_string(virtual_stage));
  const double size = std::min(10.0, h * 0.7);
  if (w >= size * 0.62 * double(label.size()) + 2)
    svg.text(x + w / 2, y + h / 2 + size * 0.35, label,
             {.size = size, .anchor = "middle", .fill = fwd ? "#333" : "white"});
}

double draw_micro_batch_legend(Svg& svg, double x, double y, int micro_batches) {
  svg.text(x, y + 9, "micro-batch:", {.size = 10});
  x += 66;
  for (int mb = 0; mb < std::min(micro_batches, 10); ++mb) {
    svg.rect(x, y, 9, 10, forward_color(mb));
    svg.rect(x + 9, y, 9, 10, micro_batch_color(mb));
    svg.text(x + 21, y + 9, std::to_string(mb), {.size = 10});
    x += 34;
  }
  svg.text(x, y + 9, "(forward light, backward dark)", {.size = 10, .fill = "#555"});
  return x + 170;
}

std::string schedule_svg(ScheduleKind kind, int pp, int vpp, int m) {
  // A forward and a backward box per micro-batch, virtual stage and rank: past this many no
  // one can read them, and the simulation alone would take minutes and gigabytes.
  const double boxes = 2.0 * pp * vpp * m;
  check(boxes <= 200000, "a schedule of PP ", pp, ", V ", vpp, " and ", m,
        " micro-batches is more boxes (2 PP V m) than the 200,000 tetra draws");
  const SimResult sim = simulate(kind, pp, vpp, m, 1.0 / vpp, 2.0 / vpp);
  const double left = 70, right = 20, top = 54, lane = 26, box = 20;
  const double plot_w = std::clamp(sim.makespan * 36.0, 400.0, 1100.0);
  const double scale = plot_w / sim.makespan;
  Svg svg(left + plot_w + right, top + pp * lane + 34);

  const BubbleForms forms = bubble_forms(kind, pp, vpp, m);
  const double idle = std::accumulate(sim.idle.begin(), sim.idle.end(), 0.0) / pp;
  std::string title = std::string(schedule_name(kind)) + ", PP " + std::to_string(pp) +
                      (vpp > 1 ? ", V " + std::to_string(vpp) : "") + ", " + std::to_string(m) +
                      " micro-batches: bubble (idle / step) " +
                      short_number(100 * forms.of_step, 1) + " % by the formula, " +
                      short_number(100 * idle / sim.makespan, 1) + " % simulated";
  svg.text(left, 18, title, {.size = 13, .bold = true});
  draw_micro_batch_legend(svg, left, 28, m);

  for (int r = 0; r < pp; ++r) {
    const double y = top + r * lane;
    svg.text(left - 8, y + box / 2 + 4, "rank " + std::to_string(r), {.size = 11, .anchor = "end"});
    svg.rect(left, y, plot_w, box, "#f2f2f2");
    svg.begin_group({{"class", "lane"}, {"data-rank", std::to_string(r)}});
    for (const TimedAction& t : sim.timeline[r]) {
      const Action& a = t.action;
      const std::string what = std::string(a.kind == Action::Forward ? "F" : "B") + " mb" +
                               std::to_string(a.micro_batch) + " chunk" +
                               std::to_string(a.chunk * pp + r);
      draw_action(svg, left + t.start * scale, y, (t.end - t.start) * scale, box, a.kind,
                  a.micro_batch, a.chunk * pp + r, a.chunk, vpp, what);
    }
    svg.end_group();
  }
  const double axis = top + pp * lane + 4;
  svg.line(left, axis, left + plot_w, axis, "#888");
  for (double t : nice_ticks(0, sim.makespan, 10)) {
    svg.line(left + t * scale, axis, left + t * scale, axis + 4, "#888");
    svg.text(left + t * scale, axis + 15, short_number(t), {.size = 10, .anchor = "middle"});
  }
  svg.text(left + plot_w, axis + 28, "time (one stage's forward = 1, backward = 2)",
           {.size = 10, .anchor = "end", .fill = "#555"});
  return svg.str();
}

}  // namespace tetra
