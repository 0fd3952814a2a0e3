// What a run may continue and where it may write, with the real binary: a resumed run must
// have the checkpoint's settings unless --allow-change names the ones that differ; a
// finished run says so and trains nothing; --ckpt-dir alone still checkpoints the end; two
// jobs never share a checkpoint directory, but a restart of one job takes its lock over.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"
#include "checkpoint/checksum.hpp"
#include "util/json.hpp"

using namespace tetra::test;
namespace fs = std::filesystem;

namespace {

const std::string kModel = tetra::test::tiny_model_flags({.steps = 4});

std::string train(const std::string& args) {
  return tetra_bin() + " train " + with_defaults(kModel, args);
}

}  // namespace

TEST_CASE("guards: --ckpt-dir alone checkpoints the last step") {
  TempDir d;
  const Spawned r = spawn(train("--ckpt-dir " + (d / "ck")));
  CHECK(r.status == 0);
  CHECK(fs::exists(d / "ck/step_00000004/manifest.json"));
  CHECK_FALSE(fs::exists(d / "ck/step_00000002"));
  CHECK(slurp(d / "ck/latest") == "step_00000004\n");
  CHECK_FALSE(fs::exists(d / "ck/lock"));  // released at the end
}

TEST_CASE("guards: a resumed run keeps the checkpoint's settings unless told otherwise") {
  TempDir d;
  const std::string ck = " --ckpt-dir " + (d / "ck");
  REQUIRE(spawn(train(ck + " --ckpt-every 2 --export " + (d / "a.st"))).status == 0);
  std::ofstream(d / "text.txt") << std::string(2000, 'x');
  struct Case {
    std::string flags, name, what;
  };
  const std::vector<Case> cases = {
      {"--data " + (d / "text.txt"), "data", "--data \"synthetic\" there, \""},
      {"--lr 0.001", "lr", "--lr 0.003 there, 0.001 here"},
      {"--min-lr 0.0001", "min-lr", "--min-lr "},
      {"--warmup 3", "warmup", "--warmup 10 there, 3 here"},
      {"--steps 6", "steps", "--steps 4 there, 6 here"},
      {"--clip 0.5", "clip", "--clip 1.0 there, 0.5 here"},
      {"--weight-decay 0.01", "weight-decay", "--weight-decay 0.1 there, 0.01 here"},
      {"--dtype bf16", "dtype", "--dtype \"fp32\" there, \"bf16\" here"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.flags);
    const Spawned r = spawn(train(c.flags + ck + " --export " + (d / "x.st")));
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(r.err.find("comes from a run with other settings (" + c.what) != std::string::npos);
    CHECK(r.err.find("pass --allow-change " + c.name + " to continue") != std::string::npos);
    CHECK(count(r.out, "step ") == 0);
    CHECK_FALSE(fs::exists(d / "x.st"));
    CHECK_FALSE(fs::exists(d / "ck/lock"));
  }
  const Spawned two = spawn(train("--lr 0.002 --clip 2" + ck));
  CHECK(two.status == 2);
  CHECK(two.err.find("(--lr 0.003 there, 0.002 here; --clip 1.0 there, 2.0 here); pass "
                     "--allow-change lr,clip to") != std::string::npos);

  // Finished: said, nothing trained, and the export is the checkpoint's final weights.
  const Spawned done = spawn(train(ck + " --export " + (d / "b.st")));
  CAPTURE(done.err);
  CHECK(done.status == 0);
  CHECK(done.out.find("run finished: " + (d / "ck/step_00000004") +
                      " is at step 4, the last of --steps 4; nothing to train") !=
        std::string::npos);
  CHECK(done.out.find("summary") == std::string::npos);
  CHECK(done.out.find("loss") == std::string::npos);
  CHECK(slurp(d / "a.st") == slurp(d / "b.st"));
  // Fewer steps than the checkpoint holds: refused, whatever is allowed.
  const Spawned past =
      spawn(train("--steps 2 --allow-change steps" + ck + " --export " + (d / "c.st")));
  CHECK(past.status == 2);
  CHECK(count(past.err, "tetra: error:") == 1);
  CHECK(past.err.find("is at step 4, past --steps 2") != std::string::npos);
  CHECK_FALSE(fs::exists(d / "c.st"));
  CHECK(slurp(d / "ck/latest") == "step_00000004\n");

  // Allowed: extending the run with a new peak LR (whose default --min-lr follows it).
  const Spawned more = spawn(train("--steps 6 --lr 0.002 --allow-change steps,lr" + ck));
  CAPTURE(more.err);
  CHECK(more.status == 0);
  CHECK(more.out.find("resumed from " + (d / "ck/step_00000004")) != std::string::npos);
  const std::string manifest = slurp(d / "ck/step_00000006/manifest.json");
  CHECK(manifest.find("\"lr\": 0.002") != std::string::npos);
  CHECK(manifest.find("\"steps\": 6") != std::string::npos);

  // A checkpoint that does not record a setting (from before tetra recorded --dtype, here by
  // an edit with the checksum made to match) differs in it, unless that change is allowed.
  tetra::json m;
  REQUIRE(tetra::parse_json(manifest, m).empty());
  m["config"]["device"].erase("dtype");
  m.erase("manifest_checksum");
  const std::string text = m.dump();
  m["manifest_checksum"] = tetra::ckpt::crc_hex(tetra::ckpt::crc32c(text.data(), text.size()));
  std::ofstream(d / "ck/step_00000006/manifest.json", std::ios::trunc) << m.dump(2);
  const Spawned old = spawn(train("--steps 6 --lr 0.002" + ck));
  CHECK(old.status == 2);
  CHECK(old.err.find("(--dtype \"not recorded\" there, \"fp32\" here); pass --allow-change "
                     "dtype") != std::string::npos);
  const Spawned allowed = spawn(train("--steps 6 --lr 0.002 --allow-change dtype" + ck));
  CHECK(allowed.status == 0);
  CHECK(allowed.out.find("run finished: ") != std::string::npos);
}

