// Stragglers and tetra plot. One traced TP 2 x CP 2 x PP 2 x DP 2 run on 16 ranks with rank 5
// slowed: the step lines and the metrics name rank 5 and no other, and its pictures parse as
// XML (read back by tests/tools/svg_summary.py) with one lane per rank and exactly one box
// per forward and backward action of the schedule. Then the schedule pictures against
// make_schedule, the straggler rule itself, and bad input. Runs the real `tetra` binary.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "../support/spawn.hpp"
#include "../support/svg_summary.hpp"
#include "../support/test_util.hpp"
#include "parallel/schedule.hpp"
#include "train/straggler.hpp"

namespace {

using tetra::json;
using tetra::test::count;
using tetra::test::parsed_json;
using tetra::test::spawn;
using tetra::test::Spawned;
using tetra::test::svg_summary;
using tetra::test::tetra_bin;
using Pairs = std::multiset<std::pair<int, int>>;  // (micro-batch, model chunk)

Pairs pairs_of(const json& boxes) {
  Pairs out;
  for (const json& b : boxes) out.insert({b[0].get<int>(), b[1].get<int>()});
  return out;
}

// What rank `pp` of a pipeline runs: its (micro-batch, model chunk) forwards or backwards.
Pairs expected(tetra::ScheduleKind kind, int pp, int vpp, int m, int rank, tetra::Action::Kind k) {
  Pairs out;
  for (const tetra::Action& a : tetra::make_schedule(kind, pp, vpp, m, rank))
    if (a.kind == k) out.insert({a.micro_batch, a.chunk * pp + rank});
  return out;
}

Spawned plot(const std::string& args) {
  return spawn(tetra_bin() + " plot " + args, 60);
}

}  // namespace

TEST_CASE("straggler: the slowest rank, when more than 10 % above the median") {
  using tetra::find_straggler;
  // Median of 10, 10, 10, 12 is 10; 12 is 20 % above it and cost the others 2.
  const tetra::Straggler s = find_straggler({10, 12, 10, 10});
  CHECK(s.rank == 1);
  CHECK(s.median == 10);
  CHECK(s.compute == 12);
  CHECK(s.cost == 2);
  CHECK(find_straggler({10, 10.9, 10, 10}).rank == -1);  // 9 %: nobody
  CHECK(find_straggler({10, 11.1, 10, 10}).rank == 1);   // 11 %
  CHECK(find_straggler({30, 10, 30, 10}).rank == 0);     // ties: the lowest rank
  CHECK(find_straggler({30, 10, 20}).median == 20);      // odd count
  CHECK(find_straggler({100}).rank == -1);
  CHECK(find_straggler({100}).median == 100);  // nobody to hold back
}

