// Sharded checkpoints: DIR/step_00000100/ holds one safetensors file per rank
// (rank_00003.safetensors: the rank's parameter, Adam m and Adam v shards) and
// manifest.json (model config, layout, step, tokens seen, RNG and sampler state, the rest of
// the run's configuration, the checkpoint it follows, every shard file's size and checksum,
// and its own checksum).
//
// Writing is crash-safe: everything goes into step_00000100.tmp/, each file is flushed
// (fsync) before the directory is renamed, which happens only after every rank has
// finished; DIR/latest (a one-line file naming the directory) then moves atomically by
// rename. Nothing that exists is ever overwritten in place. The files may be written while
// training goes on (checkpoint/saver.hpp).
//
// Lines: each checkpoint names its parent, the checkpoint the run that wrote it had
// resumed from or written before it. Resuming from an earlier checkpoint starts a new line;
// `latest` names the newest checkpoint of the line being trained, and resuming, falling
// back past a corrupt checkpoint and pruning to the newest `keep` all follow parents, so
// they never cross to another line.
//
// Reading works at any layout: each shard file names, for every stored segment, the
// parameter (Hugging Face name), the TP rank and size that held it, and the range of that
// TP-local tensor's flattened elements it covers, so a reader can assemble any
// parameter whole and cut it again for another TP, PP, DP, CP or ZeRO layout.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"
#include "model/config.hpp"
#include "util/json.hpp"

namespace tetra::ckpt {

// A contiguous piece of one parameter's TP-local tensor that this rank stores, with the
// matching Adam moments. Pointers are host memory, valid during save().
struct Segment {
  std::string name;  // "model.layers.0.self_attn.q_proj.weight"
  int tp_rank = 0, tp_size = 1;
  int64_t begin = 0, end = 0;  // element range of the TP-local flattened tensor
  const float* param = nullptr;
  const float* adam_m = nullptr;
  const float* adam_v = nullptr;
};

// A checkpoint as a later one names it: its directory name when it is in the same
// checkpoint directory, else its path, and its manifest's checksum, which tells it apart
// from a checkpoint of another line that later took the same name.
struct CheckpointRef {
  std::string name;  // "" for none: the first checkpoint of a line that started at step 0
  uint32_t manifest_crc = 0;
  bool operator==(const CheckpointRef&) const = default;
};

// What a run needs besides the tensors to continue exactly where it stopped.
struct RunState {
  int64_t step = 0;         // steps completed; the next step to run
  int64_t tokens_seen = 0;  // step * global batch * seq len
  uint64_t seed = 0;        // weights' init and synthetic data
  // The sampler's position: step s takes sequences (s*G + j) mod K, so it is the step
  // and the global batch G; stored explicitly so that a reader can check it.
  int64_t sampler_step = 0;
  int global_batch = 0;
  json model;   // ModelConfig as JSON (model_to_json)
  json layout;  // the layout section (LayoutConfig, dp as run); tp..dp are checked
  // The rest of the configuration of the run that wrote it, by section (the trainer's
  // TrainConfig: {"batch": {...}, "optimizer": {...}, "data", "device", "checkpoint",
  // "output"}); what a resume compares (checkpoint/resume.hpp). From a version 2 manifest,
  // which recorded only `run` (the --allow-change settings), those settings in their sections.
  json config;
  CheckpointRef parent;
};

json model_to_json(const ModelConfig& c);
// Throws tetra::Error naming `what` if a field is missing or malformed.
ModelConfig model_from_json(const json& v, const std::string& what);

// Collective over `world`: every rank passes its segments (possibly none). Writes
// dir/step_<8 digits>/ as described above (creating dir if needed; an existing checkpoint
// of the same step is replaced, once the new one is complete, only when it is identical,
// and otherwise moved aside to step_<8 digits>.abandoned), updates dir/latest and deletes
// the new checkpoint's ancestors beyond the newest `keep` of its line (keep <= 0: none).
// Throws tetra::Error on every rank (the same message) if any rank fails, leaving any
// earlier checkpoint and `latest` untouched.
// raise_after_shard (--inject-failure): a signal this rank raises once its shard file is on
// disk, before the checkpoint is complete: SIGKILL (RANK@STEP:ckpt) or a second pre-emption
// signal (RANK@STEP:preempt); 0 for none.
// still_ours (rank 0; may be null) throws when the directory is no longer this job's (its
// lock taken over, checkpoint/lock.hpp's check_held): called before anything is written into
// dir and again before the checkpoint is installed, so that a job that lost its lock leaves
// the directory to the one that took it.
// Returns the path of the new checkpoint directory. (Saver, checkpoint/saver.hpp, does the
// same with the writing in the background; save() is its start() and wait().)
std::string save(MPI_Comm world, const std::string& dir, const RunState& state,
                 const std::vector<Segment>& segments, int keep, int raise_after_shard = 0,
                 const std::function<void()>& still_ours = nullptr);

// The single-process steps that save() runs, exposed so that a test or a tool can write a
// checkpoint of any world size from one process:
//   rank 0: tmp = begin_write(dir, step)
//   rank r: shards[r] = write_shard(tmp, r, world_size, state, segments of rank r)
//   rank 0: finish_write(dir, state, shards, keep)
struct ShardRecord {
  std::string file;  // "rank_00003.safetensors"
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};
// dir/step_<8 digits>.tmp: where a checkpoint of that step is written before it is installed.
std::string tmp_dir_of(const std::string& dir, int64_t step);
// Creates dir (with its parents) and an empty dir/step_<8 digits>.tmp, removing a stale one
// that a crashed writer left. Returns the path of the .tmp directory.
std::string begin_write(const std::string& dir, int64_t step);
// Checks the segments against the model of `state` (known names, ranges inside the
// TP-local tensor) and writes rank's shard file into tmp_dir, flushed to disk, its metadata
// repeating the step, rank, world size and parent for cross-checks. Returns its size and
// checksum.
ShardRecord write_shard(const std::string& tmp_dir, int rank, int world_size, const RunState& state,
                        const std::vector<Segment>& segments);
// Writes the manifest, moves the .tmp directory into place (setting aside a different
// checkpoint of the same step), updates dir/latest and deletes the new checkpoint's
// ancestors beyond the newest `keep` of its line. Returns the path of the new checkpoint
// directory.
std::string finish_write(const std::string& dir, const RunState& state,
                         const std::vector<ShardRecord>& shards, int keep,
                         const std::function<void()>& still_ours = nullptr);

// Checks a checkpoint directory without MPI: the manifest parses and matches its own
// checksum; its step agrees with the directory's name, the sampler state, the tokens seen
// and every shard file's metadata; its layout with the world size and the segments' TP
// size; every shard file it lists exists with the listed size and checksum and parses as
// safetensors with the segments it lists; together they hold every parameter whole, and
// copies of a TP-replicated tensor are equal.
// Returns an empty string when it verifies, else one line naming the file and the problem.
std::string verify(const std::string& checkpoint_dir);

// What `dir/latest` holds: the newest checkpoint of the line being trained, as a name in
// dir or a path elsewhere (a line resumed from another directory), or kNoCheckpoint when
// that line has none yet (a run that started over). set_latest replaces it atomically.
inline constexpr const char* kNoCheckpoint = "none";
void set_latest(const std::string& dir, const std::string& target);
// The reference a checkpoint of `dir` gives to the checkpoint at `checkpoint_path`.
CheckpointRef reference_to(const std::string& dir, const std::string& checkpoint_path);
// Deletes what writing the checkpoint `head` names would have: its ancestors in dir beyond the
// newest `keep` of its line (nothing when it is not in dir). For a run that resumes from its
// last checkpoint with nothing left to train: a kill between that checkpoint's installation
// and its pruning left one more than `keep`.
void prune_behind(const std::string& dir, const CheckpointRef& head, int keep);

// The checkpoint to resume from in dir: the newest one of the line `latest` names that
// verifies, following parents from there (never to a checkpoint of another line); without
// a usable `latest`, the newest that verifies. Each one skipped is reported through
// `warnings` ("skipping <dir>: <problem>"), as is a `latest` that names nothing here.
// Returns "" when there is none: no checkpoint, a line without one yet, or (with warnings
// starting "skipping") none on the line that verifies.
std::string find_latest(const std::string& dir, std::vector<std::string>* warnings);

// Every step_N checkpoint in dir that verifies, newest first, of whatever line: what a
// refusal names when the line being trained has none that verifies but others do.
std::vector<std::string> verifying_checkpoints(const std::string& dir);

// Reads a checkpoint for any layout.
class Reader {
 public:
  // Throws tetra::Error naming the file for an unreadable or malformed manifest or a
  // missing shard file (it does not verify checksums: call verify() for that).
  explicit Reader(const std::string& checkpoint_dir);
  const RunState& state() const { return state_; }
  const std::string& path() const { return dir_; }
  uint32_t manifest_crc() const { return manifest_crc_; }

