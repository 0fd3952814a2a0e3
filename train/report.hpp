// What a run tells its user, on rank 0: the start-up table (who holds what), one line per
// step on stdout and one JSON object per step in --metrics, and the summary line.
#pragma once
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "parallel/comm.hpp"
#include "parallel/rank_work.hpp"
#include "train/config.hpp"
#include "train/straggler.hpp"

namespace tetra {

struct StepResult {
  int64_t step = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  double step_ms = 0, tokens_per_s = 0, mfu = 0, hfu = 0;
  double comm_share = 0;  // rank 0's time in communication (bubble excluded) / step time
  // Pipeline bubble, measured (time blocked on activations or gradients, averaged over the
  // ranks) and by the schedule's formula; of the step for gpipe and 1f1b, of the compute
  // for interleaved.
  double bubble = 0, bubble_formula = 0;
  double peak_memory_bytes = 0;           // most backend memory any rank held during the step
  double val_loss = -1;                   // validation loss after the step; < 0: not evaluated
  std::map<std::string, CommStats> comm;  // this rank, this step, per group
  // Per world rank: the step's time outside communication calls and inside them (pipeline
  // receives included), up to the step's end; the straggler among them, if any.
  std::vector<double> compute_ms, wait_ms;
  Straggler straggler;
  int preempted = 0;  // ranks that had received a pre-emption signal by the step's end
};

// The start-up table: the run, the model, the batch, the data, the device and its
// communicators, the peak, then every rank's coordinates, sequence positions and layers.
struct StartupFacts {
  std::string data, device, communicators, peak_source, attention;
  double peak_flops = 0;
};
std::string startup_report(const TrainConfig& opt, const ModelConfig& cfg, const RankWork& work,
                           const StartupFacts& facts);

class RunReport {
 public:
  // Appends to --metrics when metrics_path is not empty; throws tetra::Error when it cannot.
  // entropy_floor: the data's best possible loss (negative when unknown); ln_vocab: the loss
  // of a uniform guess, where training starts. Both go into every record, for tetra plot.
  // attention: the path attention takes (Backend::attention_path), in every record too.
  RunReport(const std::string& metrics_path, double entropy_floor, double ln_vocab,
            std::string attention);
  // The step's line and JSON record. timed: counts in the summary's averages (the first
  // step of a run warms up and does not, unless it is the only one).
  void step(const StepResult& r, bool pipelined, bool timed);
  // The summary line, then each rank's total wait over the run's steps.
  void summary(int64_t first_step, int64_t last_step, double seconds) const;

 private:
  std::string metrics_path_;
  std::ofstream metrics_;
  double entropy_floor_, ln_vocab_;
  std::string attention_;
  double last_loss_ = 0, last_val_loss_ = -1, tokens_per_s_ = 0, mfu_ = 0, hfu_ = 0,
         peak_memory_ = 0;
  int timed_ = 0;
  std::vector<double> wait_ms_;  // per rank, summed over every step
  int straggler_steps_ = 0;
};

}  // namespace tetra
