// `tetra sweep --ranks N [model, batch and machine flags] --out DIR`: every layout of N
// ranks that tetra accepts (plan/layouts.hpp), each run for a few steps through a launcher,
// its per-step losses held to one rank's (train/match.hpp), its bytes and memory set beside
// the plan's, ranked by measured speed. Writes DIR/sweep.jsonl (a record per layout),
// DIR/sweep.svg (plot/svg_sweep.hpp) and each run's log and metrics under DIR/runs/.
// `--dry-run` lists the layouts with the plan's numbers and runs nothing. Like tetra launch
// it is the parent of the MPI jobs, not one of them.
#pragma once
#include <string>
#include <vector>

#include "jobs/job.hpp"
#include "jobs/train_args.hpp"
#include "plan/layouts.hpp"
#include "plan/plan_json.hpp"
#include "train/config.hpp"

namespace tetra {

struct SweepOptions {
  // Model, batch, optimizer (but --zero), data and device, as tetra train takes them; every
  // run gets the flags given (pass), the layout's and its own --steps and --metrics.
  TrainConfig train;
  std::vector<std::string> train_flags;  // the train options the sweep takes
  std::vector<std::string> pass;         // those given, as tokens for tetra train
  int ranks = 0;
  std::string zero = "1", schedules = "1f1b", vpp = "1", sp = "off";  // lists, as given
  plan::LayoutChoices choices;                                        // ... parsed
  plan::Request machine;  // --gpu (default: cpu, or h100 under --device cuda) and overrides
  std::string out;
  JobOptions job;
  bool dry_run = false;
};

// Runs the sweep `o` (parsed by cli/jobs_flags.cpp). Returns the exit status: 0 when the sweep ran
// (whatever each layout did), 1 when the one-rank reference failed or no layout both fits and
// matches. Throws tetra::Error for bad input, Interrupted when interrupted.
int run_sweep(const SweepOptions& o, const TrainArgs& train);

}  // namespace tetra
