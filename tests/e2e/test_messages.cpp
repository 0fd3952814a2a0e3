// The words of small failures (issue 38, class 11): each says what happened. A run stopped by
// --run-timeout says so (not "exit 0"); a job that failed without a word in its log says how
// it ended (not an empty reason); the lab keeps the log its error names; tetra ckpt on a path
// that is missing or not a directory says that; a pre-empted run without --ckpt-dir does not
// advise resuming.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"
#include "cli/options.hpp"
#include "cli/plan_command.hpp"

using namespace tetra::test;
namespace fs = std::filesystem;

TEST_CASE("messages: a job that failed or timed out says how, and its log is kept") {
  TempDir d;
  const std::string quiet = d / "quiet.sh", hang = d / "hang.sh", tmp = d / "tmp";
  fs::create_directory(tmp);
  std::ofstream(quiet) << "#!/bin/sh\nexit 3\n";  // fails without a word
  std::ofstream(hang) << "#!/bin/sh\nexec sleep 60\n";
  {
    const Spawned r = spawn(tetra_bin() + " sweep --ranks 2" + tiny_model_flags() + " --out " +
                            (d / "s") + " --launcher \"sh " + quiet + " {n}\"");
    CAPTURE(r.err);
    CHECK(r.status == 1);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(r.err.find("tetra: error: the one-rank reference run failed: exit 3 (its log is empty) "
                     "(its log: " +
                     (d / "s") + "/runs/reference.log)") != std::string::npos);
  }
  for (const std::string& launcher : {quiet, hang}) {
    CAPTURE(launcher);
    const Spawned r =
        spawn("TMPDIR=" + tmp + " " + tetra_bin() + " lab dp --answer 1 --run-timeout 1 " +
                  "--launcher \"sh " + launcher + " {n}\"",
              60);
    CAPTURE(r.err);
    CHECK(r.status == 1);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(r.err.find(launcher == quiet ? "the run failed: exit 3 (its log is empty) (log: "
                                       : "the run timed out after 1 s (--run-timeout) (log: ") !=
          std::string::npos);
    // The log it names is there.
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex(R"(\(log: ([^)]*)\))")));
    CHECK(fs::exists(m[1].str()));
  }
}

TEST_CASE("messages: tetra ckpt on a missing path or a FIFO says so") {
  TempDir d;
  const std::string fifo = d / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  for (const char* action : {"inspect", "verify", "config"}) {
    CAPTURE(action);
    const std::string ckpt = tetra_bin() + " ckpt " + action + " ";
    expect_refusal(
        ckpt + (d / "missing"),
        "'" + (d / "missing") + "' is not a checkpoint or a checkpoint directory: not found");
    expect_refusal(ckpt + fifo, "'" + fifo +
                                    "' is not a checkpoint or a checkpoint directory: it is not a "
                                    "directory");
  }
}

TEST_CASE("messages: a pre-empted run without --ckpt-dir does not say to resume") {
  const Spawned r = spawn(tetra_bin() + " train" + tiny_model_flags({.steps = 5}) +
                          " --inject-failure 0@2:preempt");
  CAPTURE(r.out);
  CHECK(r.status == 75);
  CHECK(r.out.find("pre-empted: a signal reached 1 of 1 ranks; stopped after step 2 with no "
                   "--ckpt-dir, so nothing was saved; exit status 75\n") != std::string::npos);
  CHECK(r.out.find("resume") == std::string::npos);
}

TEST_CASE("messages: numbers at the ends of their ranges print and read as numbers") {
  // A plan at a peak of 1e-300 TFLOP/s: times of 1e297 s in three digits, not 300.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"plan", "--peak-tflops", "1e-300"},
        std::vector<std::string>{"plan", "--tokens", "1e300", "--achieved-tflops", "1e-300"},
        std::vector<std::string>{"plan", "--gpu-memory", "1e-300"}}) {
    CAPTURE(args);
    const std::string text = tetra::plan_output(tetra::parse_command_line(args).plan, false).text;
    CAPTURE(text);
    CHECK_FALSE(std::regex_search(text, std::regex("[0-9,]{24}")));
  }
  // The smallest positive double is a positive --lr.
  CHECK(tetra::parse_command_line({"train", "--lr", "4.94e-324"}).train.optimizer.lr > 0);
}
