// Pictures of pipeline schedules: one lane per pipeline rank, each forward and backward a
// box colored by its micro-batch (forward light, backward dark), idle time left blank.
// schedule_svg draws the simulator's timeline (parallel/schedule.hpp) for `tetra plot
// --schedule` and `tetra plan --draw`; draw_action is the box that the measured step
// picture (tetra plot --trace) uses too, so the two compare at a glance.
#pragma once
#include <string>

#include "parallel/schedule.hpp"
#include "plot/svg.hpp"
#include "util/json.hpp"

namespace tetra {

// The schedule of `kind` for PP ranks, V virtual stages and m micro-batches, simulated with
// a chunk's forward taking 1/V and its backward 2/V (a stage's forward is one unit, its
// backward two, whatever V), as JSON (`tetra plot --schedule ... --json`; its keys in
// docs/design.md): the bubble by the formula and by the simulation, both as the idle share
// of the step and as a ratio to the compute, and every rank's events with their times.
// Throws tetra::Error for a combination check_schedule refuses, or past 200,000 boxes.
json schedule_json(ScheduleKind kind, int pp, int vpp, int micro_batches,
                   int weight_delay = kPaperWeightDelay);

// That object drawn: a lane per rank, a box per event, the bubble in the title.
std::string schedule_svg(const json& schedule);
inline std::string schedule_svg(ScheduleKind kind, int pp, int vpp, int micro_batches,
                                int weight_delay = kPaperWeightDelay) {
  return schedule_svg(schedule_json(kind, pp, vpp, micro_batches, weight_delay));
}

// One action's box at (x, y, w, h), carrying class "F" or "B", data-mb and data-chunk (the
// model chunk id), labelled with the micro-batch (and ".v", the virtual stage, when
// vpp > 1) when it is wide enough; `title` is its tooltip.
void draw_action(Svg& svg, double x, double y, double w, double h, Action::Kind kind,
                 int micro_batch, int chunk_id, int virtual_stage, int vpp,
                 const std::string& title);

// The legend row of micro-batch colors (forward and backward) at (x, y), for m micro-batches
// (at most ten shown); returns the x after it.
double draw_micro_batch_legend(Svg& svg, double x, double y, int micro_batches);

}  // namespace tetra
