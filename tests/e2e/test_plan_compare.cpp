// tetra plan --compare against a real run: exact bytes, memory within 10%, exit 1 on a
// mismatch; a metrics file it cannot read is bad input. (The plan's own arithmetic:
// tests/unit/test_plan.cpp.)
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include "../support/spawn.hpp"

using namespace tetra::test;

TEST_CASE(
    "plan --compare: a real run's bytes exactly and its peak within 10%; a mismatch exits 1") {
  const TempDir tmp;
  const std::string metrics = tmp / "plan_metrics.jsonl";
  const std::string layout =
      " --tp 2 --pp 2 --dp 2 --zero 2 --sp --layers 4 --dim 64 --heads 4 --kv-heads 2 "
      "--ffn-dim 128 --seq-len 16 --global-batch 8 --micro-batch 2";
  const Spawned run = spawn(
      mpirun(8) + tetra_bin() + " train --steps 2 --peak-tflops 1 --metrics " + metrics + layout,
      120);
  REQUIRE_MESSAGE(run.status == 0, run.err);
  const Spawned ok = spawn(tetra_bin() + " plan --compare " + metrics + layout, 30);
  CHECK_MESSAGE(ok.status == 0, ok.out, ok.err);
  CHECK(count(ok.out, " ok") == 6);  // 5 groups and the peak, each summed up over the steps
  CHECK(count(ok.out, "in every step  ok") == 5);
  // The run's throughput: the tokens of the steps after the first over their time.
  CHECK(ok.out.find("throughput ") != std::string::npos);
  CHECK(ok.out.find(" tokens in ") != std::string::npos);
  CHECK(ok.out.find("plan matches") != std::string::npos);
  // Another layout's plan does not match this run.
  const Spawned other = spawn(tetra_bin() + " plan --compare " + metrics +
                                  std::regex_replace(layout, std::regex("--zero 2"), "--zero 3"),
                              30);
  CHECK(other.status == 1);
  CHECK(other.out.find("MISMATCH") != std::string::npos);
  CHECK(other.out.find("plan does NOT match") != std::string::npos);
  std::remove(metrics.c_str());
  // A file that is not there is bad input: one error line, exit 2.
  const Spawned missing = spawn(tetra_bin() + " plan --compare " + metrics + layout, 30);
  CHECK(missing.status == 2);
  CHECK(count(missing.err, "tetra: error: --compare: cannot read") == 1);
}

TEST_CASE("plan --compare: in bf16 the peak counts the mixed-precision backend's fp32 scratch") {
  // At 128 tokens the fp32 copies an op of backend/mixed_backend.cpp makes of its bf16
  // arguments (the LM head's logits and weights, attention's q, k, v) are a tenth of the
  // peak (14 % with --dp 2); the walk counts them where the ops run, so the prediction is
  // the measured peak to the byte.
  const TempDir tmp;
  const std::string metrics = tmp / "plan_bf16_metrics.jsonl";
  const std::string layout =
      " --dtype bf16 --layers 2 --dim 64 --heads 4 --kv-heads 2 --ffn-dim 128 --seq-len 128 "
      "--global-batch 2 --micro-batch 1";
  const Spawned run =
      spawn(tetra_bin() + " train --steps 1 --peak-tflops 1 --metrics " + metrics + layout, 120);
  REQUIRE_MESSAGE(run.status == 0, run.err);
  const Spawned cmp = spawn(tetra_bin() + " plan --compare " + metrics + layout, 30);
  CHECK_MESSAGE(cmp.status == 0, cmp.out, cmp.err);
  const std::regex peak_row(R"(peak\s+(\d+)\s+(\d+))");
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(cmp.out, m, peak_row), cmp.out);
  CHECK(m[1] == m[2]);
}

TEST_CASE("plan --compare: a metrics value of the wrong type is named, exit 2") {
  struct Case {
    const char* record;
    const char* message;
  };
  for (const Case& c : {
           Case{R"({"step": 0, "comm_bytes": {"tp": "x"}, "peak_memory_bytes": 1})",
                "line 1: comm_bytes.tp is not an integer"},
           Case{R"({"step": 0, "comm_bytes": {"tp": 1e300}, "peak_memory_bytes": 1})",
                "line 1: comm_bytes.tp is not an integer"},
           Case{R"({"step": 0, "comm_bytes": {"tp": 0}, "peak_memory_bytes": "big"})",
                "line 1: peak_memory_bytes is not a byte count"},
           Case{R"({"step": 0, "comm_bytes": [1, 2], "peak_memory_bytes": 1})",
                "line 1: comm_bytes is not an object"},
       }) {
    CAPTURE(c.record);
    const TempDir tmp;
    const std::string metrics = tmp / "plan_bad_metrics.jsonl";
    std::ofstream(metrics) << c.record << "\n";
    const Spawned r = spawn(tetra_bin() + " plan --compare " + metrics, 30);
    CHECK(r.status == 2);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK_MESSAGE(r.err.find(c.message) != std::string::npos, r.err);
  }
}
