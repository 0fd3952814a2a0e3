// tetra plot: pictures of a run as SVG files that tetra writes itself (plot/svg.hpp).
//   --loss METRICS      the loss per step, with the data's entropy floor and ln(vocab)
//   --trace TRACE       one traced step: a lane per rank, each forward and backward a box
//                       colored by micro-batch, communication and waiting below it
//   --barrier METRICS   one step's compute and wait per rank, the straggler marked
//   --schedule KIND     a pipeline schedule from the simulator (plot/svg_schedule.hpp)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "util/json.hpp"

namespace tetra {

// What `tetra plot` draws: exactly one of loss, trace, barrier (input files) or schedule (a
// kind, drawn for pp, vpp and micro_batches; 0 micro-batches: 2 * PP), as SVG to out.
struct PlotOptions {
  std::string loss, trace, barrier, schedule, out;
  int pp = 4, vpp = 1, micro_batches = 0;
  int64_t step = -1;  // --trace: the first traced step; --barrier: the last with a straggler
  bool json = false;  // --schedule: the simulated events as JSON on stdout, no SVG
};

// The records of a metrics JSONL file (one object per line, blank lines skipped). Throws
// tetra::Error naming the file and line for anything else, or when it holds no record.
std::vector<json> read_metrics(const std::string& path);

// The loss of each step (a step written twice, by a resumed run, takes its last record),
// with the horizontal lines the records carry: entropy_floor (the best loss the data allows,
// known for synthetic data only) and ln_vocab (a uniform guess, where training starts).
std::string loss_svg(const std::vector<json>& records, const std::string& source);

// Step `step`'s compute_ms and wait_ms per rank as stacked bars that end at the step's
// gather, the median compute dashed, the straggler (straggler in the record) marked. step
// -1: the last step with a straggler, else the last step. Up to kMaxBarrierRanks lanes (the
// GPUs of Llama 3 405B's run): past that no one reads them, as past 200,000 schedule boxes.
inline constexpr int kMaxBarrierRanks = 16384;
std::string barrier_svg(const std::vector<json>& records, int64_t step);

// Step `step` of a Chrome trace written by tetra train --trace (-1: the first traced step).
// Each rank's lane has the forward and backward boxes (class F and B, data-mb, data-chunk,
// inside <g class="lane" data-rank=R>), other compute in gray, and below them a strip of
// communication (class comm) with the pipeline waits (class wait) over it.
std::string trace_step_svg(const json& trace, int64_t step, const std::string& source);

// Runs `tetra plot`: reads the input, draws, writes opt.out. Throws tetra::Error.
void plot_command(const PlotOptions& opt);

}  // namespace tetra