  enum class Kind { Param, AdamM, AdamV };
  // The whole global tensor `name` (global shape as ModelConfig gives it, row-major),
  // assembled from every shard that holds part of it. Throws tetra::Error if any element
  // is missing (e.g. a shard file lacks a segment) or the tensor is unknown.
  std::vector<float> tensor(const std::string& name, Kind kind) const;

  // For `tetra ckpt inspect`: a human-readable summary (step, model, layout, files with
  // sizes, tensors with shapes).
  std::string describe() const;

  // "" when every parameter of the model is whole in the checkpoint, else the first one
  // that is not and what is missing.
  std::string coverage_problem() const;
  // "" when every tensor stored more than once (a TP-replicated one saved by each TP rank)
  // holds equal copies, else the first difference. Reads those tensors.
  std::string copies_problem() const;

 private:
  // A segment of `name` in files_[file]: TP-local elements [begin, end) of TP rank tp_rank,
  // which `param` (the saved layout's view of the tensor on that rank) maps to global ones.
  struct Piece {
    size_t file;
    int tp_rank, tp_size;
    int64_t begin, end;
    ParamInfo param;
  };
  // "" when the pieces of `param` (a global view) cover all of it.
  std::string coverage_problem(const ParamInfo& param) const;

  std::string dir_;
  RunState state_;
  uint32_t manifest_crc_ = 0;
  ModelConfig model_;
  std::vector<ParamInfo> params_;    // every parameter of the model, global, in model order
  std::vector<ShardRecord> shards_;  // as the manifest lists them
  std::vector<st::Reader> files_;    // the shard files' headers, in rank order
  std::map<std::string, std::vector<Piece>> pieces_;
};

}  // namespace tetra::ckpt
