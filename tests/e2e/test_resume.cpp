// A failure costs time, never correctness and never data: supervised runs killed
// between checkpoints or while writing one end with weights bitwise equal to an
// uninterrupted run; a corrupt checkpoint is named and skipped; a checkpoint resumes at
// another layout; bad checkpoints are refused with one message. Runs the real binary.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"
#include "checkpoint/safetensors.hpp"
#include "util/json.hpp"

using namespace tetra::test;
namespace fs = std::filesystem;

namespace {

const std::string kModel = tetra::test::tiny_model_flags({.layers = 4,
                                                          .dim = 64,
                                                          .heads = 8,
                                                          .kv_heads = 4,
                                                          .ffn_dim = 128,
                                                          .global_batch = 8,
                                                          .steps = 12});

std::string train(int ranks, const std::string& args) {
  return (ranks > 1 ? mpirun(ranks) : std::string()) + tetra_bin() + " train " +
         with_defaults(kModel, args);
}

// Losses by step from a metrics file (the last record of each step wins).
std::map<int, double> losses(const std::string& metrics) {
  std::map<int, double> out;
  std::istringstream in(slurp(metrics));
  const std::regex re(R"("loss":([-0-9.eE+]+).*"step":([0-9]+))");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, re)) out[std::stoi(m[2])] = std::stod(m[1]);
  }
  return out;
}

}  // namespace

TEST_CASE("resume: a run killed between checkpoints ends bitwise equal to an uninterrupted one") {
  struct Case {
    int ranks;
    std::string layout, failure;
  };
  const std::vector<Case> cases = {
      {1, "", "0@6"},
      {2, "--dp 2 --zero 3", "1@6"},
      // bf16: the checkpoint holds the fp32 master; the bf16 copy is rounded from it again.
      {2, "--dp 2 --zero 1 --dtype bf16", "1@6"},
      {2, "--tp 2 --dtype bf16 --zero 3", "0@6"},
      {16, "--tp 2 --cp 2 --pp 2 --dp 2", "13@6"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.layout);
    TempDir d;
    const Spawned clean = spawn(train(c.ranks, c.layout + " --export " + (d / "a.safetensors")));
    REQUIRE(clean.status == 0);
    const Spawned sup = spawn(tetra_bin() + " launch --restarts 2 -- " +
                              train(c.ranks, c.layout + " --ckpt-dir " + (d / "ck") +
                                                 " --ckpt-every 4 --inject-failure " + c.failure +
                                                 " --export " + (d / "b.safetensors")));
    CAPTURE(sup.err);
    CHECK(sup.status == 0);
    CHECK(sup.out.find("2 attempts") != std::string::npos);
    CHECK(sup.out.find("resumed from " + (d / "ck/step_00000004")) != std::string::npos);
    CHECK(sup.out.find("2 steps lost, 12 kept") != std::string::npos);
    const std::string a = slurp(d / "a.safetensors"), b = slurp(d / "b.safetensors");
    CHECK(!a.empty());
    CHECK(a == b);
  }
}

TEST_CASE("resume: a kill while writing a checkpoint leaves it unused; the run ends identical") {
  TempDir d;
  const std::string layout = "--dp 2 --zero 2";
  REQUIRE(spawn(train(2, layout + " --export " + (d / "a.safetensors"))).status == 0);
  // Rank 1 dies after writing its shard of the step-8 checkpoint.
  const Spawned first = spawn(
      train(2, layout + " --ckpt-dir " + (d / "ck") + " --ckpt-every 4 --inject-failure 1@5:ckpt"));
  CHECK(first.status != 0);
  CHECK(fs::exists(d / "ck/step_00000004/manifest.json"));
  CHECK(!fs::exists(d / "ck/step_00000008"));
  CHECK(slurp(d / "ck/latest") == "step_00000004\n");
  const Spawned second =
      spawn("TETRA_RESTART=1 " +
            train(2, layout + " --ckpt-dir " + (d / "ck") +
                         " --ckpt-every 4 --resume auto --export " + (d / "b.safetensors")));
  CHECK(second.status == 0);
  CHECK(second.out.find("resumed from " + (d / "ck/step_00000004")) != std::string::npos);
  CHECK(slurp(d / "a.safetensors") == slurp(d / "b.safetensors"));
  CHECK(fs::exists(d / "ck/step_00000008/manifest.json"));
  CHECK(!fs::exists(d / "ck/step_00000008.tmp"));
}

