// Pictures and reports that stay finite and bounded (issue 24, class 7): no NaN or infinite
// coordinate in an SVG whatever the numbers of a metrics file, numbers formatted at their
// length (a 1e308 tick label read as 63 digits cut from a 64-byte buffer), plot --barrier
// bounded as plot --schedule is, and messages that say what is wrong (a directory given to
// --compare, a line of checkpoints where one verifies, --mfu at its rule's bound).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"

using namespace tetra::test;
namespace fs = std::filesystem;

namespace {

// Every number in the SVG at `path` is finite and written short (no "nan", no "inf", no run
// of 20 digits), and the file parses as XML.
void finite_svg(const std::string& path) {
  const std::string svg = slurp(path);
  CHECK(svg.find("nan") == std::string::npos);
  CHECK(svg.find("inf") == std::string::npos);
  CHECK_FALSE(std::regex_search(svg, std::regex("[0-9]{20}")));
  const Spawned r =
      spawn("python3 -c \"import sys, xml.dom.minidom as m; m.parse(sys.argv[1])\" " + path);
  CAPTURE(r.err);
  CHECK(r.status == 0);
}

Spawned plot(const std::string& args) {
  return spawn(tetra_bin() + " plot " + args, 30);
}

}  // namespace

TEST_CASE("pictures: a loss curve of extreme values has finite coordinates and short labels") {
  TempDir d;
  struct Case {
    const char* name;
    std::string records;
  };
  for (const Case& c : {
           // max - min overflows to infinity: every coordinate became NaN.
           Case{"both_ends", "{\"step\": 0, \"loss\": 1e308}\n{\"step\": 1, \"loss\": -1e308}\n"},
           // A tick at 1e308 was printed "%.2f" into 64 bytes: 63 digits of a 309-digit number.
           Case{"huge", "{\"step\": 0, \"loss\": 1e308}\n{\"step\": 1, \"loss\": 5e307}\n"},
           Case{"tiny", "{\"step\": 0, \"loss\": 1e-300}\n{\"step\": 1, \"loss\": 3e-300}\n"},
           Case{"huge_floor",
                "{\"step\": 0, \"loss\": 2, \"ln_vocab\": 1e308, "
                "\"entropy_floor\": -1e308}\n"},
       }) {
    CAPTURE(c.name);
    std::ofstream(d / (std::string(c.name) + ".jsonl")) << c.records;
    const std::string svg = d / (std::string(c.name) + ".svg");
    const Spawned r = plot("--loss " + (d / (std::string(c.name) + ".jsonl")) + " --out " + svg);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    finite_svg(svg);
  }
}

TEST_CASE("pictures: a barrier of extreme times is finite, and its ranks are bounded") {
  TempDir d;
  std::ofstream(d / "huge.jsonl") << "{\"step\": 0, \"compute_ms\": [1e308, 1], \"wait_ms\": "
                                     "[1e308, 1e308], \"straggler\": 0}\n";
  Spawned r = plot("--barrier " + (d / "huge.jsonl") + " --out " + (d / "b.svg"));
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  finite_svg(d / "b.svg");

  // As many ranks as Llama 3 405B's 16,384 GPUs draw; one more is refused, as a schedule of
  // more than 200,000 boxes is.
  for (const int ranks : {16384, 16385}) {
    std::string times = "0";
    for (int q = 1; q < ranks; ++q) times += ",1";
    std::string record = "{\"step\": 0, \"compute_ms\": [";
    record += times + "], \"wait_ms\": [" + times + "]}\n";
    std::ofstream(d / "many.jsonl") << record;
    r = plot("--barrier " + (d / "many.jsonl") + " --out " + (d / "m.svg"));
    CAPTURE(ranks);
    CAPTURE(r.err);
    if (ranks == 16384) {
      CHECK(r.status == 0);
    } else {
      CHECK(r.status == 2);
      CHECK(count(r.err, "tetra: error:") == 1);
      CHECK(r.err.find("16385 ranks, more than the 16,384 tetra draws") != std::string::npos);
    }
  }
}

TEST_CASE("pictures: messages say what is wrong") {
  TempDir d;
  // A directory to --compare is named as one.
  const std::string dir = d.path.string();
  Spawned r = spawn(tetra_bin() + " plan --compare " + dir, 30);
  CHECK(r.status == 2);
  CHECK(count(r.err, "tetra: error:") == 1);
  CHECK(r.err.find(dir + "': it is a directory, not a regular file") != std::string::npos);
  // A measured peak past any byte count was printed "%15.0f" into 200 bytes: 309 digits cut
  // to a row without its verdict, and a percentage of "+inf".
  for (const char* peak : {"1e308", "-1", "9.3e18"}) {
    CAPTURE(peak);
    std::ofstream(d / "m.jsonl") << "{\"step\": 0, \"comm_bytes\": {}, \"peak_memory_bytes\": "
                                 << peak << "}\n";
    r = spawn(tetra_bin() + " plan --compare " + (d / "m.jsonl"), 30);
    CHECK(r.status == 2);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(r.err.find("line 1: peak_memory_bytes is not a byte count (a number from 0 to 2^63)") !=
          std::string::npos);
  }
  // --mfu must be below 99, as its rule says.
  r = spawn(tetra_bin() + " plan --mfu 99", 30);
  CHECK(r.status == 2);
  CHECK(r.err.find("--mfu must be a percentage below 99 (got 99)") != std::string::npos);
  CHECK(spawn(tetra_bin() + " plan --mfu 98.5 --tokens 1e9", 30).status == 0);
}

TEST_CASE("pictures: a line of checkpoints where one verifies is not 'nothing verifies'") {
  TempDir d;
  const std::string ck = d / "ck";
  const std::string run = tetra_bin() +
                          " train --dim 32 --layers 1 --heads 2 --kv-heads 1 --ffn-dim 64 "
                          "--seq-len 16 --global-batch 2 --peak-tflops 1 --ckpt-dir " +
                          ck;
  REQUIRE(spawn(run + " --steps 2", 60).status == 0);
  // Another line: rolled back to step 0 and trained to step 4, then its checkpoint damaged.
  REQUIRE(spawn(run + " --steps 4 --resume never --ckpt-every 4", 60).status == 0);
  std::ofstream(ck + "/step_00000004/rank_00000.safetensors", std::ios::app) << "x";
  const Spawned r = spawn(run + " --steps 4", 60);
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(count(r.err, "tetra: error:") == 1);
  CHECK(r.err.find("no checkpoint verifies") == std::string::npos);
  CHECK(r.err.find(ck + "/step_00000002 verifies but is another line's") != std::string::npos);
}