TEST_CASE("guards: a checkpoint of format version 2 (before the whole configuration) resumes") {
  TempDir d;
  const std::string ck = " --ckpt-dir " + (d / "ck") + " --ckpt-every 2";
  REQUIRE(spawn(train("--export " + (d / "a.st"))).status == 0);
  REQUIRE(spawn(train(ck)).status == 0);
  // Step 2's manifest as version 2 wrote it: the settings a resume compared as `run`, by
  // their --allow-change names, the ZeRO stage in the layout, no `config`.
  const std::string manifest = d / "ck/step_00000002/manifest.json";
  tetra::json m;
  REQUIRE(tetra::parse_json(slurp(manifest), m).empty());
  const tetra::json c = m.at("config");
  m["version"] = 2;
  m["run"] = {{"data", c["data"]["data"]},
              {"lr", c["optimizer"]["lr"]},
              {"min-lr", c["optimizer"]["min_lr"]},
              {"warmup", c["optimizer"]["warmup"]},
              {"steps", c["optimizer"]["steps"]},
              {"clip", c["optimizer"]["clip"]},
              {"weight-decay", c["optimizer"]["weight_decay"]},
              {"dtype", c["device"]["dtype"]}};
  m["layout"]["zero"] = c["optimizer"]["zero"];
  m.erase("config");
  m.erase("manifest_checksum");
  const std::string text = m.dump();
  m["manifest_checksum"] = tetra::ckpt::crc_hex(tetra::ckpt::crc32c(text.data(), text.size()));
  std::ofstream(manifest, std::ios::trunc) << m.dump(2);
  fs::remove_all(d / "ck/step_00000004");
  std::ofstream(d / "ck/latest", std::ios::trunc) << "step_00000002\n";
  const Spawned r = spawn(train(ck + " --export " + (d / "b.st")));
  CAPTURE(r.err);
  CHECK(r.status == 0);
  CHECK(r.out.find("resumed from " + (d / "ck/step_00000002")) != std::string::npos);
  CHECK(slurp(d / "a.st") == slurp(d / "b.st"));
  // Its continuation is written in the current format.
  REQUIRE(tetra::parse_json(slurp(d / "ck/step_00000004/manifest.json"), m).empty());
  CHECK(m["version"] == 3);
  CHECK(m["config"]["optimizer"]["lr"] == c["optimizer"]["lr"]);
}

