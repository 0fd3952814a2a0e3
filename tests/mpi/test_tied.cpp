// Tied embeddings (--tie-embeddings): one matrix for the embedding and the LM head. At PP 1
// one rank uses it at both ends; beyond, the first stage holds it and the last a copy, and the
// embedding group sums their gradients before the update; under zb-v's V placement rank 0 holds
// both ends and there is no embedding group. TP x PP x DP with ZeRO-3 (and PP 2 interleaved, at
// ZeRO-2, and TP x PP x DP zb-v at ZeRO-3) against one rank, in fp32 and bf16: losses, step-0
// gradients, final
// weights and every step's gradient norm, which counts the matrix once; each group's bytes
// are the plan's (run_on), the embedding group's all-reduce among them; the checkpoint holds
// the matrix once, and no lm_head.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <set>
#include <string>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/manifest.hpp"
#include "checkpoint/safetensors.hpp"
#include "layout_check.hpp"

using namespace tetra;
using namespace tetra::test;

TEST_CASE("tied embeddings: TP 2 x PP 2 x DP 2 ZeRO-3, PP 2 interleaved and zb-v equal one rank") {
  char templ[] = "/tmp/tetra_tied_XXXXXX";
  if (world_rank() == 0) REQUIRE(::mkdtemp(templ) != nullptr);
  MPI_Bcast(templ, sizeof templ, MPI_CHAR, 0, MPI_COMM_WORLD);
  const std::string dir = templ;
  for (const char* dtype : {"fp32", "bf16"}) {
    TrainConfig one = tiny_model(8);
    one.model.tie_embeddings = true;
    one.device.dtype = dtype;
    const RunResult ref = run_on(one, 4);
    if (world_rank() == 0) {
      // One matrix: no lm_head among the model's tensors.
      CHECK(ref.weights.count("lm_head.weight") == 0);
      CHECK(ref.weights.count("model.embed_tokens.weight") == 1);
    }
    TrainConfig zero3 = laid_out(one, 2, 1, 2, 2);
    zero3.optimizer.zero = 3;
    TrainConfig interleaved = laid_out(one, 1, 1, 2, 1);
    interleaved.optimizer.zero = 2;
    interleaved.layout.schedule = "interleaved";
    interleaved.layout.vpp = 2;
    TrainConfig v = zero3;
    v.layout.schedule = "zb-v";
    v.layout.vpp = 2;
    for (const TrainConfig& c : {zero3, interleaved, v}) {
      const RunResult run = run_on(c, 4);
      if (world_rank() != 0) continue;
      const std::string name = describe(c) + ", tied";
      CAPTURE(name);
      const std::string diff = compare(ref, run, match_bounds(dtype));
      CHECK_MESSAGE(diff.empty(), diff);
      // The gradient norm is every parameter's once: the last stage's copy is not counted
      // (counted twice, the norm would grow by about the embedding's share of it, far past
      // fp32's 1e-5). Within the gradients' bound, relative to the norm.
      for (size_t s = 0; s < run.steps.size(); ++s)
        CHECK(std::abs(run.steps[s].grad_norm - ref.steps[s].grad_norm) <=
              match_bounds(dtype).grad * ref.steps[s].grad_norm);
      // The embedding group summed the two stages' gradients, as the plan counts it; as a V
      // one rank holds both ends, and no group is made.
      CHECK(run.steps[0].comm.count("embed") == (c.layout.schedule == "zb-v" ? 0 : 1));
    }
  }
  // The ZeRO-3 layout's checkpoint, as tetra train writes it on these 8 ranks: the matrix once
  // (its segments cover its elements exactly, the first stage's), and no lm_head.weight.
  TrainConfig c = laid_out(tiny_model(8), 2, 1, 2, 2);
  c.model.tie_embeddings = true;
  c.optimizer.zero = 3;
  c.optimizer.steps = 1;
  c.checkpoint.ckpt_dir = dir;
  resolve(c);
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  REQUIRE(world == 8);
  Trainer(c, MPI_COMM_WORLD).run();
  if (world_rank() == 0) {
    int64_t stored = 0;
    std::set<std::string> names;
    for (int r = 0; r < world; ++r)
      for (const ckpt::SegmentRange& g :
           ckpt::read_segments(st::Reader(dir + "/step_00000001/" + ckpt::shard_file_name(r)))) {
        names.insert(g.name);
        if (g.name == "model.embed_tokens.weight") stored += g.end - g.begin;
      }
    const ModelConfig& m = c.model;
    CHECK(stored == m.rows() * m.dim);
    CHECK(names.count("lm_head.weight") == 0);
    CHECK(ckpt::Reader(dir + "/step_00000001").coverage_problem() == "");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::error_code ec;
  if (world_rank() == 0) std::filesystem::remove_all(dir, ec);
}