TEST_CASE("resume: a flipped byte is named by verify and skipped by --resume auto") {
  TempDir d;
  REQUIRE(spawn(train(2, "--dp 2 --steps 8 --ckpt-dir " + (d / "ck") + " --ckpt-every 4")).status ==
          0);
  const std::string shard = d / "ck/step_00000008/rank_00001.safetensors";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-100, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    f.seekp(-100, std::ios::end);
    c ^= 0x10;
    f.write(&c, 1);
  }
  const Spawned verify = spawn(tetra_bin() + " ckpt verify " + (d / "ck/step_00000008"));
  CHECK(verify.status == 2);
  CHECK(verify.err.find("rank_00001.safetensors") != std::string::npos);
  CHECK(spawn(tetra_bin() + " ckpt verify " + (d / "ck/step_00000004")).status == 0);
  const Spawned resumed = spawn(train(
      2, "--dp 2 --steps 9 --allow-change steps --ckpt-dir " + (d / "ck") + " --resume auto"));
  CHECK(resumed.status == 0);
  CHECK(resumed.err.find("skipping " + (d / "ck/step_00000008")) != std::string::npos);
  CHECK(resumed.out.find("resumed from " + (d / "ck/step_00000004")) != std::string::npos);
}

namespace {

// A layout to resume at: its ranks and flags.
struct RunAt {
  int ranks;
  std::string flags;
};

// Trains 12 steps at `ranks` x `flags` with a checkpoint at step 6, then resumes that checkpoint
// at each of `others` (with `common` flags too): each must start at step 6 with the saved run's
// loss there.
void check_resumes_at(const RunAt& saved, const std::vector<RunAt>& others,
                      const std::string& common = "") {
  TempDir d;
  REQUIRE(spawn(train(saved.ranks, saved.flags + common + " --ckpt-dir " + (d / "ck") +
                                       " --ckpt-every 6 --metrics " + (d / "a.jsonl")))
              .status == 0);
  const auto reference = losses(d / "a.jsonl");
  REQUIRE(reference.count(6) == 1);
  for (const RunAt& c : others) {
    CAPTURE(c.flags);
    const std::string metrics = d / "b.jsonl";
    fs::remove(metrics);
    const Spawned r = spawn(train(c.ranks, c.flags + common + " --steps 12 --resume " +
                                               (d / "ck/step_00000006") + " --metrics " + metrics));
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    const auto after = losses(metrics);
    REQUIRE(after.count(6) == 1);
    CHECK(after.count(5) == 0);  // it started at step 6
    CHECK(std::abs(after.at(6) - reference.at(6)) <= 1e-5 * std::abs(reference.at(6)));
  }
}

}  // namespace

TEST_CASE("resume: a checkpoint resumes at other layouts with the same next loss") {
  check_resumes_at({16, "--tp 2 --cp 2 --pp 2 --dp 2 --zero 3"},
                   {{1, ""},
                    {4, "--tp 4 --zero 1"},
                    {4, "--pp 2 --vpp 2 --dp 2 --zero 2 --micro-batch 1"},
                    {4, "--pp 2 --schedule zb-v --dp 2 --zero 3"},
                    {8, "--cp 4 --dp 2"}});
}

// The other way: a checkpoint of a V-placed run (zb-v: rank 0 holds the embedding and the head,
// tied to one matrix, with no copy) resumes at looped layouts, where the last stage holds a copy
// of the matrix, and at one rank, with the same next loss.
TEST_CASE("resume: a zb-v run's checkpoint resumes at looped layouts with the same next loss") {
  check_resumes_at(
      {4, "--pp 2 --schedule zb-v --dp 2 --zero 2"},
      {{1, ""}, {2, "--pp 2 --micro-batch 1"}, {4, "--tp 2 --pp 2 --schedule zb-h1 --zero 3"}},
      " --tie-embeddings");
}

