// The training loop of one rank: takes over the parts build_rank made of it (the grid, the
// backend, the model chunks of its pipeline stage and their sharded parameters), then runs
// steps. Every public call is collective over the `world` communicator it was built on, so a
// test can run several layouts side by side on sub-communicators of one mpirun.
#pragma once
#include <mpi.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/lock.hpp"
#include "data/dataset.hpp"
#include "data/tokenizer.hpp"
#include "parallel/grid.hpp"
#include "parallel/pipeline.hpp"
#include "parallel/rank_work.hpp"
#include "train/config.hpp"
#include "train/faults.hpp"
#include "train/rank_parts.hpp"
#include "train/report.hpp"
#include "transformer/chunk.hpp"
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
  bool has_validation() const { return val_ != nullptr; }
  const std::string& resumed_from() const { return resumed_from_; }
  // Runs the remaining steps, printing a line per step and a summary on rank 0. Returns the
  // exit status: 0, or exit_status::kPreempted when a pre-emption signal (train/preempt.hpp)
  // stopped the run at a step boundary, after a checkpoint, with the lock released.
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

  const Grid& grid() const { return grid_; }
  const ModelConfig& model() const { return cfg_; }
  ZeroParams& params() { return *params_; }
  Backend& backend() { return *be_; }
  int micro_batches() const { return work_.micro_batches; }
  int micro_batch() const { return work_.micro_batch; }
  const RankWork& work() const { return work_; }
  std::string startup_report() const;
  // Which implementation this rank's attention calls take (Backend::attention_path).
  std::string attention_path() const;

 private:
  explicit Trainer(RankParts parts, MPI_Comm world);

  // The phases of a step.
  // Forward and backward of every micro-batch in the schedule's order, with each unit's
  // gradient sync started inside backward.
  PipelineStats forward_backward();
  // The step's totals over every rank: the loss, the global gradient norm, the bubble.
  struct StepTotals {
    double loss, grad_norm, bubble;
  };
  StepTotals reduce_totals(const PipelineStats& pipe);
  // Clipping and AdamW on this rank's shards; returns the step's learning rate.
  double update(double grad_norm);
  // ZeRO-1/2: every rank's updated shards all-gathered into the full weights.
  void regather();
  StepResult measure(const StepTotals& totals, const PipelineStats& pipe, double seconds,
                     double lr);

  // Tokens of one global batch.
  double tokens_per_step() const { return double(opt_.batch.global_batch) * cfg_.seq_len; }
  // Micro-batch j of batch `step` of the source, for this rank, its tensors in held[0..3]
  // (tokens, targets, and under --doc-mask the queries' and the keys' documents).
  MicroBatch make_micro_batch(const data::Dataset& source, int64_t step, int j, Buffer* held);
  std::vector<CommStats*> comm_stats();
  // Rank 0, before the first step: `latest` names the line this run trains from now on
  // (the checkpoint it resumed from, or none yet).
  void point_latest_here();
  // Collective; returns the seconds it took.
  double save_checkpoint();
  // A run resumed at its last step: says so, exports if asked, trains nothing.
  void finish_already_done();

  const Clock::time_point started_ = Clock::now();
  // The parts of the rank (train/rank_parts.hpp), in its order: the backend outlives the
  // communicators, which queue work on its stream, and what lives in backend memory.
  TrainConfig opt_;
  MPI_Comm world_;
  ckpt::RunState record_;  // what checkpoints record of the configuration
  ModelConfig cfg_;
  std::unique_ptr<data::Tokenizer> tokenizer_;
  std::unique_ptr<data::Dataset> data_, val_;  // val_: null without validation
  RankWork work_;
  FaultPlan fault_;
  std::unique_ptr<ckpt::DirLock> lock_;  // rank 0, with --ckpt-dir
  std::string resumed_from_;
  ckpt::CheckpointRef line_head_;  // the newest checkpoint of the line trained
  double resume_seconds_ = 0;
  int threads_ = 1;
  std::unique_ptr<Backend> be_;
  Grid grid_;
  std::unique_ptr<ZeroParams> params_;
  std::vector<std::unique_ptr<ModelChunk>> chunks_;  // this stage's, in virtual-stage order
  std::unique_ptr<PipelineExecutor> executor_;
  Buffer token_pos_, seq_pos_, key_pos_;  // positions of this rank's tokens (constant)
  double peak_flops_ = 0;                 // per rank
  std::string peak_source_;
  int64_t step_ = 0;
};

}  // namespace tetra
