// Saving a checkpoint while training goes on (--ckpt-async), with the blocking save() as the
// case that waits at once: one code path for both.
//
// start() is the only part that stops the calling thread: rank 0 prepares step_X.tmp/ (agreed
// by every rank, as save() always did), then each rank's writer thread writes its shard file
// from memory the caller copied its state into and keeps unchanged until the checkpoint is
// installed. The writers make no MPI call: all communication stays on the calling thread, so
// MPI needs no thread support beyond MPI_THREAD_SINGLE's and no extra communicator. At each step
// boundary poll() asks every rank, in one small all-reduce, whether its writer is done; once
// all are, the shards' sizes and checksums are gathered to rank 0, whose writer installs the
// checkpoint (manifest, rename, `latest`, pruning: finish_write, unchanged), and a later poll
// reports it installed. The ranks already meet at every step boundary (the step's totals are
// all-reduced), so the poll adds one latency-bound all-reduce of a few words, never a wait
// for the disk. A kill at any point before `latest` moves leaves the previous checkpoint the
// one `latest` names, as with the blocking save.
#pragma once
#include <mpi.h>

#include <exception>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "util/clock.hpp"

namespace tetra::ckpt {

// One checkpoint to save: save()'s arguments. The segments' memory must stay unchanged until
// the checkpoint is installed (poll() or wait() returns it) or the save fails.
struct SaveRequest {
  std::string dir;
  RunState state;
  std::vector<Segment> segments;
  int keep = 0;
  int raise_after_shard = 0;         // save()'s; raised by the writer thread
  // Rank 0's writer thread calls it before installing (save()'s); may be null.
  std::function<void()> still_ours = nullptr;
  // Called by the writer thread before it reads the segments: waits for a copy into them that
  // is still under way (a GPU's copy stream: Backend::copies_landed); may be null.
  std::function<void()> landed = nullptr;
  Clock::time_point began = Clock::now();  // when the caller started its copy: the stall's start
};

// A checkpoint installed.
struct Saved {
  int64_t step = 0;
  std::string path;    // dir/step_<8 digits>
  CheckpointRef ref;   // what the next checkpoint of the line names as its parent
  double seconds = 0;  // from the request's `began` to its installation (rank 0's clock)
  // The longest time any rank's calling thread spent on it: its copy, start(), the polls and
  // any wait for it; all of it for a blocking save.
  double stall = 0;
};

class Saver {
 public:
  explicit Saver(MPI_Comm world);
  // Waits for this rank's writer thread; a checkpoint not installed stays a .tmp directory,
  // which the next begin_write of its step removes.
  ~Saver();
  Saver(const Saver&) = delete;
  Saver& operator=(const Saver&) = delete;

  // Collective; needs !busy(). Prepares the .tmp directory (throws tetra::Error on every rank,
  // the same message, if any rank fails) and starts this rank's writer.
  void start(SaveRequest request);
  // Whether a checkpoint is being saved (the same on every rank).
  bool busy() const { return phase_ != Phase::Idle; }
  // Collective where busy(); at a step boundary. The checkpoint started, once every rank has
  // written its shard and rank 0 has installed it; nullopt before (or when none is busy).
  // Throws tetra::Error on every rank (the same message) once every writer has stopped, if
  // any failed, leaving the earlier checkpoints and `latest` as they were.
  std::optional<Saved> poll() { return advance(false); }
  // Collective; needs busy(). poll() until it returns the checkpoint.
  Saved wait();

 private:
  enum class Phase { Idle, Writing, Installing };
  std::optional<Saved> advance(bool block);
  // Whether this rank's writer still runs (block: waits for it); once it has stopped, its
  // exception, if any, is kept in failure_.
  bool writer_running(bool block);

  MPI_Comm world_;
  int rank_ = 0, size_ = 1;
  Phase phase_ = Phase::Idle;
  SaveRequest request_;
  std::future<void> writer_;  // this rank's shard (Writing); rank 0's installation (Installing)
  std::exception_ptr failure_;
  ShardRecord shard_;           // this rank's, once written
  uint32_t manifest_crc_ = 0;   // rank 0's, once installed
  double installed_after_ = 0;  // rank 0's: seconds from `began` to the installation
  double stall_ = 0;            // this rank's so far
};

}  // namespace tetra::ckpt
