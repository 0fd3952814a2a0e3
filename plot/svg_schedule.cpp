#include "plot/svg_schedule.hpp"

#include <algorithm>
#include <numeric>

#include "util/error.hpp"

namespace tetra {

void draw_action(Svg& svg, double x, double y, double w, double h, Action::Kind kind,
                 int micro_batch, int chunk_id, int virtual_stage, int vpp,
                 const std::string& title) {
  // F light, B dark, W (a split backward's weight gradients) dark and hatched by a faded fill.
  const bool fwd = kind == Action::Forward, weight = kind == Action::Weight;
  SvgAttrs attrs = {{"class", std::string(1, action_letter(kind))},
                    {"data-mb", std::to_string(micro_batch)},
                    {"data-chunk", std::to_string(chunk_id)},
                    {"stroke", "white"},
                    {"stroke-width", "0.5"}};
  if (weight) attrs.push_back({"fill-opacity", "0.55"});
  svg.rect(x, y, w, h, fwd ? forward_color(micro_batch) : micro_batch_color(micro_batch), attrs,
           title);
  std::string label = std::to_string(micro_batch);
  if (vpp > 1) label.append(1, '.').append(std::to_string(virtual_stage));
  const double size = std::min(10.0, h * 0.7);
  if (w >= size * 0.62 * double(label.size()) + 2)
    svg.text(x + w / 2, y + h / 2 + size * 0.35, label,
             {.size = size, .anchor = "middle", .fill = fwd || weight ? "#333" : "white"});
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

json schedule_json(ScheduleKind kind, int pp, int vpp, int m, int weight_delay) {
  // A forward and a backward box per micro-batch, virtual stage and rank: past this many no
  // one can read them, and the simulation alone would take minutes and gigabytes.
  const double boxes = 2.0 * pp * vpp * m;
  check(boxes <= 200000, "a schedule of PP ", pp, ", V ", vpp, " and ", m,
        " micro-batches is more boxes (2 PP V m) than the 200,000 tetra draws");
  // A stage's forward costs 1 and its backward 2; a split backward is B 1 and W 1.
  const bool split = splits_backward(kind, weight_delay);
  const double tf = 1.0 / vpp, tb = (split ? 1.0 : 2.0) / vpp, tw = split ? 1.0 / vpp : 0;
  const SimResult sim = simulate(kind, pp, vpp, m, tf, tb, ScheduleMode::Train, tw, weight_delay);
  const BubbleForms forms = bubble_forms(kind, pp, vpp, m, weight_delay);
  const double idle = std::accumulate(sim.idle.begin(), sim.idle.end(), 0.0) / pp;
  json ranks = json::array();
  for (int r = 0; r < pp; ++r) {
    json events = json::array();
    for (const TimedAction& t : sim.timeline[size_t(r)])
      events.push_back({{"kind", std::string(1, action_letter(t.action.kind))},
                        {"micro_batch", t.action.micro_batch},
                        {"virtual_stage", t.action.chunk},
                        {"chunk", chunk_id(placement(kind), pp, r, t.action.chunk)},
                        {"start", t.start},
                        {"end", t.end}});
    ranks.push_back({{"rank", r},
                     {"busy", sim.busy[size_t(r)]},
                     {"idle", sim.idle[size_t(r)]},
                     {"max_in_flight", sim.max_in_flight[size_t(r)]},
                     {"events", events}});
  }
  json out = {{"schedule", schedule_name(kind)},
              {"pp", pp},
              {"vpp", vpp},
              {"micro_batches", m},
              {"forward_time", tf},
              {"backward_time", tb},
              {"weight_time", tw},
              {"makespan", sim.makespan},
              {"bubble",
               {{"of_step", forms.of_step},
                {"of_compute", forms.of_compute},
                {"simulated_of_step", idle / sim.makespan},
                {"simulated_of_compute", idle / (sim.makespan - idle)}}},
              {"ranks", ranks}};
  if (weight_delay_capped(kind, pp, weight_delay)) out["weight_delay"] = weight_delay;
  return out;
}

std::string schedule_svg(const json& sc) {
  const int pp = sc["pp"], vpp = sc["vpp"], m = sc["micro_batches"];
  const double makespan = sc["makespan"];
  const double left = 70, right = 20, top = 54, lane = 26, box = 20;
  const double plot_w = std::clamp(makespan * 36.0, 400.0, 1100.0);
  const double scale = plot_w / makespan;
  const json& b = sc["bubble"];
  const std::string name = sc["schedule"];
  std::string title = name + ", PP " + std::to_string(pp) +
                      (vpp > 1 ? ", V " + std::to_string(vpp) : "") + ", " + std::to_string(m) +
                      " micro-batches: bubble (idle / step) " +
                      short_number(100 * b["of_step"].get<double>(), 1) + " % by the formula, " +
                      short_number(100 * b["simulated_of_step"].get<double>(), 1) + " % simulated";
  // The interleaved schedule's paper gives its bubble as a ratio to the compute.
  if (name == "interleaved")
    title += "; idle / compute " + short_number(100 * b["of_compute"].get<double>(), 1) + " %";
  // The canvas is as wide as the title too (about 7.2 px a character at 13 px bold), so that a
  // short schedule's picture does not cut its title off.
  const double title_w = 7.2 * double(title.size());
  Svg svg(left + std::max(plot_w, title_w) + right, top + pp * lane + 34);
  svg.text(left, 18, title, {.size = 13, .bold = true});
  draw_micro_batch_legend(svg, left, 28, m);

  for (const json& lane_events : sc["ranks"]) {
    const int r = lane_events["rank"];
    const double y = top + r * lane;
    svg.text(left - 8, y + box / 2 + 4, "rank " + std::to_string(r), {.size = 11, .anchor = "end"});
    svg.rect(left, y, plot_w, box, "#f2f2f2");
    svg.begin_group({{"class", "lane"}, {"data-rank", std::to_string(r)}});
    for (const json& e : lane_events["events"]) {
      const Action::Kind kind = e["kind"] == "F"   ? Action::Forward
                                : e["kind"] == "W" ? Action::Weight
                                                   : Action::Backward;
      const int mb = e["micro_batch"], chunk = e["chunk"], v = e["virtual_stage"];
      const double start = e["start"], end = e["end"];
      const std::string what = e["kind"].get<std::string>() + " mb" + std::to_string(mb) +
                               " chunk" + std::to_string(chunk);
      draw_action(svg, left + start * scale, y, (end - start) * scale, box, kind, mb, chunk, v, vpp,
                  what);
    }
    svg.end_group();
  }
  const double axis = top + pp * lane + 4;
  svg.line(left, axis, left + plot_w, axis, "#888");
  for (double t : nice_ticks(0, makespan, 10)) {
    svg.line(left + t * scale, axis, left + t * scale, axis + 4, "#888");
    svg.text(left + t * scale, axis + 15, short_number(t), {.size = 10, .anchor = "middle"});
  }
  svg.text(left + plot_w, axis + 28,
           sc["weight_time"].get<double>() > 0
               ? "time (one stage's forward = 1, backward = B 1 + W 1, W hatched)"
               : "time (one stage's forward = 1, backward = 2)",
           {.size = 10, .anchor = "end", .fill = "#555"});
  return svg.str();
}

}  // namespace tetra
