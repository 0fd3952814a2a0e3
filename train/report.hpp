// What a run tells its user, on rank 0: the start-up table (who holds what), one line per
// step on stdout and one JSON object per step in --metrics, and the summary line.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "parallel/comm.hpp"
#include "parallel/rank_work.hpp"
#include "train/config.hpp"
#include "train/eta.hpp"
#include "train/straggler.hpp"
#include "train/tensorboard.hpp"
#include "util/clock.hpp"
#include "util/json.hpp"
#include "util/output_file.hpp"

namespace tetra {

struct StepResult {
  int64_t step = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  double step_ms = 0, tokens_per_s = 0, mfu = 0, hfu = 0;
  double comm_share = 0;  // rank 0's time in communication (bubble excluded) / step time
  // The exposed and the hidden communication time of rank 0 (ms): the time it spent in
  // communication calls (comm_share's, bubble excluded), and the time its queued collectives
  // (--overlap on) ran while it computed, not waiting for them.
  double comm_exposed_ms = 0, comm_hidden_ms = 0;
  // Pipeline bubble, the idle share of the step for every schedule: measured (time blocked
  // on activations or gradients over the step, averaged over the ranks) and by the
  // schedule's formula; and the formula as a ratio to the compute, (p - 1) / (V m), the
  // form the interleaved schedule's paper gives.
  double bubble = 0, bubble_formula = 0, bubble_formula_of_compute = 0;
  // Under PP: each model chunk's passes, ms per micro-batch (F, B, W; B the whole backward
  // where the schedule runs no W apart), averaged over the step's micro-batches and the ranks
  // that hold the chunk; and the bubble the schedule gives at those costs, simulated with
  // communication free (parallel/schedule.hpp: simulate). Empty and 0 at PP 1.
  std::vector<PassCosts> pass_ms;
  double bubble_at_measured_costs = 0;
  double peak_memory_bytes = 0;           // most backend memory any rank held during the step
  double val_loss = -1;                   // validation loss after the step; < 0: not evaluated
  std::map<std::string, CommStats> comm;  // this rank, this step, per group
  // Per world rank: the step's time outside communication calls and inside them (pipeline
  // receives included), up to the step's end; the straggler among them, if any.
  std::vector<double> compute_ms, wait_ms;
  Straggler straggler;
  int preempted = 0;    // ranks that had received a pre-emption signal by the step's end
  int interrupted = 0;  // ... of which SIGINT (Ctrl-C): the run stops the same way, exit 130
};

// The start-up table: the run, the model, the batch, the data, the device and its
// communicators, the peak, then every rank's coordinates, sequence positions and layers.
struct StartupFacts {
  std::string data, device, communicators, peak_source, attention;
  double peak_flops = 0;
};
std::string startup_report(const TrainConfig& opt, const ModelConfig& cfg, const RankWork& work,
                           const StartupFacts& facts);

// The configuration as --tensorboard's text summary shows it (Markdown): the start-up report
// and the configuration by section as checkpoints record it, as preformatted text.
std::string config_markdown(const std::string& startup, const json& config);

// What the report needs to know of the run before its first step.
struct ReportStart {
  int64_t first_step = 0;  // above 0 after a resume
  int64_t steps = 0;       // --steps: the step line says "step i/N" and the time left
  // The data's best possible loss (negative when unknown) and the loss of a uniform guess,
  // where training starts. Both go into every record, for tetra plot.
  double entropy_floor = -1, ln_vocab = 0;
  std::string config;        // the run's configuration, as --tensorboard's text summary
  std::string attention;     // the path attention takes (Backend::attention_path), in every record
  bool interleaved = false;  // the step line gives the bubble's ratio to compute beside it
  bool split_backward = false;  // the metrics' pass_ms has W apart (parallel/schedule.hpp)
};

class RunReport {
 public:
  // Appends to --metrics and writes a new --tensorboard event file (a SessionLog START at
  // the first step, then the configuration) when asked; throws tetra::Error when it cannot.
  RunReport(const OutputConfig& out, const ReportStart& start);
  // The step's line, JSON record and TensorBoard scalars. timed: counts in the summary's
  // averages (the first step of a run warms up and does not, unless it is the only one).
  void step(const StepResult& r, bool pipelined, bool timed);
  // The summary line, then each rank's total wait over the run's steps. seconds: the loop's
  // wall time; total: the run's, start-up and export included.
  void summary(int64_t first_step, int64_t last_step, double seconds, double total) const;

 private:
  json record(const StepResult& r) const;

  std::string metrics_path_;
  OutputStream metrics_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  int64_t steps_;
  double entropy_floor_, ln_vocab_;
  Clock::time_point created_ = Clock::now();
  Eta eta_;
  std::string attention_;
  bool interleaved_, split_backward_;
  double last_loss_ = 0, last_val_loss_ = -1, peak_memory_ = 0;
  // Over the timed steps: their tokens and seconds, and MFU and HFU weighted by each step's
  // seconds (tokens per step are fixed, so that is tokens over time at F / (ranks x peak)).
  double timed_tokens_ = 0, timed_seconds_ = 0, mfu_seconds_ = 0, hfu_seconds_ = 0;
  std::vector<double> wait_ms_;  // per rank, summed over every step
  int straggler_steps_ = 0;
};

}  // namespace tetra