TEST_CASE("plot: a traced 16-rank TP 2 x CP 2 x PP 2 x DP 2 step with rank 5 slowed") {
  tetra::test::TempDir dir;
  const std::string trace = dir.file("trace.json"), metrics = dir.file("run.jsonl");
  // PP 2, G 4 over DP 2, micro-batch G / (DP * PP) = 1: m = 2 micro-batches per step. Rank 5
  // sleeps 600 ms in every step from step 0 on: far beyond any noise of 16 ranks on 2 cores.
  const Spawned run =
      spawn(tetra::test::mpirun(16) + tetra_bin() +
                " train --tp 2 --cp 2 --pp 2 --dp 2 --layers 2 --dim 16 --heads 2 --kv-heads 2"
                " --ffn-dim 16 --seq-len 8 --global-batch 4 --steps 2 --peak-tflops 1"
                " --inject-failure 5@0:slow=600 --trace " +
                trace + " --metrics " + metrics,
            300);
  CAPTURE(run.out);
  CAPTURE(run.err);
  REQUIRE(run.status == 0);

  // The step lines: both name rank 5, and no line names another rank.
  CHECK(count(run.out, "straggler rank 5: compute") == 2);
  CHECK(count(run.out, "straggler rank ") == 2);
  // The metrics: per-rank times, rank 5's compute holding the sleep, rank 5 the straggler.
  std::ifstream in(metrics);
  int records = 0;
  for (std::string line; std::getline(in, line); ++records) {
    const json r = parsed_json(line);
    REQUIRE(r.at("compute_ms").size() == 16);
    REQUIRE(r.at("wait_ms").size() == 16);
    CHECK(r.at("straggler").get<int>() == 5);
    CHECK(r.at("compute_ms")[5].get<double>() >= 600);
    for (int q = 0; q < 16; ++q)
      if (q != 5) CHECK(r.at("wait_ms")[q].get<double>() > r.at("wait_ms")[5].get<double>());
  }
  CHECK(records == 2);
  // The summary's total wait per rank: rank 5 waited least.
  std::smatch m;
  REQUIRE(
      std::regex_search(run.out, m, std::regex("wait per rank over the run \\(s\\)[^:]*:(.*)")));
  std::vector<double> waits;
  const std::string list = m[1];
  const std::regex item(" (\\d+): ([0-9.]+)");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), item); it != std::sregex_iterator();
       ++it)
    waits.push_back(std::stod((*it)[2]));
  REQUIRE(waits.size() == 16);
  CHECK(std::min_element(waits.begin(), waits.end()) - waits.begin() == 5);

  // The traced step (step 1): 16 lanes, each with one box per action of the 1F1B schedule
  // its pipeline rank (rank / (TP * CP) % PP) runs.
  const std::string step_svg = dir.file("step.svg");
  Spawned r = plot("--trace " + trace + " --out " + step_svg);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const json s = svg_summary(step_svg);
  CHECK(s.at("root").get<std::string>() == "{http://www.w3.org/2000/svg}svg");
  REQUIRE(s.at("lanes").size() == 16);
  for (int rank = 0; rank < 16; ++rank) {
    CAPTURE(rank);
    const json& lane = s.at("lanes").at(std::to_string(rank));
    const int pp = rank / 4 % 2;
    using K = tetra::ScheduleKind;
    CHECK(pairs_of(lane.at("F")) == expected(K::OneFOneB, 2, 1, 2, pp, tetra::Action::Forward));
    CHECK(pairs_of(lane.at("B")) == expected(K::OneFOneB, 2, 1, 2, pp, tetra::Action::Backward));
    CHECK(lane.at("comm").get<int>() > 0);  // TP all-reduces at the least
    CHECK(lane.at("wait").get<int>() > 0);  // every stage waits on the other
  }

  // The barrier of step 1 (the default: the last step with a straggler) marks rank 5 only.
  const std::string barrier_svg = dir.file("barrier.svg");
  r = plot("--barrier " + metrics + " --out " + barrier_svg);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const json b = svg_summary(barrier_svg);
  CHECK(b.at("ranks").get<int>() == 16);
  CHECK(b.at("stragglers") == json::array({5}));

  // The loss curve of the two steps.
  const std::string loss_svg = dir.file("loss.svg");
  r = plot("--loss " + metrics + " --out " + loss_svg);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(svg_summary(loss_svg).at("loss_steps").get<int>() == 2);
  const std::string text = tetra::test::slurp(loss_svg);
  CHECK(text.find("entropy floor 1.213") != std::string::npos);
  CHECK(text.find("ln(vocab) 5.5452") != std::string::npos);
}

TEST_CASE("plot: pipeline schedules, one box per action of make_schedule") {
  tetra::test::TempDir dir;
  using K = tetra::ScheduleKind;
  struct Case {
    K kind;
    int pp, vpp, m;
  };
  for (const Case& c : {Case{K::GPipe, 4, 1, 8}, Case{K::OneFOneB, 4, 1, 8},
                        Case{K::Interleaved, 4, 2, 8}, Case{K::Interleaved, 2, 3, 4}}) {
    const std::string name = tetra::schedule_name(c.kind);
    CAPTURE(name);
    CAPTURE(c.vpp);
    const std::string out = dir.file(name + ".svg");
    const Spawned r = plot("--schedule " + name + " --pp " + std::to_string(c.pp) +
                           (c.vpp > 1 ? " --vpp " + std::to_string(c.vpp) : "") +
                           " --micro-batches " + std::to_string(c.m) + " --out " + out);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    const json s = svg_summary(out);
    REQUIRE(s.at("lanes").size() == size_t(c.pp));
    for (int rank = 0; rank < c.pp; ++rank) {
      const json& lane = s.at("lanes").at(std::to_string(rank));
      CHECK(pairs_of(lane.at("F")) ==
            expected(c.kind, c.pp, c.vpp, c.m, rank, tetra::Action::Forward));
      CHECK(pairs_of(lane.at("B")) ==
            expected(c.kind, c.pp, c.vpp, c.m, rank, tetra::Action::Backward));
    }
    // The title gives the formula's bubble: 1F1B and GPipe (p-1)/(m+p-1) = 3/11 = 27.3 %.
    if (c.kind != K::Interleaved)
      CHECK(tetra::test::slurp(out).find("27.3 % by the formula") != std::string::npos);
  }
}

