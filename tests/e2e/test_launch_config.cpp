// The supervisor with the real trainer, configured by a --config file that --print-config
// wrote: the supervisor reads the file's metrics, ckpt_dir, resume and tensorboard as the
// trainer does. (tests/unit/test_launch.cpp: the supervisor on small sh scripts.)
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"

using tetra::test::TempDir;

namespace {

std::vector<std::string> lines(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(tetra::test::slurp(path));
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

const std::string kTinyRun = tetra::test::tiny_model_flags({.heads = 2, .steps = 3});

// The steps a metrics file records, in its order.
std::vector<int> steps_of(const std::string& metrics) {
  std::vector<int> steps;
  const std::regex re(R"("step":(\d+))");
  for (const std::string& line : lines(metrics)) {
    std::smatch m;
    if (std::regex_search(line, m, re)) steps.push_back(std::stoi(m[1]));
  }
  return steps;
}

// In `dir`: tetra train's tiny run with `flags`, written as run.toml by --print-config, then
// `tetra launch --restarts 1 -- tetra train --config run.toml`.
tetra::test::Spawned launch_from_toml(const std::string& dir, const std::string& flags) {
  const std::string bin = tetra::test::tetra_bin();
  const tetra::test::Spawned printed = tetra::test::spawn(
      "cd " + dir + " && " + bin + " train" + kTinyRun + flags + " --print-config > run.toml");
  REQUIRE(printed.status == 0);
  return tetra::test::spawn("cd " + dir + " && " + bin + " launch --restarts 1 -- " + bin +
                            " train --config run.toml");
}

}  // namespace

TEST_CASE("launch: a --config file's metrics is the one written, restarts appending to it") {
  const TempDir tmp;
  // The case of the issue: no restart needed, the file's metrics was never written.
  const tetra::test::Spawned once = launch_from_toml(tmp.path.string(), " --metrics m.jsonl");
  CHECK(once.status == 0);
  CHECK(steps_of(tmp / "m.jsonl") == std::vector<int>{0, 1, 2});
  CHECK(contains(once.out, "3 kept"));
  // Killed as step 1 begins the first time, the restart starts over (no checkpoints) and
  // appends.
  const tetra::test::Spawned twice =
      launch_from_toml(tmp.path.string(), " --metrics m2.jsonl --inject-failure 0@1");
  CHECK(twice.status == 0);
  CHECK(steps_of(tmp / "m2.jsonl") == std::vector<int>{0, 0, 1, 2});
  CHECK(contains(twice.out, "2 attempts"));
}

TEST_CASE("launch: a restart resumes from a --config file's ckpt_dir") {
  const TempDir tmp;
  const tetra::test::Spawned r = launch_from_toml(
      tmp.path.string(), " --metrics m.jsonl --ckpt-dir ck --ckpt-every 1 --inject-failure 0@2");
  CHECK(r.status == 0);
  // Steps 0 and 1 checkpointed, killed at step 2; the restart continues from step 2.
  CHECK(steps_of(tmp / "m.jsonl") == std::vector<int>{0, 1, 2});
  CHECK(contains(r.out, "resumed from "));
  CHECK(contains(r.out, "at step 2"));
  CHECK(exists(tmp / "ck/step_00000003/manifest.json"));
  CHECK(contains(r.out, "2 attempts"));
}

TEST_CASE("launch: a restart resumes even when the --config file says resume = never") {
  const TempDir tmp;
  const tetra::test::Spawned r = launch_from_toml(tmp.path.string(),
                                                  " --metrics m.jsonl --ckpt-dir ck --ckpt-every 1 "
                                                  "--resume never --inject-failure 0@2");
  CHECK(r.status == 0);
  // The first attempt starts from step 0 as the file says; the rerun's --resume auto
  // overrides the file's key, so it continues from the checkpoint of step 2.
  CHECK(steps_of(tmp / "m.jsonl") == std::vector<int>{0, 1, 2});
  CHECK(contains(r.out, "resumed from "));
}

TEST_CASE("launch: a --config file's tensorboard directory gets every attempt's event file") {
  const TempDir tmp;
  const tetra::test::Spawned r =
      launch_from_toml(tmp.path.string(), " --tensorboard tb --inject-failure 0@1");
  CHECK(r.status == 0);
  CHECK(contains(r.out, "2 attempts"));
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp / "tb"))
    files += e.path().filename().string().starts_with("events.out.tfevents.");
  CHECK(files == 2);
}
