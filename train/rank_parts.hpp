// One rank of a training run, built: every part the trainer steps with, made by build_rank
// from the configuration in one pass, so that the Trainer only holds them.
#pragma once
#include <mpi.h>

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
#include "parallel/zero.hpp"
#include "train/config.hpp"
#include "train/faults.hpp"
#include "train/peak.hpp"
#include "transformer/chunk.hpp"

namespace tetra {

// Where the run starts: step 0, or a checkpoint it resumed from.
struct ResumePoint {
  std::string path;          // the checkpoint resumed from ("" for step 0)
  int64_t step = 0;          // the next step to train
  ckpt::CheckpointRef line;  // the newest checkpoint of the line trained (none yet: empty)
  double seconds = 0;        // loading it took
};

// The parts, in the order build_rank makes them. Members are destroyed in reverse: the
// backend outlives the communicators (which queue work on its stream), the parameters, the
// chunks and the buffers.
struct RankParts {
  // As the run uses it: text data as its token shards, and the model the one trained (the
  // flags', or --init-from's shapes), so that nothing reads another.
  TrainConfig config;
  ckpt::RunState record;                       // what checkpoints record of the configuration
  std::unique_ptr<data::Tokenizer> tokenizer;  // bytes unless --tokenizer or the init model's
  std::unique_ptr<data::Dataset> data, val;    // val: null without validation
  RankWork work;                               // which layers and tokens the rank holds
  FaultPlan fault;                             // --inject-failure
  std::unique_ptr<ckpt::DirLock> lock;         // rank 0, with --ckpt-dir
  ResumePoint resume;
  int threads = 1;  // per rank
  std::unique_ptr<Backend> backend;
  Grid grid;                                        // the process grid and its communicators
  std::unique_ptr<ZeroParams> params;               // this rank's units, sharded over dp_cp
  std::vector<std::unique_ptr<ModelChunk>> chunks;  // this stage's, in virtual-stage order
  std::unique_ptr<PipelineExecutor> executor;
  Buffer token_pos, seq_pos, key_pos;  // positions of this rank's tokens (the same each step)
  Peak peak;                           // FLOP/s per rank, for MFU
};

// Builds rank `rank of world` of the run `c` (resolved). Collective over world. Everything
// that can refuse the input (the tokenizer and the data, the model file and its shapes, the
// layout, the memory a step needs, the fault, the output paths, the checkpoint directory's
// lock, the checkpoint to resume from and its settings) is checked on every rank before any
// collective that depends on it, and agree() makes every rank throw the same AgreedError.
// Nothing is written before every check has passed: the outputs come first
// (train/outputs.hpp), and a missing checkpoint directory is made (and locked) last.
RankParts build_rank(const TrainConfig& c, MPI_Comm world);

// What the checkpoints of a run record of its configuration: the model trained, the layout
// as laid out (dp resolved) and every other section as given (TrainConfig's JSON mapping),
// --data as an absolute path so that spellings of one file agree.
ckpt::RunState record_of(const TrainConfig& c, const ModelConfig& model, const Layout& layout);

// The dtype of the weights the model computes with and of its activations.
inline DType compute_dtype(const DeviceConfig& d) {
  return d.dtype == "bf16" ? DType::BF16 : DType::F32;
}

}  // namespace tetra
