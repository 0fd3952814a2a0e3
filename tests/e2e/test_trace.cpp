// `tetra train --trace`: the Chrome trace of a 4-rank PP 2 x DP 2 interleaved run, read
// back with tetra's JSON parsing. Runs the real `tetra` binary.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"

namespace {

using tetra::json;
using tetra::test::count;
using tetra::test::int_of;
using tetra::test::parsed_json;
using tetra::test::TempDir;

const std::string kModel =
    " train" +
    tetra::test::tiny_model_flags(
        {.layers = 4, .dim = 16, .heads = 2, .kv_heads = 1, .ffn_dim = 16, .seq_len = 8});

struct Span {
  std::string name, lane;
  double ts = 0, dur = 0;
  json args;
};

}  // namespace

TEST_CASE("trace: spans of every rank, for the traced steps only") {
  const TempDir tmp;
  const std::string path = tmp / "trace.json";
  // PP 2 x V 2 with m = 2 micro-batches per DP rank: 2 * V * m = 8 actions per step.
  const tetra::test::Spawned r =
      tetra::test::spawn(tetra::test::mpirun(4) + tetra::test::tetra_bin() + kModel +
                         " --pp 2 --dp 2 --vpp 2 --steps 4 --trace-steps 2 --trace " + path);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const std::string text = tetra::test::slurp(path);
  const json trace = parsed_json(text);
  CHECK(trace.at("displayTimeUnit").get<std::string>() == "ms");

  std::map<int, std::string> processes;
  std::map<int, std::vector<Span>> spans;  // by rank
  for (const json& e : trace.at("traceEvents")) {
    const int pid = int(int_of(e.at("pid")));
    if (e.at("ph").get<std::string>() == "M") {
      if (e.at("name").get<std::string>() == "process_name")
        processes[pid] = e.at("args").at("name").get<std::string>();
      continue;
    }
    REQUIRE(e.at("ph").get<std::string>() == "X");
    spans[pid].push_back({e.at("name").get<std::string>(), e.at("cat").get<std::string>(),
                          e.at("ts").get<double>(), e.at("dur").get<double>(), e.at("args")});
  }
  REQUIRE(processes.size() == 4);
  CHECK(processes[0] == "rank 0 (tp 0 cp 0 pp 0 dp 0)");
  CHECK(processes[1] == "rank 1 (tp 0 cp 0 pp 1 dp 0)");
  CHECK(processes[2] == "rank 2 (tp 0 cp 0 pp 0 dp 1)");
  CHECK(processes[3] == "rank 3 (tp 0 cp 0 pp 1 dp 1)");

  for (int rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    const int pp = rank % 2;
    std::map<std::string, const Span*> steps;
    for (const Span& s : spans[rank])
      if (s.lane == "step") steps[s.name] = &s;
    REQUIRE(steps.size() == 2);
    REQUIRE(steps.count("step 1"));
    REQUIRE(steps.count("step 2"));

    // Every span inside exactly one step, grouped by it. Times are printed to 1 ns.
    std::map<std::string, std::multiset<std::string>> compute;
    int comm = 0, comm_with_bytes = 0, waits = 0, queued = 0;
    for (const Span& s : spans[rank]) {
      CAPTURE(s.name);
      CHECK(s.dur >= 0);
      if (s.lane == "step") continue;
      // The collectives queued under --overlap run beside the steps: ZeRO's all-gather of the
      // updated weights goes on after its step's end.
      if (s.lane == "comm queued") {
        ++queued;
        CHECK(s.args.at("group") == "dp_cp");
        continue;
      }
      std::string step;
      for (const auto& [name, st] : steps)
        if (s.ts >= st->ts - 1e-3 && s.ts + s.dur <= st->ts + st->dur + 1e-3) step = name;
      REQUIRE(!step.empty());
      if (s.lane == "compute") compute[step].insert(s.name);
      if (s.lane == "wait") ++waits;
      if (s.lane == "comm") {
        ++comm;
        comm_with_bytes += int_of(s.args.at("bytes")) > 0;
        CHECK(s.args.at("group").is_string());
      }
    }
    // This rank's actions: forward and backward of micro-batches 0, 1 through its chunks
    // pp and pp + 2 (the model's chunk k = v * PP + pp), then the grad norm and Adam.
    std::multiset<std::string> expected = {"grad-norm", "adam"};
    for (const char* kind : {"F", "B"})
      for (int mb = 0; mb < 2; ++mb)
        for (int chunk : {pp, pp + 2})
          expected.insert(std::string(kind) + " mb" + std::to_string(mb) + " chunk" +
                          std::to_string(chunk));
    CHECK(compute["step 1"] == expected);
    CHECK(compute["step 2"] == expected);
    CHECK(comm > 0);
    CHECK(comm_with_bytes > 0);
    CHECK(queued > 0);  // DP 2: the gradients' reduce-scatters at the least
    CHECK(waits > 0);   // every stage receives: activations on pp 1, gradients on pp 0
  }
}

TEST_CASE("trace: an unwritable path stops the run at start-up") {
  const TempDir tmp;
  const std::string file = tmp / "trace_not_a_dir";
  std::ofstream(file) << "x";
  const tetra::test::Spawned r = tetra::test::spawn(
      tetra::test::tetra_bin() + kModel + " --steps 1 --trace " + file + "/trace.json", 60);
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(count(r.err, "tetra: error:") == 1);
  CHECK(r.err.find("cannot write --trace file") != std::string::npos);
  CHECK(r.out.find("step ") == std::string::npos);  // no step ran
}

TEST_CASE("trace: the traced steps end with the run") {
  const TempDir tmp;
  const std::string path = tmp / "trace_short.json";
  const tetra::test::Spawned r = tetra::test::spawn(
      tetra::test::tetra_bin() + kModel + " --steps 3 --trace-steps 5 --trace " + path, 60);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const json trace = parsed_json(tetra::test::slurp(path));
  std::set<std::string> steps;
  for (const json& e : trace.at("traceEvents"))
    if (e.contains("cat") && e.at("cat").get<std::string>() == "step")
      steps.insert(e.at("name").get<std::string>());
  CHECK(steps == std::set<std::string>{"step 1", "step 2"});
}
