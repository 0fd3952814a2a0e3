// The training loop of one rank: builds the grid, the backend, the model chunks of its
// pipeline stage and their sharded parameters, then runs steps. Every public call is
// collective over the `world` communicator it was built on, so a test can run several
// layouts side by side on sub-communicators of one mpirun.
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
#include "parallel/agree.hpp"
#include "parallel/grid.hpp"
#include "parallel/pipeline.hpp"
#include "parallel/pipeline_layout.hpp"
#include "parallel/rank_work.hpp"
#include "train/config.hpp"
#include "train/faults.hpp"
#include "train/report.hpp"
#include "transformer/chunk.hpp"

namespace tetra {

class Trainer {
 public:
  // Throws tetra::Error for any bad input (the same on every rank).
  Trainer(const TrainConfig& opt, MPI_Comm world);
  ~Trainer();

  StepResult step();
  // The mean loss over the validation sequences (--eval-batches global batches of the
  // validation source, the same every time), forward only through the pipeline schedule.
  // Collective; needs has_validation().
  double evaluate();
  bool has_validation() const { return val_ != nullptr; }
  int64_t current_step() const { return step_; }
  const std::string& resumed_from() const { return resumed_from_; }
  // Runs the remaining steps, printing a line per step and a summary on rank 0. Returns the
  // exit status: 0, or kPreemptedExitStatus when a pre-emption signal (train/preempt.hpp)
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
  double peak_flops() const { return peak_flops_; }  // per rank
  std::string startup_report() const;
  // Which implementation this rank's attention calls take (Backend::attention_path).
  std::string attention_path() const;

 private:
  // Construction, after the plan: the backend and the process grid with its communicators,
  // then this stage's model chunks and the pipeline executor.
  // --tokenizer: loads (or trains) the SentencePiece model and points the data at its token
  // shards, tokenizing what is not cached yet; `report` prints what it did.
  void use_tokenizer(bool report);
  void make_backend_and_grid();
  void make_pipeline();
  // The dtype of the weights the model computes with and of its activations.
  DType compute_dtype() const { return opt_.device.dtype == "bf16" ? DType::BF16 : DType::F32; }
  // The step's totals over every rank.
  struct StepTotals {
    double loss, grad_norm, bubble;
  };
  StepTotals reduce_totals(const PipelineStats& pipe, double tokens);
  StepResult measure(const StepTotals& totals, const PipelineStats& pipe, double seconds,
                     double tokens);
  // Micro-batch j of batch `step` of the source, for this rank.
  MicroBatch make_micro_batch(const data::Dataset& source, int64_t step, int j, Buffer& tokens,
                              Buffer& targets);
  std::vector<CommStats*> comm_stats();
  // Loads weights, Adam state and the step from a checkpoint of any layout, after checking
  // that the checkpoint's run had this run's settings (or --allow-change says they may
  // differ) and is not past --steps.
  void resume_from(const std::string& path);
  // Rank 0, before the first step: `latest` names the line this run trains from now on
  // (the checkpoint it resumed from, or none yet).
  void point_latest_here();
  // Collective; returns the seconds it took.
  double save_checkpoint();
  // A run resumed at its last step: says so, exports if asked, trains nothing.
  void finish_already_done();

  TrainConfig opt_;
  MPI_Comm world_;
  // The backend outlives the communicators, which queue work on its stream.
  std::unique_ptr<Backend> be_;
  Grid grid_;
  ModelConfig cfg_;
  std::unique_ptr<data::Dataset> data_, val_;   // val_: null without validation
  std::unique_ptr<data::Tokenizer> tokenizer_;  // bytes unless --tokenizer
  RankWork work_;
  std::unique_ptr<ZeroParams> params_;
  std::vector<std::unique_ptr<ModelChunk>> chunks_;  // this stage's, in virtual-stage order
  std::unique_ptr<PipelineExecutor> executor_;
  Buffer token_pos_, seq_pos_, key_pos_;  // positions of this rank's tokens (constant)
  int64_t step_ = 0;
  double peak_flops_ = 0;
  std::string peak_source_;
  int threads_ = 1;
  int sharing_cores_ = 1;  // ranks of this machine with this rank's affinity, itself included
  FaultPlan fault_;
  std::unique_ptr<ckpt::DirLock> lock_;  // rank 0, with --ckpt-dir
  json settings_;                        // this run's, as checkpoints record them
  ckpt::CheckpointRef line_head_;        // the newest checkpoint of the line trained
  std::string resumed_from_;
  double resume_seconds_ = 0;
};

}  // namespace tetra