TEST_CASE("resume: bad checkpoints get one message, and nothing existing is overwritten") {
  TempDir d;
  REQUIRE(spawn(train(2, "--dp 2 --steps 4 --ckpt-dir " + (d / "ck") + " --ckpt-every 4")).status ==
          0);
  const std::string ck = d / "ck/step_00000004";
  const std::string before = slurp(ck + "/manifest.json");
  auto expect_error = [&](const std::string& command, const std::string& message) {
    CAPTURE(command);
    const Spawned r = spawn(command, 60);
    CAPTURE(r.err);
    CHECK(r.status != 0);
    CHECK(r.status != 124);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(r.err.find(message) != std::string::npos);
  };
  // Another model shape.
  expect_error(train(2, "--dp 2 --dim 32 --heads 4 --kv-heads 2 --resume " + ck), "another model");
  expect_error(train(1, "--layers 2 --ckpt-dir " + (d / "ck")), "another model");
  // A read-only place for checkpoints (a path under a regular file).
  expect_error(train(2, "--dp 2 --ckpt-dir " + (d / "ck/latest/sub") + " --ckpt-every 2"),
               "checkpoint directory");
  CHECK(slurp(ck + "/manifest.json") == before);
  // A missing shard, then an unreadable manifest.
  fs::copy(ck, d / "broken", fs::copy_options::recursive);
  fs::remove(d / "broken/rank_00001.safetensors");
  expect_error(train(2, "--dp 2 --resume " + (d / "broken")), "rank_00001.safetensors");
  std::ofstream(d / "broken/manifest.json") << "{ not json";
  expect_error(train(2, "--dp 2 --resume " + (d / "broken")), "manifest.json");
  expect_error(tetra_bin() + " ckpt verify " + (d / "broken"), "manifest.json");
  CHECK(slurp(ck + "/manifest.json") == before);
}

TEST_CASE("resume: a rank that stops answering ends the job through the watchdog") {
  const Spawned r = spawn(train(4, "--dp 2 --pp 2 --inject-failure 3@3:hang --timeout 5"), 60);
  CAPTURE(r.err);
  CHECK(r.status != 0);
  CHECK(r.status != 124);
  CHECK(r.seconds < 5 + 10);
  CHECK(count(r.err, "tetra: error: watchdog:") == 1);
  CHECK(r.err.find("did not arrive") != std::string::npos);
  CHECK(std::regex_search(r.err, std::regex("(rank|ranks that did not arrive:) .*3")));
}

TEST_CASE("resume: a run with nothing left to train prunes behind its last checkpoint") {
  // A kill between installing the last checkpoint and pruning behind it (a kill campaign under
  // tetra launch once left three with --keep 2): here, all four kept (--keep 5), then --keep 2.
  TempDir d;
  const std::string ck = " --ckpt-dir " + (d / "ck");
  REQUIRE(spawn(train(1, "--steps 4 --ckpt-every 1 --keep 5" + ck)).status == 0);
  REQUIRE(fs::exists(d / "ck/step_00000001"));
  const Spawned r = spawn(train(1, "--steps 4 --ckpt-every 1 --keep 2 --resume auto" + ck));
  CAPTURE(r.err);
  CHECK(r.status == 0);
  CHECK(r.out.find("nothing to train") != std::string::npos);
  CHECK(!fs::exists(d / "ck/step_00000001"));
  CHECK(!fs::exists(d / "ck/step_00000002"));
  CHECK(fs::exists(d / "ck/step_00000003/manifest.json"));
  CHECK(fs::exists(d / "ck/step_00000004/manifest.json"));
  CHECK(slurp(d / "ck/latest") == "step_00000004\n");
  // Resumed from a checkpoint of another directory, it deletes nothing there.
  const Spawned other = spawn(train(
      1, "--steps 4 --keep 1 --ckpt-dir " + (d / "ck2") + " --resume " + (d / "ck/step_00000004")));
  CAPTURE(other.err);
  CHECK(other.status == 0);
  CHECK(fs::exists(d / "ck/step_00000003/manifest.json"));
}

