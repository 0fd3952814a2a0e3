// Checkpoints written in the background (--ckpt-async) with the real binary: they hold the
// state of their own step, tensor for tensor what a blocking save writes, although training
// changed the weights while they were written; a kill during the background write leaves the
// previous checkpoint the one `latest` names; pre-emption waits for the write; the stall is
// printed. (tools/kill_campaign.sh kills such runs at random times: ctest's kill_campaign.)
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"
#include "checkpoint/checkpoint.hpp"
#include "model/config.hpp"

using namespace tetra::test;
namespace fs = std::filesystem;

namespace {

const std::string kModel = tetra::test::tiny_model_flags({.layers = 2, .steps = 8});

std::string train(int ranks, const std::string& args) {
  return (ranks > 1 ? mpirun(ranks) : std::string()) + tetra_bin() + " train " +
         with_defaults(kModel, args);
}

}  // namespace

TEST_CASE("ckpt async: each checkpoint holds its step's state, as a blocking save's does") {
  // Each rank copies its own shards: ZeRO-2's optimizer shards, ZeRO-3's weight shards (bf16
  // compute, fp32 masters), CP's replicated weights (one writer), and the pipeline's stages
  // (zb-h1's and zb-v's last W passes end before the copy; zb-v's rank 0 holds both ends of the
  // model).
  for (const std::string shape : {"--dp 2 --zero 2", "--dp 2 --zero 3 --dtype bf16", "--cp 2",
                                  "--pp 2 --schedule zb-h1", "--pp 2 --schedule zb-v --layers 4"}) {
    CAPTURE(shape);
    TempDir d;
    const std::string layout = shape + " --ckpt-every 2 --keep 4";
    const Spawned sync = spawn(
        train(2, layout + " --ckpt-dir " + (d / "sync") + " --export " + (d / "a.safetensors")));
    REQUIRE(sync.status == 0);
    const Spawned async = spawn(train(2, layout + " --ckpt-async --ckpt-dir " + (d / "async") +
                                             " --export " + (d / "b.safetensors")));
    CAPTURE(async.err);
    REQUIRE(async.status == 0);
    CHECK(slurp(d / "a.safetensors") == slurp(d / "b.safetensors"));
    CHECK(slurp(d / "async/latest") == "step_00000008\n");
    const std::regex line(
        R"(checkpoint: step (\d+) saved to \S+ in [0-9.]+ s \(stall [0-9.]+ s\))");
    for (const Spawned* run : {&sync, &async}) {
      std::string steps;
      for (auto it = std::sregex_iterator(run->out.begin(), run->out.end(), line);
           it != std::sregex_iterator(); ++it)
        steps += (*it)[1].str() + " ";
      CHECK(steps == "2 4 6 8 ");
    }
    for (const char* step : {"step_00000002", "step_00000004", "step_00000006", "step_00000008"}) {
      CAPTURE(step);
      const std::string a = d / ("sync/" + std::string(step)),
                        b = d / ("async/" + std::string(step));
      REQUIRE(tetra::ckpt::verify(b) == "");
      const tetra::ckpt::Reader ra(a), rb(b);
      CHECK(rb.state().parent.name == ra.state().parent.name);
      const tetra::ModelConfig m = tetra::ckpt::model_from_json(ra.state().model, "test");
      for (const tetra::UnitSpec& u : tetra::make_units(m, 1, 0)) {
        for (const tetra::ParamInfo& p : u.params) {
          CAPTURE(p.name);
          using K = tetra::ckpt::Reader::Kind;
          for (K k : {K::Param, K::AdamM, K::AdamV})
            CHECK(ra.tensor(p.name, k) == rb.tensor(p.name, k));
        }
      }
    }
  }
}

TEST_CASE("ckpt async: a kill during the background write leaves the previous checkpoint") {
  TempDir d;
  for (const std::string layout : {"--dp 2 --zero 2", "--dp 2 --zero 1 --dtype bf16", "--cp 2",
                                   "--pp 2 --schedule zb-v --layers 4 --dtype bf16"}) {
    CAPTURE(layout);
    const std::string ck = d / "ck";
    fs::remove_all(ck);
    REQUIRE(spawn(train(2, layout + " --export " + (d / "a.safetensors"))).status == 0);
    // Rank 1 dies once its shard of the step-6 checkpoint is written, training going on.
    const std::string flags = layout + " --ckpt-async --ckpt-dir " + ck + " --ckpt-every 3";
    const Spawned first = spawn(train(2, flags + " --inject-failure 1@4:ckpt"));
    CHECK(first.status != 0);
    CHECK(slurp(ck + "/latest") == "step_00000003\n");
    CHECK(tetra::ckpt::verify(ck + "/step_00000003") == "");
    CHECK(!fs::exists(ck + "/step_00000006/manifest.json"));
    const Spawned second =
        spawn("TETRA_RESTART=1 " + train(2, flags + " --export " + (d / "b.safetensors")));
    CAPTURE(second.err);
    CHECK(second.status == 0);
    CHECK(second.out.find("resumed from " + ck + "/step_00000003 at step 3") != std::string::npos);
    CHECK(slurp(d / "a.safetensors") == slurp(d / "b.safetensors"));
    CHECK(!fs::exists(ck + "/step_00000006.tmp"));
  }
}

TEST_CASE("ckpt async: pre-emption waits for the write; --ckpt-async needs --ckpt-dir") {
  TempDir d;
  const Spawned r = spawn(
      train(2, "--tp 2 --ckpt-async --ckpt-dir " + (d / "ck") + " --inject-failure 1@2:preempt"));
  CAPTURE(r.err);
  CHECK(r.status == 75);
  CHECK(r.out.find("checkpoint: step 3 saved") != std::string::npos);
  CHECK(slurp(d / "ck/latest") == "step_00000003\n");
  CHECK(tetra::ckpt::verify(d / "ck/step_00000003") == "");
  CHECK_FALSE(fs::exists(d / "ck/lock"));

  const Spawned bad = spawn(train(1, "--ckpt-async"));
  CHECK(bad.status == 2);
  CHECK(count(bad.err, "tetra: error:") == 1);
  CHECK(bad.err.find("--ckpt-async needs --ckpt-dir") != std::string::npos);
}