TEST_CASE("guards: a second job on a checkpoint directory is refused; a stale lock is taken") {
  TempDir d;
  const std::string ck = d / "ck";
  // The first job stalls at step 1 and holds the lock until it is killed.
  const std::string script =
      train("--ckpt-dir " + ck + " --inject-failure 0@1:hang --timeout 0") + " & holder=$!; " +
      "i=0; while [ ! -f " + ck + "/lock ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; " +
      "echo holder=$holder; " + train("--ckpt-dir " + ck) + "; echo second=$?; " +
      "kill -9 $holder; wait $holder; " + train("--ckpt-dir " + ck) + "; echo third=$?";
  const Spawned r = spawn(script, 180);
  CAPTURE(r.out);
  CAPTURE(r.err);
  const size_t at = r.out.find("holder=");
  REQUIRE(at != std::string::npos);
  const std::string pid = r.out.substr(at + 7, r.out.find('\n', at) - at - 7);
  CHECK(r.out.find("second=73") != std::string::npos);  // locked: not 2, "bad input"
  CHECK(count(r.err, "tetra: error:") == 1);
  CHECK(r.err.find("tetra: error: checkpoint directory '" + ck +
                   "' is in use by another job (pid " + pid + " on host ") != std::string::npos);
  CHECK(r.err.find("tetra: warning: taking over the lock of checkpoint directory '" + ck +
                   "' left by pid " + pid + " on host ") != std::string::npos);
  CHECK(r.out.find("third=0") != std::string::npos);
  CHECK(fs::exists(ck + "/step_00000004/manifest.json"));
  CHECK_FALSE(fs::exists(ck + "/lock"));
}

TEST_CASE("guards: a Slurm requeue takes over its job's lock from a host that is gone") {
  TempDir d;
  const std::string ck = d / "ck";
  fs::create_directories(ck);
  // Left by attempt 0 of Slurm job 77 on a node that failed.
  std::ofstream(ck + "/lock") << "{\"job\":\"slurm:/77\",\"host\":\"node-gone\",\"boot_id\":\"x\","
                                 "\"pid_ns\":\"pid:[1]\",\"pid\":4242,\"start_time\":9}\n";
  // The same job's first attempt (no requeue yet), another job: refused, exit status 73.
  for (const std::string env : {"SLURM_JOB_ID=77", "SLURM_JOB_ID=78 SLURM_RESTART_COUNT=1"}) {
    CAPTURE(env);
    const Spawned r = spawn(env + " " + train("--ckpt-dir " + ck));
    CHECK(r.status == 73);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(r.err.find("in use by another job (job slurm:/77, pid 4242 on host node-gone, which "
                     "this machine cannot check); if that job is gone, break the lock with: rm '" +
                     ck + "/lock'") != std::string::npos);
  }
  const Spawned r = spawn("SLURM_JOB_ID=77 SLURM_RESTART_COUNT=1 " + train("--ckpt-dir " + ck));
  CHECK(r.status == 0);
  CHECK(r.err.find("tetra: warning: taking over the lock of checkpoint directory '" + ck +
                   "' left by job slurm:/77, pid 4242 on host node-gone, an earlier attempt of "
                   "this job") != std::string::npos);
  CHECK_FALSE(fs::exists(ck + "/lock"));
}
