// The training loop of one rank: holds the parts build_rank made of it (the configuration,
// the grid, the backend, the model chunks of its pipeline stage and their sharded parameters),
// then runs steps. Every public call is collective over the `world` communicator it was built on,
// so a test can run several layouts side by side on sub-communicators of one mpirun.
#pragma once
#include <mpi.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/saver.hpp"
#include "train/rank_parts.hpp"
#include "train/report.hpp"
#include "util/clock.hpp"

namespace tetra {

class Trainer {
 public:
  // Builds the rank (build_rank). Throws tetra::Error for any bad input (the same on every
  // rank).
  Trainer(const TrainConfig& config, MPI_Comm world);
  ~Trainer();

  StepResult step();
  // The mean loss over the validation sequences (--eval-batches global batches of the
  // validation source, the same every time), forward only through the pipeline schedule.
  // Collective; needs has_validation().
  double evaluate();
  bool has_validation() const { return parts_.val != nullptr; }
  const std::string& resumed_from() const { return parts_.resume.path; }
  // Runs the remaining steps, printing a line per step and a summary on rank 0. Returns the
  // exit status: 0, or exit_status::kPreempted when a pre-emption signal (train/preempt.hpp)
  // stopped the run at a step boundary, after a checkpoint, with the lock released
  // (kInterrupted when the signal was SIGINT).
  int run();

  // Whole tensors on rank 0 (empty maps elsewhere): the weights, or the reduced gradients
  // of the last step before clipping.
  std::map<std::string, std::vector<float>> full_weights();
  std::map<std::string, std::vector<float>> full_grads();
  void export_weights(const std::string& path);
  // A greedy continuation of a fixed prompt (the first tokens of the validation data, else
  // the training data) from the current weights, as one printable line; on rank 0 (empty
  // elsewhere). Collective.
  std::string sample(int tokens = 32);

  const Grid& grid() const { return parts_.grid; }
  // The model trained: the flags', or --init-from's shapes.
  const ModelConfig& model() const { return parts_.config.model; }
  ZeroParams& params() { return *parts_.params; }
  Backend& backend() { return *parts_.backend; }
  int micro_batches() const { return parts_.work.micro_batches; }
  int micro_batch() const { return parts_.work.micro_batch; }
  std::string startup_report() const;

 private:
  const TrainConfig& config() const { return parts_.config; }

  // The phases of a step.
  // Forward and backward of every micro-batch in the schedule's order, with each unit's
  // gradient sync started inside backward.
  PipelineStats forward_backward();
  // The step's totals over every rank: the loss and the global gradient norm.
  struct StepTotals {
    double loss, grad_norm;
  };
  StepTotals reduce_totals(const PipelineStats& pipe);
  // Clipping and AdamW on this rank's shards; returns the step's learning rate.
  double update(double grad_norm);
  // ZeRO-1/2: every rank's updated shards all-gathered into the full weights.
  void regather();
  StepResult measure(const StepTotals& totals, const PipelineStats& pipe, double seconds,
                     double lr);

  // The phases of a run (trainer_run.cpp).
  // Rank 0: the start-up report, and where the run resumed.
  void report_start() const;
  // Before the first step: `latest` pointed at the line trained, the report opened, tracing
  // started.
  void start_run();
  // One step under the watchdog, traced when it falls in traced_steps().
  StepResult watched_step();
  // What follows a step at its cadence: the evaluation, the sample, the step's report, the
  // checkpoint.
  void after_step(StepResult& r);
  // Whether a pre-emption signal stops the run after this step (not after the last).
  bool preempted(const StepResult& r) const;
  // The run stopped by pre-emption: the lock released, the summary; kPreempted, or
  // kInterrupted when a rank's signal was SIGINT.
  int stop(const StepResult& r);
  // After the last step: the trace, the export, the summary; 0.
  int finish();
  // A run resumed at its last step: says so, exports if asked, trains nothing; 0.
  int finish_already_done();
  // Steps [from, to) are traced: --trace-steps steps after the run's first, which warms up
  // (unless it is alone).
  struct StepRange {
    int64_t from, to;
  };
  StepRange traced_steps() const;

  // Tokens of one global batch.
  double tokens_per_step() const { return double(config().batch.global_batch) * model().seq_len; }
  // Whether this rank's loss sums count in the step's: the head's stage (the last, or rank 0
  // under zb-v's V) computes the loss on every TP rank, and TP rank 0 counts it.
  bool counts_loss() const {
    return parts_.grid.coord.tp == 0 &&
           parts_.grid.coord.pp ==
               head_rank(placement(parts_.work.schedule), parts_.grid.layout.pp);
  }
  // The micro-batches of batch `index` of `source` for this rank, with the buffers that hold
  // their tokens and targets (and under `model.doc_mask` their queries' and keys' documents).
  struct Batch {
    std::vector<Buffer> buffers;
    std::vector<MicroBatch> micro;
  };
  Batch batch_of(const data::Dataset& source, int64_t index);
  std::vector<CommStats*> comm_stats();
  // Which implementation this rank's attention calls take (Backend::attention_path).
  std::string attention_path() const;
  // Rank 0, before the first step: `latest` names the line this run trains from now on
  // (the checkpoint it resumed from, or none yet).
  void point_latest_here();
  // Collective: waits for the checkpoint being saved, if any, then copies this rank's state to
  // memory (ckpt_copy_) and starts writing it (saver_); --ckpt-async leaves it writing.
  void save_checkpoint();
  // A checkpoint installed: the line's head moves to it; rank 0 says so, with its stall.
  void saved(const ckpt::Saved& s);

  RankParts parts_;  // everything build_rank made: the configuration, the model, the data, ...
  // The schedule's bubble at equal pass costs: the same every step (a simulation where ZB-H1's
  // W delay is lowered), so made once.
  const BubbleForms bubble_forms_;
  MPI_Comm world_;
  const Clock::time_point started_ = Clock::now();
  int64_t step_;                       // the next step to train
  ckpt::CheckpointRef line_head_;      // the newest checkpoint of the line trained
  std::unique_ptr<RunReport> report_;  // rank 0, from start_run
  // The checkpoint's copy of this rank's shards, which saver_'s writer reads until it is
  // installed (declared first: saver_'s destructor waits for the writer).
  HostBuffer ckpt_copy_;
  ckpt::Saver saver_;               // the checkpoint being saved
  Clock::time_point loop_started_;  // start_run's time
};

}  // namespace tetra