TEST_CASE("resume: after resuming from an earlier checkpoint, auto follows `latest`") {
  TempDir d;
  const std::string ck = " --ckpt-dir " + (d / "ck");
  REQUIRE(spawn(train(1, "--steps 6 --ckpt-every 2" + ck)).status == 0);
  // Go back to step 2 and train a new line of checkpoints up to step 4.
  REQUIRE(spawn(train(1, "--steps 4 --allow-change steps --ckpt-every 1 --keep 2 --resume " +
                             (d / "ck/step_00000002") + ck))
              .status == 0);
  CHECK(slurp(d / "ck/latest") == "step_00000004\n");
  CHECK(fs::exists(d / "ck/step_00000003"));                // kept: the newest two of this line
  CHECK(!fs::exists(d / "ck/step_00000002"));               // pruned
  CHECK(fs::exists(d / "ck/step_00000006/manifest.json"));  // the abandoned line is left alone
  const Spawned r = spawn(train(1, "--steps 8 --allow-change steps" + ck));
  CHECK(r.status == 0);
  CHECK(r.out.find("resumed from " + (d / "ck/step_00000004")) != std::string::npos);
}

TEST_CASE("resume: when nothing verifies, auto refuses; --keep never prunes what does not verify") {
  TempDir d;
  const std::string ck = d / "ck";
  REQUIRE(spawn(train(1, "--steps 2 --ckpt-dir " + ck + " --ckpt-every 1 --keep 5")).status == 0);
  // Flip a byte in every checkpoint's shard.
  for (const std::string step : {"step_00000001", "step_00000002"}) {
    std::fstream f(ck + "/" + step + "/rank_00000.safetensors",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-100, std::ios::end);
    f.put('\x55');
  }
  const Spawned refused = spawn(train(1, "--steps 4 --ckpt-dir " + ck + " --resume auto"));
  CHECK(refused.status == 2);
  CHECK(count(refused.err, "tetra: error:") == 1);
  CHECK(count(refused.err, "no checkpoint in '" + ck + "' verifies") == 1);
  CHECK(count(refused.err, ck + "/step_00000001") > 0);  // each one named, with its problem
  CHECK(count(refused.err, ck + "/step_00000002") > 0);
  CHECK(count(refused.err, "--resume never") == 1);
  CHECK(count(refused.out, "step ") == 0);

  // Starting over on purpose writes steps 1 to 4; the corrupt checkpoints of steps 1 and 2
  // are moved aside, whole, not replaced. Then corrupt the new step 2 and write up to 6
  // with --keep 1: pruning deletes the valid 3 to 5 and leaves the corrupt 2.
  const std::string first = slurp(ck + "/step_00000001/rank_00000.safetensors");
  const Spawned over =
      spawn(train(1, "--steps 4 --ckpt-dir " + ck + " --ckpt-every 1 --resume never"));
  REQUIRE(over.status == 0);
  CHECK(count(over.err, "tetra: warning: moved '" + ck + "/step_0000000") == 2);
  CHECK(slurp(ck + "/step_00000001.abandoned/rank_00000.safetensors") == first);
  CHECK(fs::exists(ck + "/step_00000002.abandoned/manifest.json"));
  {
    std::fstream f(ck + "/step_00000002/rank_00000.safetensors",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-100, std::ios::end);
    f.put('\x55');
  }
  const Spawned more = spawn(train(1, "--steps 6 --allow-change steps --ckpt-dir " + ck +
                                          " --ckpt-every 1 --keep 1 --resume auto"));
  CHECK(more.status == 0);
  CHECK(fs::exists(ck + "/step_00000002"));
  CHECK_FALSE(fs::exists(ck + "/step_00000003"));
  CHECK_FALSE(fs::exists(ck + "/step_00000005"));
  CHECK(fs::exists(ck + "/step_00000006"));
}

TEST_CASE("resume: a supervised restart after a rollback continues the rollback's line") {
  TempDir d;
  const std::string ck = d / "ck", flags = " --steps 6 --ckpt-every 2 --ckpt-dir " + ck;
  REQUIRE(spawn(train(1, flags + " --export " + (d / "a.st"))).status == 0);
  // Back to step 2; the first attempt dies at step 3, before a checkpoint of the new line.
  const Spawned sup = spawn(tetra_bin() + " launch --restarts 1 -- " +
                            train(1, flags + " --resume " + ck + "/step_00000002" +
                                         " --inject-failure 0@3 --export " + (d / "b.st")));
  CAPTURE(sup.err);
  CHECK(sup.status == 0);
  CHECK(count(sup.out, "resumed from " + ck + "/step_00000002 ") == 2);
  CHECK(sup.out.find("1 step lost, 4 kept") != std::string::npos);
  CHECK(slurp(d / "a.st") == slurp(d / "b.st"));
  CHECK(slurp(ck + "/latest") == "step_00000006\n");
  CHECK(slurp(ck + "/step_00000004/manifest.json").find("\"name\": \"step_00000002\"") !=
        std::string::npos);
  CHECK(slurp(ck + "/step_00000006/manifest.json").find("\"name\": \"step_00000004\"") !=
        std::string::npos);
}

