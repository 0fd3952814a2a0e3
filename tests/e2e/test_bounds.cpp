// Bounds before allocations (issue 24, class 3). What a flag sizes is checked against a
// stated limit (model/config.hpp, parallel/schedule.hpp) or the memory plan before anything
// is allocated for it, and the planner's cost grows with one pipeline stage's schedule, not
// with the square of the pipeline: tetra plan answered --seq-len 2147483647 after minutes of
// allocating and --pp 8192 --layers 8192 --global-batch 8192 after 64 s.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "cli/options.hpp"
#include "model/config.hpp"
#include "parallel/schedule.hpp"
#include "plan/memory.hpp"

using namespace tetra::test;

TEST_CASE("bounds: the model's sizes are checked against tetra's stated limits") {
  tetra::ModelConfig c;
  c.seq_len = tetra::kMaxSeqLen;
  CHECK_NOTHROW(c.validate());
  c.seq_len = tetra::kMaxSeqLen + 1;
  CHECK(error_of([&] { c.validate(); }) ==
        "`model.seq_len` 16777217 is more than tetra's limit of 16777216 tokens per sequence");
  c = tetra::ModelConfig{};
  c.layers = tetra::kMaxLayers + 1;
  CHECK(error_of([&] { c.validate(); }).find("`model.layers` 65537 is more than tetra's limit") ==
        0);

  expect_refusal(tetra_bin() + " plan --seq-len 2147483647", "--seq-len 2147483647 is more than");
  expect_refusal(tetra_bin() + " train --seq-len 2147483647 --steps 1",
                 "--seq-len 2147483647 is more");
  expect_refusal(tetra_bin() + " plan --layers 1000000", "--layers 1000000 is more than");
}

TEST_CASE("bounds: a schedule's length is bounded before it is listed") {
  using K = tetra::ScheduleKind;
  CHECK_NOTHROW(tetra::check_schedule(K::OneFOneB, 4, 1, int(tetra::kMaxPasses)));
  CHECK(error_of([] {
          tetra::check_schedule(K::OneFOneB, 4, 1, int(tetra::kMaxPasses) + 1);
        }).find("passes per stage and step, more than tetra's limit of 1048576") !=
        std::string::npos);
  CHECK(error_of([] {
          tetra::check_schedule(K::Interleaved, 4, 4096, 4096);
        }).find("16777216 passes") != std::string::npos);
  // 2^31 - 1 micro-batches would list 2^32 actions per stage.
  expect_refusal(tetra_bin() + " plan --global-batch 2147483647 --micro-batch 1",
                 "passes per stage");
  expect_refusal(tetra_bin() + " train --global-batch 2097152 --micro-batch 1 --steps 1",
                 "passes per stage");
}

TEST_CASE("bounds: the planner's cost does not grow with the square of the pipeline") {
  // 8192 stages of 8192 micro-batches: each stage's schedule has 16384 actions; walking all
  // of them for every stage, 13 times over, took 64 s (now about 2 s on an idle 2-core
  // machine; the limit leaves room for a loaded one).
  const Spawned r =
      spawn(tetra_bin() + " plan --pp 8192 --layers 8192 --global-batch 8192 --dim 256", 60);
  CAPTURE(r.err);
  CHECK(r.status == 0);
  CHECK(r.out.find("memory per rank") != std::string::npos);
  CHECK(r.out.find("pp rank 8191 holds layers 8191-8191+head") != std::string::npos);
}

TEST_CASE("bounds: the fullest stage is found among three, as walking every stage finds it") {
  // Remainder blocks, every schedule, ZeRO stages, recompute, bf16, few and many micro-batches.
  int layouts = 0;
  for (const char* sched : {"gpipe", "1f1b", "interleaved"})
    for (const int pp : {2, 3, 4, 7})
      for (const int vpp : {1, 2})
        for (const int layers : {pp * vpp, pp * vpp + 1, 2 * pp * vpp + pp - 1, 29})
          for (const int batch : {pp, 2 * pp, 4 * pp})
            for (const char* extra : {"--zero 1", "--zero 3 --recompute full --dtype bf16"}) {
              if (vpp > 1 && std::string(sched) != "interleaved") continue;
              tetra::TrainConfig o = tetra::parse_command_line({"plan",
                                                                "--pp",
                                                                std::to_string(pp),
                                                                "--vpp",
                                                                std::to_string(vpp),
                                                                "--layers",
                                                                std::to_string(layers),
                                                                "--schedule",
                                                                sched,
                                                                "--global-batch",
                                                                std::to_string(batch),
                                                                "--micro-batch",
                                                                "1",
                                                                "--dim",
                                                                "64",
                                                                "--heads",
                                                                "4",
                                                                "--kv-heads",
                                                                "2",
                                                                "--ffn-dim",
                                                                "96",
                                                                "--seq-len",
                                                                "16",
                                                                "--vocab",
                                                                "1000"})
                                         .plan.train;
              const std::string flags = extra;
              o.optimizer.zero = flags.find("--zero 3") != std::string::npos ? 3 : 1;
              o.optimizer.recompute = flags.find("recompute") != std::string::npos;
              o.device.dtype = flags.find("bf16") != std::string::npos ? "bf16" : "fp32";
              const tetra::plan::Setup s = tetra::plan::make_setup(o.run_spec(), o.model);
              double most = 0;
              for (int stage = 0; stage < pp; ++stage)
                most = std::max(most, tetra::plan::stage_memory(s, stage).peak());
              CAPTURE(sched);
              CAPTURE(pp);
              CAPTURE(vpp);
              CAPTURE(layers);
              CAPTURE(batch);
              CAPTURE(extra);
              CHECK(tetra::plan::peak_memory(s).memory.peak() == most);
              ++layouts;
            }
  CHECK(layouts > 200);
}

TEST_CASE("bounds: tetra generate bounds the tokens it keeps a cache for") {
  TempDir d;
  REQUIRE(spawn(tetra_bin() +
                " train --dim 32 --layers 1 --heads 2 --kv-heads 1 --ffn-dim 64 --seq-len 16"
                " --global-batch 2 --steps 1 --peak-tflops 1 --export " +
                (d / "m"))
              .status == 0);
  expect_refusal(
      tetra_bin() + " generate --init-from " + (d / "m") + " --prompt hi --tokens 2000000000",
      "--tokens 2000000000");
}
