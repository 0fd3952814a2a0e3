// One layout run and measured, the unit of `tetra sweep` and of `tetra serve`'s runs: what the
// plan says of it, its `tetra train` job through the launcher, what its metrics measured (the
// timed steps' speed and split, bytes per group, peak memory, the bubble), whether the plan's
// bytes and memory hold (plan/compare.hpp) and whether its per-step losses match one rank's
// (train/match.hpp), and its record for sweep.jsonl and the page.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "jobs/sweep.hpp"
#include "plan/estimate.hpp"
#include "plan/setup.hpp"
#include "util/json.hpp"

namespace tetra {

// The groups a record gives bytes for, in the metrics' names.
extern const char* const kRunGroups[5];

// One layout: what the plan says, and what its run measured (averages over the timed steps:
// all but the first, which warms up, unless it is the only one).
struct LayoutRun {
  plan::Setup setup;
  std::string id, title;
  std::string status = "planned";  // then ok, mismatch, failed, timeout or stopped
  int exit_code = 0;
  double seconds = 0;
  std::string error;  // why it failed
  std::vector<double> losses;
  double loss_gap = 0;
  double tokens_per_s = 0, mfu = 0, step_ms = 0;
  double probe_flops = 0;  // per rank: the peak the run's own MFU was counted against
  // The bubble, the idle share of the step, as the metrics give it, the schedule's at the
  // passes' measured costs (bubble_at_measured_costs), and by the formula.
  double bubble = 0, bubble_at_costs = 0, bubble_formula = 0;
  // The step split, averaged over the ranks: compute, the bubble and the exposed
  // communication besides (the rest of the ranks' wait); they sum to 1.
  double compute_share = 0, bubble_of_step = 0, comm_share = 0;
  // Rank 0's communication hidden under its compute (--overlap on), as a share of the step:
  // beside the split, not in it.
  double hidden_share = 0;
  double peak_measured = 0, peak_planned = 0;
  std::map<std::string, double> bytes_planned;  // per step, each rank of pipeline stage 0
  std::map<std::string, int64_t> bytes_measured;
  bool plan_matches = false, fits = true;
  plan::StepEstimate estimate;
  bool ran() const { return status == "ok" || status == "mismatch"; }
};

// What the plan says of r.setup on the machine (o.machine, with o.train's dtype): its id and
// title, peak memory, bytes per group, whether it fits and the step time. A CPU's ranks share
// its memory; GPUs hold a rank each.
void plan_layout(LayoutRun& r, const SweepOptions& o, const plan::Machine& mc);

// Runs the layout for o.train's steps (its log and metrics under o.out/runs/ID.*) and measures
// it. ref: the one-rank reference's losses, which its losses must match (empty: this is the
// reference). MFU, and the plan's step time when the machine has no peak, count against one
// peak per rank, `peak` (0: the run's own probe, for the reference that sets it), so that MFU
// ranks layouts as tokens/s does. go_on: as run_job's, to follow the metrics as they are
// written or stop the run.
void run_layout(LayoutRun& r, const SweepOptions& o, const TrainArgs& train,
                const plan::Machine& mc, const std::vector<double>& ref, double peak,
                const std::function<bool()>& go_on = nullptr);

// The peak per rank every layout's MFU counts against: --peak-tflops, else the one-rank
// reference's GEMM probe; and which of the two it is, in words.
double layouts_peak(const SweepOptions& o, const LayoutRun& ref);
std::string layouts_peak_source(const SweepOptions& o);

// The one-rank layout of o.train's model and batch (ZeRO-1, named "reference"), planned.
LayoutRun reference_run(const SweepOptions& o, const plan::Machine& mc);

// The tetra train command of a run of `spec` on `ranks` ranks (through o's launcher, with o's
// flags, steps and the metrics file).
std::vector<std::string> train_command(const SweepOptions& o, const TrainArgs& train,
                                       const plan::RunSpec& spec, int ranks,
                                       const std::string& metrics);

// Where run_layout writes r's metrics.
std::string run_metrics_path(const LayoutRun& r, const SweepOptions& o);

// The run's record: the layout, the plan's and the measured bytes per group and peak memory,
// speed, split and bubble, whether it matches one rank and the plan.
json run_record(const LayoutRun& r, bool reference);

}  // namespace tetra
