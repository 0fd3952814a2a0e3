// The output directories of tetra sweep and tetra lab (--out): new, empty, or marked as the
// same command's by an earlier run (.tetra-output); every file the command writes there is
// checked before the first run, never written through a symbolic link, never truncated when
// tetra did not make it (a fresh file is renamed over the name), and nothing of the user's is
// removed. A launcher that fails at once ("false {n}") stands for the runs: the checks, the
// marker and the logs are what these tests look at. Runs the real `tetra` binary.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"

using namespace tetra::test;
namespace fs = std::filesystem;

namespace {

// The two commands, each with a failing launcher, writing into `out`.
const std::string kFail = " --launcher \"false {n}\"";
std::string sweep(const std::string& out) {
  return tetra_bin() + " sweep --ranks 2" + tiny_model_flags() + "--steps 1 --out " + out + kFail;
}
std::string lab(const std::string& out) {
  return tetra_bin() + " lab resume --answer 1 --out " + out + kFail;
}

// A file of the user's, with words in it.
void user_file(const fs::path& path) {
  std::ofstream(path) << "the user's own words\n";
}

}  // namespace

TEST_CASE("output dirs: a directory that is neither empty nor the command's own is refused") {
  for (const bool is_sweep : {true, false}) {
    CAPTURE(is_sweep);
    const TempDir d;
    fs::create_directory(d / "out");
    user_file(d / "out/notes.txt");
    // The lab's run names, of the user's: the lab once removed these before each run.
    fs::create_directory(d / "out/resume-1.ckpt");
    user_file(d / "out/resume-1.ckpt/keep.txt");
    user_file(d / "out/resume-1.jsonl");
    const std::string command = is_sweep ? sweep("out") : lab("out");
    expect_refusal_in(d.path, command,
                      std::string("is neither empty nor an earlier tetra ") +
                          (is_sweep ? "sweep" : "lab") + "'s (it has no .tetra-output)");
    // Another command's directory is not this one's.
    std::ofstream(d / "out/.tetra-output") << (is_sweep ? "tetra lab\n" : "tetra sweep\n");
    expect_refusal_in(
        d.path, command,
        std::string("(its .tetra-output says tetra ") + (is_sweep ? "lab" : "sweep") + ")");
    // A file where the directory should be.
    expect_refusal_in(d.path, is_sweep ? sweep("out/notes.txt") : lab("out/notes.txt"),
                      "--out 'out/notes.txt': it is not a directory");
  }
}

TEST_CASE(
    "output dirs: new, then marked and reused; its files are made new, never written "
    "through") {
  for (const bool is_sweep : {true, false}) {
    CAPTURE(is_sweep);
    const TempDir d;
    const std::string command = is_sweep ? sweep("out") : lab("out");
    const std::string log = is_sweep ? "out/runs/reference.log" : "out/resume-1.log";
    // A new directory: made and marked; the run fails (the launcher), its log says why.
    const Spawned first = spawn("cd " + d.path.string() + " && " + command, 60);
    CAPTURE(first.err);
    CHECK(first.status == 1);
    CHECK(slurp(d / "out/.tetra-output") == (is_sweep ? "tetra sweep\n" : "tetra lab\n"));
    REQUIRE(fs::is_regular_file(d / log));
    // Marked: reused. A hard link to a file of the user's at the log's name is replaced by a
    // new log, not truncated (the user's file keeps its words).
    user_file(d / "victim.txt");
    fs::remove(d / log);
    fs::create_hard_link(d / "victim.txt", d / log);
    const Spawned again = spawn("cd " + d.path.string() + " && " + command, 60);
    CHECK(again.status == 1);
    CHECK(slurp(d / "victim.txt") == "the user's own words\n");
    CHECK(fs::hard_link_count(d / "victim.txt") == 1);
    // A symbolic link planted at any name the command writes is refused before the first run:
    // nothing changes, the file it points to least of all.
    const std::vector<std::string> names =
        is_sweep ? std::vector<std::string>{"out/sweep.jsonl", "out/sweep.svg", log,
                                            "out/runs/reference.jsonl"}
                 : std::vector<std::string>{log, "out/resume-1.jsonl"};
    for (const std::string& name : names) {
      CAPTURE(name);
      fs::remove(d / name);
      fs::create_symlink(d / "victim.txt", d / name);
      expect_refusal_in(d.path, command, "'" + name + "' is a symbolic link");
      fs::remove(d / name);
    }
    // The runs directory and the lab's checkpoint directory are the command's own too.
    const std::string dir = is_sweep ? "out/runs" : "out/resume-1.ckpt";
    fs::remove_all(d / dir);
    fs::create_directory(d / "elsewhere");
    user_file(d / "elsewhere/keep.txt");
    fs::create_directory_symlink(d / "elsewhere", d / dir);
    expect_refusal_in(d.path, command, "'" + dir + "' is a symbolic link");
  }
}

TEST_CASE("output files: every command's named output refuses a symbolic link, changing nothing") {
  const TempDir d;
  user_file(d / "victim.txt");
  fs::create_symlink(d / "victim.txt", d / "link.svg");
  fs::create_symlink(d / "victim.txt", d / "link.safetensors");
  fs::create_symlink(d / "victim.txt", d / "link.json");
  const std::string tetra = tetra_bin(), train = tetra + " train" + tiny_model_flags({.steps = 1});
  const std::pair<std::string, std::string> cases[] = {
      {tetra + " plot --schedule 1f1b --pp 2 --micro-batches 4 --out link.svg",
       "it is a symbolic link"},
      {tetra + " plan --pp 2 --draw link.svg", "it is a symbolic link"},
      {train + "--metrics link.json", "cannot write --metrics file 'link.json': it is a symbolic"},
      {train + "--trace link.json", "cannot write --trace file 'link.json': it is a symbolic"},
      {train + "--export link.safetensors", "cannot write --export file 'link.safetensors'"},
  };
  for (const auto& [command, why] : cases) expect_refusal_in(d.path, command, why);
}
