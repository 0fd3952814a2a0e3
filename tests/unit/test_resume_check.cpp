// Resume logic on its own, in one process and without a world communicator
// (checkpoint/resume.hpp): the settings check on recorded configurations (what may change,
// what --allow-change accepts, --min-lr following --lr, a version 2 checkpoint's record), and
// restore() of a TP 2 x DP 2 checkpoint into one rank's units at other TP layouts and ZeRO
// stages.
#include <doctest/doctest.h>

#include "../support/checkpoint_helpers.hpp"
#include "../support/test_util.hpp"
#include "checkpoint/manifest.hpp"
#include "checkpoint/resume.hpp"
#include "parallel/mpi_comm.hpp"
#include "train/rank_parts.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

TrainConfig base() {
  TrainConfig c;
  c.model.layers = 2;
  c.optimizer.steps = 8;
  resolve(c);
  return c;
}

// The record of `c`'s checkpoints, as the trainer makes it, at step `step`.
ckpt::RunState saved(TrainConfig c, int64_t step = 4) {
  resolve(c);
  ckpt::RunState s = record_of(c, c.model, Layout{1, 1, 1, 2});
  s.step = s.sampler_step = step;
  s.tokens_seen = step * c.batch.global_batch * c.model.seq_len;
  return s;
}

// The refusal to resume `was` by a run of `now`, or "" when it may, as tetra words it to a
// user of flags (settings::worded).
std::string refusal(const ckpt::RunState& was, TrainConfig now,
                    std::set<std::string> allowed = {}) {
  resolve(now);
  const ckpt::RunState record = record_of(now, now.model, Layout{2, 1, 1, 1});
  return settings::worded(error_of([&] {
    ckpt::check_resumable(was, record, allowed, now.was_given("optimizer.min_lr"), "ck/step_4");
  }));
}

}  // namespace

TEST_CASE("resume check: what may change, and what --allow-change accepts") {
  const ckpt::RunState was = saved(base());
  CHECK(refusal(was, base()) == "");

  // Free: the layout, the micro-batch, the ZeRO stage, recomputation, validation, the
  // device, the communicators, checkpoints and outputs.
  TrainConfig free = base();
  free.layout.tp = 2;
  free.layout.sp = true;
  free.batch.micro_batch = 1;
  free.optimizer.zero = 3;
  free.optimizer.recompute = true;
  free.data.eval_batches = 2;
  free.device.comm = "mpi";
  free.checkpoint.keep = 1;
  free.output.trace_steps = 2;
  CHECK(refusal(was, free) == "");

  TrainConfig lr = base();
  lr.optimizer.lr = 0.001;
  lr.optimizer.min_lr = -1;  // a default --min-lr follows --lr: its change is lr's
  CHECK(refusal(was, lr) ==
        "checkpoint 'ck/step_4' comes from a run with other settings (--lr 0.003 there, 0.001 "
        "here); pass --allow-change lr to continue it with this run's");
  CHECK(refusal(was, lr, {"lr"}) == "");

  // A given --min-lr is a setting of its own; all differences in one message, in
  // --allow-change's order.
  TrainConfig two = base();
  two.optimizer.min_lr = 0.0001;
  two.given.insert("optimizer.min_lr");
  two.optimizer.clip = 2;
  two.device.dtype = "bf16";
  CHECK(refusal(was, two) ==
        "checkpoint 'ck/step_4' comes from a run with other settings (--min-lr "
        "0.00030000000000000003 "
        "there, 0.0001 here; --clip 1.0 there, 2.0 here; --dtype \"fp32\" there, \"bf16\" here); "
        "pass "
        "--allow-change min-lr,clip,dtype to continue it with this run's");
  CHECK(refusal(was, two, {"min-lr", "clip", "dtype"}) == "");

  // Fixed: the seed, the global batch, the model; a step past --steps.
  TrainConfig seed = base();
  seed.optimizer.seed = 7;
  CHECK(refusal(was, seed, {"lr", "steps"}) ==
        "checkpoint 'ck/step_4' was written with --seed 1234; this run has 7, which a resumed "
        "run cannot change");
  TrainConfig batch = base();
  batch.batch.global_batch = 16;
  CHECK(refusal(was, batch).find("was written with --global-batch 8; this run has 16") !=
        std::string::npos);
  TrainConfig model = base();
  model.model.dim = 64;
  CHECK(refusal(was, model).find("checkpoint 'ck/step_4' holds another model (layers 2, dim 128") !=
        std::string::npos);
  TrainConfig fewer = base();
  fewer.optimizer.steps = 3;
  CHECK(refusal(was, fewer, {"steps"}) ==
        "checkpoint 'ck/step_4' is at step 4, past --steps 3: nothing is left to train; pass a "
        "larger --steps with --allow-change steps, or --resume never to start over");
}

