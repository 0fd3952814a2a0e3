// A checkpoint across the ranks: start() on the calling thread, the files by a writer thread,
// the agreement that every shard is written at the calling thread's step boundaries.
#include "checkpoint/saver.hpp"

#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>

#include "checkpoint/manifest.hpp"
#include "parallel/agree.hpp"
#include "util/error.hpp"

namespace tetra::ckpt {

namespace fs = std::filesystem;

Saver::Saver(MPI_Comm world) : world_(world) {
  MPI_Comm_rank(world, &rank_);
  MPI_Comm_size(world, &size_);
}

Saver::~Saver() {
  if (writer_.valid()) writer_.wait();
}

void Saver::start(SaveRequest request) {
  check(phase_ == Phase::Idle, "checkpoint of step ", request.state.step,
        " started while another is being saved");
  request_ = std::move(request);
  const SaveRequest& r = request_;
  try {
    agree(world_, [&] {
      model_from_json(r.state.model, "checkpoint state");
      if (rank_ == 0 && r.still_ours) r.still_ours();
      if (rank_ == 0) begin_write(r.dir, r.state.step);
    });
  } catch (const Error&) {
    // Leave no half-made directory behind; earlier checkpoints were never touched.
    std::error_code ec;
    if (rank_ == 0) fs::remove_all(tmp_dir_of(r.dir, r.state.step), ec);
    throw;
  }
  failure_ = nullptr;
  phase_ = Phase::Writing;
  writer_ = std::async(std::launch::async, [this] {
    const SaveRequest& q = request_;
    if (q.landed) q.landed();
    shard_ = write_shard(tmp_dir_of(q.dir, q.state.step), rank_, size_, q.state, q.segments);
    if (q.raise_after_shard != 0) ::raise(q.raise_after_shard);
  });
  stall_ = seconds_since(r.began);
}

bool Saver::writer_running(bool block) {
  if (!writer_.valid()) return false;
  if (block) writer_.wait();
  if (writer_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return true;
  try {
    writer_.get();
  } catch (...) {
    failure_ = std::current_exception();
  }
  return false;
}

Saved Saver::wait() {
  check(busy(), "no checkpoint is being saved");
  for (;;) {
    if (std::optional<Saved> saved = advance(true)) return *saved;
  }
}

std::optional<Saved> Saver::advance(bool block) {
  if (phase_ == Phase::Idle) return std::nullopt;
  const Clock::time_point t0 = Clock::now();
  const bool running = writer_running(block);
  const bool installed = phase_ == Phase::Installing && !running && !failure_;
  // Maxima over the ranks: whether a writer runs, whether one failed, rank 0's manifest
  // checksum and installation time (zero elsewhere), the stall in microseconds.
  uint64_t v[5] = {running, failure_ != nullptr, rank_ == 0 && installed ? manifest_crc_ : 0,
                   rank_ == 0 && installed ? uint64_t(installed_after_ * 1e6) : 0,
                   uint64_t((stall_ + seconds_since(t0)) * 1e6)};
  MPI_Allreduce(MPI_IN_PLACE, v, 5, MPI_UINT64_T, MPI_MAX, world_);
  stall_ += seconds_since(t0);
  if (v[0] != 0) return std::nullopt;
  const SaveRequest& r = request_;
  if (v[1] != 0) {
    // Every writer has stopped, so the .tmp directory can go: nothing writes into it.
    phase_ = Phase::Idle;
    std::error_code ec;
    if (rank_ == 0) fs::remove_all(tmp_dir_of(r.dir, r.state.step), ec);
    agree(world_, [&] {
      if (failure_) std::rethrow_exception(failure_);
    });
  }
  if (phase_ == Phase::Writing) {
    const Clock::time_point t1 = Clock::now();
    // Fixed-size records: file names follow from the ranks.
    const uint64_t record[2] = {shard_.bytes, shard_.crc32c};
    std::vector<uint64_t> all(rank_ == 0 ? 2 * size_t(size_) : 0);
    MPI_Gather(record, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, 0, world_);
    phase_ = Phase::Installing;
    if (rank_ == 0) {
      std::vector<ShardRecord> shards;
      for (int k = 0; k < size_; ++k)
        shards.push_back(
            {shard_file_name(k), all[2 * size_t(k)], uint32_t(all[2 * size_t(k) + 1])});
      writer_ = std::async(std::launch::async, [this, shards = std::move(shards)] {
        const SaveRequest& q = request_;
        const std::string path = finish_write(q.dir, q.state, shards, q.keep, q.still_ours);
        manifest_crc_ = reference_to(q.dir, path).manifest_crc;
        installed_after_ = seconds_since(q.began);
      });
    }
    stall_ += seconds_since(t1);
    return std::nullopt;
  }
  phase_ = Phase::Idle;
  const std::string name = step_dir_name(r.state.step);
  return Saved{r.state.step,
               (fs::path(r.dir) / name).string(),
               {name, uint32_t(v[2])},
               double(v[3]) / 1e6,
               double(v[4]) / 1e6};
}

std::string save(MPI_Comm world, const std::string& dir, const RunState& state,
                 const std::vector<Segment>& segments, int keep, int raise_after_shard,
                 const std::function<void()>& still_ours) {
  Saver saver(world);
  saver.start({.dir = dir,
               .state = state,
               .segments = segments,
               .keep = keep,
               .raise_after_shard = raise_after_shard,
               .still_ours = still_ours});
  return saver.wait().path;
}

}  // namespace tetra::ckpt
