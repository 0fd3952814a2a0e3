// Pre-emption with the real binary: a SIGTERM to one rank (--inject-failure R@S:preempt)
// stops every rank at the same step boundary with a checkpoint, which a second SIGTERM during
// its write does not tear; the run exits 75 with its lock released, and tetra launch resumes
// it to the same final weights, byte for byte, as an uninterrupted run, losing no step.
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"

using namespace tetra::test;
namespace fs = std::filesystem;

namespace {

const std::string kModel = tetra::test::tiny_model_flags({.steps = 6}) + "--tp 2 ";

std::string train(const std::string& args) {
  return mpirun(2) + tetra_bin() + " train " + with_defaults(kModel, args);
}

std::string steps_of(const std::string& metrics) {
  const std::string text = slurp(metrics);
  const std::regex step(R"re("step":(\d+))re");
  std::string s;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), step); it != std::sregex_iterator();
       ++it)
    s += (*it)[1].str() + " ";
  return s;
}

}  // namespace

TEST_CASE("preempt: a signal stops every rank at one step with a checkpoint; the job resumes it") {
  TempDir d;
  const Spawned ref = spawn(train("--export " + (d / "ref.safetensors")));
  REQUIRE(ref.status == 0);

  SUBCASE("on its own: exit status 75, the checkpoint whole, the lock released") {
    const Spawned r = spawn(train("--ckpt-dir " + (d / "ck") + " --inject-failure 1@2:preempt"));
    CHECK(r.status == 75);
    CHECK(r.out.find("pre-empted: a signal reached 1 of 2 ranks; stopped after step 2, "
                     "checkpointed; exit status 75: resume with --resume auto") !=
          std::string::npos);
    CHECK(r.out.find("checkpoint: step 3 saved") != std::string::npos);
    CHECK(r.out.find("step     3") == std::string::npos);
    CHECK(count(r.err, "tetra: injected failure: pre-empting rank 1 at step 2") == 1);
    CHECK(slurp(d / "ck/latest") == "step_00000003\n");
    CHECK_FALSE(fs::exists(d / "ck/lock"));
    const Spawned v = spawn(tetra_bin() + " ckpt verify " + (d / "ck/step_00000003"));
    CHECK(v.status == 0);
  }
  SUBCASE("under tetra launch: resumed from that checkpoint, no step lost, the same bytes") {
    const Spawned r =
        spawn(tetra_bin() + " launch --restarts 1 -- " +
              train("--ckpt-dir " + (d / "ck") + " --inject-failure 1@2:preempt" + " --metrics " +
                    (d / "m.jsonl") + " --export " + (d / "got.safetensors")));
    CAPTURE(r.err);
    CHECK(r.status == 0);
    CHECK(r.out.find("resumed from " + (d / "ck/step_00000003") + " at step 3") !=
          std::string::npos);
    CHECK(r.out.find("2 attempts (exit 75 at step 2, then exit 0 at step 5); 0 steps lost, 6 "
                     "kept") != std::string::npos);
    CHECK(r.err.find("taking over the lock") == std::string::npos);  // it was released
    CHECK(steps_of(d / "m.jsonl") == "0 1 2 3 4 5 ");
    CHECK(slurp(d / "got.safetensors") == slurp(d / "ref.safetensors"));
  }
}