TEST_CASE("resume check: a version 2 checkpoint's settings, and settings it does not record") {
  // What a version 2 manifest held: its run settings by --allow-change name, without dtype
  // (as written before tetra recorded it).
  const ckpt::RunState v3 = saved(base());
  json m =
      ckpt::manifest_json(v3, {{"rank_00000.safetensors", 1, 0}, {"rank_00001.safetensors", 1, 0}});
  m["version"] = 2;
  const json& o = v3.config["optimizer"];
  m["run"] = {{"data", "synthetic"},
              {"lr", o["lr"]},
              {"min-lr", o["min_lr"]},
              {"warmup", o["warmup"]},
              {"steps", o["steps"]},
              {"clip", o["clip"]},
              {"weight-decay", o["weight_decay"]}};
  m["layout"]["zero"] = 1;
  m.erase("config");
  TempDir d;
  const std::string dir = d / "step_00000004";
  std::filesystem::create_directories(dir);
  m.erase("manifest_checksum");
  write_manifest(dir + "/manifest.json", m);
  ckpt::RunState was;
  const std::string problem = error_of([&] { was = ckpt::read_manifest(dir).state; });
  REQUIRE(problem == "");
  CHECK(was.config["optimizer"]["min_lr"] == o["min_lr"]);
  CHECK(was.config["optimizer"]["seed"] == 1234);
  CHECK(was.config["optimizer"]["zero"] == 1);
  CHECK(was.config["batch"]["global_batch"] == 8);
  CHECK(!was.config.contains("device"));
  // It resumes with the same settings but for the one it does not record, which differs
  // unless allowed; keys it never recorded that --allow-change cannot name are not compared.
  CHECK(refusal(was, base()) ==
        "checkpoint 'ck/step_4' comes from a run with other settings (--dtype \"not recorded\" "
        "there, \"fp32\" here); pass --allow-change dtype to continue it with this run's");
  CHECK(refusal(was, base(), {"dtype"}) == "");
  TrainConfig lr = base();
  lr.optimizer.lr = 0.002;
  CHECK(refusal(was, lr, {"dtype"}).find("(--lr 0.003 there, 0.002 here)") != std::string::npos);
}

TEST_CASE("resume check: restore() cuts a TP 2 x DP 2 checkpoint for other layouts") {
  TempDir tmp;
  const ModelConfig cfg = checkpoint_model();
  const Weights w = make_weights(cfg, 3);
  const std::string path = save_tp2_dp2(tmp / "ck", state_at(2, cfg), w, 0);
  const ckpt::Reader r(path);
  auto be = make_cpu_backend(1);
  auto dp_cp = make_mpi_comm(MPI_COMM_SELF, "dp_cp");
  for (const int tp : {1, 2}) {
    for (int tp_rank = 0; tp_rank < tp; ++tp_rank) {
      for (const int zero : {1, 3}) {
        CAPTURE(tp);
        CAPTURE(tp_rank);
        CAPTURE(zero);
        ZeroParams params(*be, *dp_cp, make_units(cfg, tp, tp_rank), zero);
        ckpt::restore(r, params, tp_rank);
        // One rank holds the whole of each unit: its slices are the TP-local tensors.
        int64_t checked = 0;
        HostBuffer host;
        const std::vector<ZeroParams::OwnedSlice> slices = params.owned_slices(host);
        be->copies_landed();
        for (const ZeroParams::OwnedSlice& s : slices) {
          const ParamInfo& p = *s.param;
          for (int64_t i = s.begin; i < s.end; ++i, ++checked) {
            const size_t g = size_t(p.global_index(i, tp_rank)), at = size_t(i - s.begin);
            REQUIRE(s.weights[at] == w.param.at(p.name)[g]);
            REQUIRE(s.adam_m[at] == w.adam_m.at(p.name)[g]);
            REQUIRE(s.adam_v[at] == w.adam_v.at(p.name)[g]);
          }
        }
        int64_t local = 0;
        for (const UnitSpec& u : make_units(cfg, tp, tp_rank)) local += u.numel;
        CHECK(checked == local);
      }
    }
  }
}
