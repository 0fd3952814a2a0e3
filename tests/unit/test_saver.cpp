// checkpoint/saver.hpp on one rank: a checkpoint started is written by the writer thread and
// installed only at a later poll, `latest` moving last; a second cannot start while one is
// being saved; a writer's failure is thrown by the poll that finds it, leaving no .tmp.
// (The blocking save() is the same machinery: test_checkpoint.cpp; many ranks and kills:
// test_ckpt_async.cpp and tools/kill_campaign.sh.)
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../support/checkpoint_helpers.hpp"
#include "../support/test_util.hpp"
#include "checkpoint/manifest.hpp"
#include "checkpoint/saver.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

// Polls until the checkpoint is installed (a poll returns it), at most ~10 s.
Saved poll_until_saved(Saver& saver, int* polls) {
  for (*polls = 1; *polls < 10000; ++*polls) {
    if (std::optional<Saved> s = saver.poll()) return *s;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  FAIL("never installed");
  return {};
}

}  // namespace

TEST_CASE("saver: written in the background, installed at a later poll, `latest` last") {
  TempDir tmp;
  const std::string dir = tmp.file("ck");
  const ModelConfig cfg = checkpoint_model();
  const Weights w = make_weights(cfg, 5);
  const RankShard shard = shard_of(cfg, w, 1, 0, 1, 0);
  save_one(dir, 1, 1, 0);  // the line's first checkpoint
  const CheckpointRef first = latest_of(dir);

  Saver saver(MPI_COMM_SELF);
  CHECK_FALSE(saver.busy());
  CHECK_FALSE(saver.poll().has_value());  // nothing to do: no collective, nothing returned
  RunState st = state_at(2, cfg, 1, 1);
  st.parent = first;
  std::atomic<int> landed = 0;
  SaveRequest request{.dir = dir, .state = st, .segments = shard.segments, .keep = 1};
  request.landed = [&] { ++landed; };
  saver.start(std::move(request));
  CHECK(saver.busy());
  // start() only prepared the directory: the checkpoint is not there until a poll installs it.
  CHECK(read_bytes(dir + "/latest") == "step_00000001\n");
  CHECK_FALSE(fs::exists(dir + "/step_00000002/manifest.json"));
  CHECK(error_of([&] {
          saver.start(
              {.dir = dir, .state = state_at(3, cfg, 1, 1), .segments = shard.segments, .keep = 1});
        }).find("started while another is being saved") != std::string::npos);

  int polls = 0;
  const Saved saved = poll_until_saved(saver, &polls);
  CHECK(polls >=
        2);  // the shard's poll hands the installation to the writer; a later one reports it
  CHECK_FALSE(saver.busy());
  CHECK(landed == 1);
  CHECK(saved.step == 2);
  CHECK(saved.path == dir + "/step_00000002");
  CHECK(saved.ref == reference_to(dir, saved.path));
  CHECK(saved.seconds > 0);
  CHECK(saved.stall > 0);
  CHECK(read_bytes(dir + "/latest") == "step_00000002\n");
  CHECK(verify(saved.path) == "");
  check_tensors(Reader(saved.path), cfg, w);
  // --keep 1: the parent was pruned once the new one was installed.
  CHECK(entries(dir) == std::vector<std::string>{"latest", "step_00000002"});
}

TEST_CASE("saver: a writer's failure is thrown by the poll that finds it; no .tmp is left") {
  TempDir tmp;
  const std::string dir = tmp.file("ck");
  const ModelConfig cfg = checkpoint_model();
  save_one(dir, 1, 1, 0);
  const float x = 1.0f;
  Saver saver(MPI_COMM_SELF);
  saver.start({.dir = dir,
               .state = state_at(2, cfg, 1, 1),
               .segments = {{"model.layers.7.mlp.up_proj.weight", 0, 1, 0, 1, &x, &x, &x}},
               .keep = 1});
  std::string err;
  for (int i = 0; i < 10000 && err.empty(); ++i) {
    err = error_of([&] { saver.poll(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(err.find("'model.layers.7.mlp.up_proj.weight' of rank 0") != std::string::npos);
  CHECK_FALSE(saver.busy());
  CHECK(entries(dir) == std::vector<std::string>{"latest", "step_00000001"});
  CHECK(read_bytes(dir + "/latest") == "step_00000001\n");
}