TEST_CASE("resume: past a corrupt checkpoint, auto falls back on its own line, not a newer one") {
  TempDir d;
  const std::string ck = d / "ck";
  REQUIRE(spawn(train(1, "--steps 6 --ckpt-every 2 --keep 5 --ckpt-dir " + ck)).status == 0);
  // A rollback to 2 writes 3 and 4 (its own) and dies; 6 is left from the abandoned line.
  const Spawned rollback =
      spawn(train(1, "--steps 6 --ckpt-every 1 --keep 5 --ckpt-dir " + ck + " --resume " + ck +
                         "/step_00000002 --inject-failure 0@4"));
  CHECK(rollback.status != 0);
  CHECK(slurp(ck + "/latest") == "step_00000004\n");
  REQUIRE(fs::exists(ck + "/step_00000006/manifest.json"));
  {
    std::fstream f(ck + "/step_00000004/rank_00000.safetensors",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-100, std::ios::end);
    f.put('\x55');
  }
  const Spawned r = spawn(train(1, "--steps 6 --ckpt-every 1 --keep 5 --ckpt-dir " + ck));
  CAPTURE(r.err);
  CHECK(r.status == 0);
  CHECK(r.err.find("skipping " + ck + "/step_00000004: ") != std::string::npos);
  CHECK(r.out.find("resumed from " + ck + "/step_00000003 ") != std::string::npos);

  // A run that starts over has no checkpoint until its first: until then `latest` says so,
  // and a restart starts over too rather than continue an older line.
  const Spawned over = spawn(train(
      1, "--steps 6 --ckpt-every 4 --ckpt-dir " + ck + " --resume never --inject-failure 0@1"));
  CHECK(over.status != 0);
  CHECK(slurp(ck + "/latest") == "none\n");
  const Spawned again = spawn(train(1, "--steps 6 --ckpt-every 4 --ckpt-dir " + ck));
  CHECK(again.status == 0);
  CHECK(again.out.find("resumed from") == std::string::npos);
  CHECK(slurp(ck + "/latest") == "step_00000006\n");
}

TEST_CASE("resume: an edited manifest is refused; TP-replicated tensors are stored once") {
  TempDir d;
  const std::string ck = d / "ck";
  REQUIRE(spawn(train(2, "--tp 2 --steps 4 --ckpt-every 2 --ckpt-dir " + ck)).status == 0);
  auto has_norms = [&](int rank) {
    const tetra::st::Reader shard(ck + "/step_00000004/rank_0000" + std::to_string(rank) +
                                  ".safetensors");
    return shard.metadata().at("segments").find("norm.weight") != std::string::npos;
  };
  CHECK(has_norms(0));
  CHECK_FALSE(has_norms(1));

  const std::string manifest = ck + "/step_00000004/manifest.json";
  tetra::json m;
  REQUIRE(tetra::parse_json(slurp(manifest), m).empty());
  m["step"] = 5;
  std::ofstream(manifest, std::ios::trunc) << m.dump(2);
  const Spawned verify = spawn(tetra_bin() + " ckpt verify " + ck + "/step_00000004");
  CHECK(verify.status == 2);
  CHECK(verify.err.find("manifest.json': its checksum") != std::string::npos);
  const Spawned r = spawn(train(2, "--tp 2 --steps 4 --ckpt-dir " + ck));
  CAPTURE(r.err);
  CHECK(r.status == 0);
  CHECK(r.err.find("skipping " + ck + "/step_00000004: ") != std::string::npos);
  CHECK(r.out.find("resumed from " + ck + "/step_00000002 ") != std::string::npos);

  // A checkpoint without its manifest is named as one, with what it lacks.
  fs::remove(ck + "/step_00000002/manifest.json");
  const Spawned lost = spawn(tetra_bin() + " ckpt verify " + ck + "/step_00000002/");
  CHECK(lost.status == 2);
  CHECK(count(lost.err, "tetra: error:") == 1);
  CHECK(lost.err.find("step_00000002/manifest.json': not found") != std::string::npos);
}