TEST_CASE("plot: bad input ends in one error line and exit status 2") {
  tetra::test::TempDir dir;
  const std::string notjson = dir.file("bad.jsonl"), old = dir.file("old.jsonl");
  std::ofstream(notjson) << "{\"step\": 0, \"loss\": 1}\nnot json\n";
  std::ofstream(old) << "{\"step\": 0, \"loss\": 1.5}\n";
  const std::string named = dir.file("named.jsonl");
  std::ofstream(named) << "{\"step\": 0, \"compute_ms\": [1, 2], \"wait_ms\": [1, 1], "
                          "\"straggler\": 7}\n";
  const std::string out = " --out " + dir.file("x.svg");
  struct Case {
    std::string args, message;
  };
  for (const Case& c : {
           Case{out, "needs exactly one of --loss, --trace, --barrier or --schedule"},
           Case{"--loss " + old + " --barrier " + old + out, "(got 2)"},
           Case{"--loss " + old, "needs --out FILE"},
           Case{"--loss " + dir.file("missing.jsonl") + out, "cannot read metrics file"},
           Case{"--loss " + notjson + out, "line 2: invalid JSON"},
           Case{"--barrier " + old + out, "no per-rank compute_ms and wait_ms"},
           Case{"--barrier " + old + " --step 3" + out, "no step 3"},
           Case{"--barrier " + named + out, "names straggler 7 of 2 ranks"},
           Case{"--trace " + old + out, "not a Chrome trace"},
           Case{"--loss " + old + " --pp 2" + out, "--pp goes with --schedule"},
           Case{"--loss " + old + " --step 1" + out, "--step goes with --trace or --barrier"},
           Case{"--schedule 1f1b --pp 4 --micro-batches 2" + out, "fewer than --pp 4"},
           Case{"--schedule 1f1b --vpp 2" + out, "needs --schedule interleaved"},
           Case{"--schedule interleaved --pp 4 --micro-batches 6" + out,
                "not a multiple of --pp 4"},
           Case{"--schedule zigzag" + out,
                "--schedule takes gpipe, 1f1b, interleaved, zb-h1 or zb-v"},
           // 8 million boxes: minutes and gigabytes of simulation before.
           Case{"--schedule 1f1b --pp 2000" + out, "than the 200,000 tetra draws"},
           Case{"--loss " + old + " --out " + dir.path.string(), "it is a directory"},
       }) {
    CAPTURE(c.args);
    const Spawned r = plot(c.args);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(r.err.find(c.message) != std::string::npos);
  }
}

TEST_CASE("plot: odd but valid metrics draw a finite loss curve, without hanging") {
  tetra::test::TempDir dir;
  struct Case {
    const char* name;
    std::string records;
  };
  for (const Case& c : {
           // One step past 2^53: step + 1 rounds to the step, so stepping ticks never ended.
           Case{"huge_step", "{\"step\": 100000000000000000, \"loss\": 3}\n"},
           Case{"zero", "{\"step\": 0, \"loss\": 0}\n{\"step\": 1, \"loss\": 0}\n"},
           Case{"negative", "{\"step\": 0, \"loss\": -3}\n{\"step\": 1, \"loss\": -2}\n"},
       }) {
    CAPTURE(c.name);
    const std::string in = dir.file(std::string(c.name) + ".jsonl"),
                      svg = dir.file(std::string(c.name) + ".svg");
    std::ofstream(in) << c.records;
    const Spawned r = spawn(tetra_bin() + " plot --loss " + in + " --out " + svg, 10);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    std::ifstream f(svg);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CHECK(text.find("nan") == std::string::npos);
    CHECK(text.find("inf") == std::string::npos);
    svg_summary(svg);  // parses as XML
  }
}

TEST_CASE("plot: tetra plan --draw draws the planned run's schedule") {
  tetra::test::TempDir dir;
  const std::string out = dir.file("plan.svg");
  // PP 2, V 2, DP 2, global batch 16 of micro-batch 2: 4 micro-batches per DP rank.
  const Spawned r = spawn(tetra_bin() +
                              " plan --layers 4 --pp 2 --vpp 2 --dp 2 --schedule interleaved "
                              "--global-batch 16 --micro-batch 2 --draw " +
                              out,
                          60);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const json s = svg_summary(out);
  REQUIRE(s.at("lanes").size() == 2);
  for (int rank = 0; rank < 2; ++rank) {
    const json& lane = s.at("lanes").at(std::to_string(rank));
    CHECK(pairs_of(lane.at("F")) ==
          expected(tetra::ScheduleKind::Interleaved, 2, 2, 4, rank, tetra::Action::Forward));
    CHECK(pairs_of(lane.at("B")) ==
          expected(tetra::ScheduleKind::Interleaved, 2, 2, 4, rank, tetra::Action::Backward));
  }
}
