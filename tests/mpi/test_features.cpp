// The features that touch the step, crossed pairwise with the dtype and one layout of each
// class: every pair of values (a layout and a feature on or off, bf16 and a feature, two
// features) appears in some run, and every run trains through Trainer::run, the loop tetra
// train runs, against one rank with the same features. A feature that works alone can break
// in combination.
//
// Features: validation (--val-split, --eval-every), --recompute full, --sp (where TP > 1),
// --sample-every, checkpoint and resume (the run is checkpointed every 2 steps and resumed
// from its step-2 checkpoint, which must end bitwise where it ended), --init-from (a model
// directory exported by one rank), --tie-embeddings (one matrix for the embedding and the
// head; an --init-from run then starts from a tied model).
#include <doctest/doctest.h>
#include <mpi.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "layout_check.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

constexpr int kSteps = 4;

enum class LayoutClass {
  DpZero1,
  DpZero2,
  DpZero3,
  Tp,
  PpGpipe,
  Pp1f1b,
  PpInterleaved,
  Cp,
  FourD,
  PpZbH1,
  PpZbV
};
constexpr LayoutClass kClasses[] = {
    LayoutClass::DpZero1, LayoutClass::DpZero2, LayoutClass::DpZero3,       LayoutClass::Tp,
    LayoutClass::PpGpipe, LayoutClass::Pp1f1b,  LayoutClass::PpInterleaved, LayoutClass::Cp,
    LayoutClass::FourD,   LayoutClass::PpZbH1,  LayoutClass::PpZbV};
constexpr int kLayoutClasses = int(std::size(kClasses));

// One run: a layout class, the dtype and each feature on or off.
struct Run {
  LayoutClass layout;
  bool bf16, validation, recompute, sp, sample, resume, init_from, tie;
};

// A covering array of strength 2 over the 11 layout classes, 2 dtypes and 7 on/off features,
// with --sp only where TP > 1: 22 runs, the least any such array can have (11 x 2). The test
// checks its coverage below, so an edit cannot drop a pair unnoticed. The zero-bubble classes'
// two runs each are each other's complement, every feature off and (but --sp) every one on.
// clang-format off
//                                bf16   val    recomp sp     sample resume init   tie
const Run kRuns[] = {
    {LayoutClass::DpZero1,        false, false, false, false, false, false, false, false},
    {LayoutClass::DpZero2,        true,  true,  true,  false, true,  true,  true,  false},
    {LayoutClass::Tp,             true,  false, false, true,  false, true,  true,  true },
    {LayoutClass::FourD,          false, true,  true,  true,  true,  false, false, false},
    {LayoutClass::DpZero3,        true,  false, false, false, true,  false, false, false},
    {LayoutClass::PpGpipe,        false, false, true,  false, false, false, true,  false},
    {LayoutClass::Pp1f1b,         false, true,  false, false, false, true,  false, false},
    {LayoutClass::PpInterleaved,  false, false, false, false, false, false, false, false},
    {LayoutClass::Cp,             false, false, false, false, false, false, false, false},
    {LayoutClass::FourD,          true,  false, false, false, false, true,  true,  true },
    {LayoutClass::Tp,             false, true,  true,  false, true,  false, false, false},
    {LayoutClass::DpZero2,        false, false, false, false, false, false, false, true },
    {LayoutClass::PpGpipe,        true,  true,  false, false, true,  true,  false, true },
    {LayoutClass::Pp1f1b,         true,  false, true,  false, true,  false, true,  true },
    {LayoutClass::DpZero3,        false, true,  true,  false, false, true,  true,  true },
    {LayoutClass::DpZero1,        true,  true,  true,  false, true,  true,  true,  true },
    {LayoutClass::PpInterleaved,  true,  true,  true,  false, true,  true,  true,  true },
    {LayoutClass::Cp,             true,  true,  true,  false, true,  true,  true,  true },
    {LayoutClass::PpZbH1,         false, false, false, false, false, false, false, false},
    {LayoutClass::PpZbH1,         true,  true,  true,  false, true,  true,  true,  true },
    {LayoutClass::PpZbV,          false, false, false, false, false, false, false, false},
    {LayoutClass::PpZbV,          true,  true,  true,  false, true,  true,  true,  true },
};
// clang-format on

bool has_tp(LayoutClass l) {
  return l == LayoutClass::Tp || l == LayoutClass::FourD;
}

// The run's values of its 9 factors, the layout first.
std::vector<int> factors(const Run& r) {
  return {int(r.layout), r.bf16,   r.validation, r.recompute, r.sp,
          r.sample,      r.resume, r.init_from,  r.tie};
}

// The pairs (factor a = value x, factor b = value y) no run covers, among those allowed.
std::vector<std::string> uncovered() {
  const int levels[] = {kLayoutClasses, 2, 2, 2, 2, 2, 2, 2, 2};
  constexpr int kFactors = 9;
  std::set<std::tuple<int, int, int, int>> seen;
  for (const Run& r : kRuns) {
    const std::vector<int> f = factors(r);
    for (int a = 0; a < kFactors; ++a)
      for (int b = a + 1; b < kFactors; ++b) seen.insert({a, f[a], b, f[b]});
  }
  std::vector<std::string> missing;
  for (int a = 0; a < kFactors; ++a)
    for (int b = a + 1; b < kFactors; ++b)
      for (int x = 0; x < levels[a]; ++x)
        for (int y = 0; y < levels[b]; ++y) {
          const bool allowed = !(a == 0 && b == 4 && y == 1 && !has_tp(kClasses[x]));
          if (allowed && !seen.count({a, x, b, y})) {
            std::ostringstream pair;
            pair << a << "=" << x << ", " << b << "=" << y;
            missing.push_back(pair.str());
          }
        }
  return missing;
}

// A directory every rank of the world names the same, removed at scope end.
struct SharedDir {
  std::string path;
  SharedDir() {
    char templ[] = "/tmp/tetra_features_XXXXXX";
    if (world_rank() == 0) REQUIRE(::mkdtemp(templ) != nullptr);
    MPI_Bcast(templ, sizeof templ, MPI_CHAR, 0, MPI_COMM_WORLD);
    path = templ;
  }
  ~SharedDir() {
    MPI_Barrier(MPI_COMM_WORLD);
    std::error_code ec;
    if (world_rank() == 0) std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

TrainConfig laid_out(TrainConfig c, LayoutClass l) {
  switch (l) {
    case LayoutClass::DpZero1:
    case LayoutClass::DpZero2:
    case LayoutClass::DpZero3:
      c = tetra::test::laid_out(c, 1, 1, 1, 2);
      c.optimizer.zero = 1 + int(l) - int(LayoutClass::DpZero1);
      return c;
    case LayoutClass::Tp:
      return tetra::test::laid_out(c, 2, 1, 1, 1);
    case LayoutClass::PpGpipe:
      c = tetra::test::laid_out(c, 1, 1, 2, 1);
      c.layout.schedule = "gpipe";
      return c;
    case LayoutClass::Pp1f1b:
      return tetra::test::laid_out(c, 1, 1, 2, 1);
    case LayoutClass::PpInterleaved:
      c = tetra::test::laid_out(c, 1, 1, 2, 1);
      c.layout.schedule = "interleaved";
      c.layout.vpp = 2;
      return c;
    case LayoutClass::Cp:
      return tetra::test::laid_out(c, 1, 2, 1, 1);
    case LayoutClass::FourD:
      c = tetra::test::laid_out(c, 2, 2, 2, 2);
      c.optimizer.zero = 2;
      return c;
    case LayoutClass::PpZbH1:
      c = tetra::test::laid_out(c, 1, 1, 2, 1);
      c.layout.schedule = "zb-h1";
      return c;
    case LayoutClass::PpZbV:  // 4 layers in 4 chunks: rank 0 holds layers 0 and 3
      c = tetra::test::laid_out(c, 1, 1, 2, 1);
      c.layout.schedule = "zb-v";
      c.layout.vpp = 2;
      return c;
  }
  return c;
}

// The features of r on the tiny model, on one rank; `model_dir` is the --init-from model (a
// tied one, for a tied run: the file's model is the one trained).
TrainConfig featured(const Run& r, const std::string& model_dir) {
  TrainConfig c = tiny_model(8);
  c.optimizer.steps = kSteps;
  c.model.tie_embeddings = r.tie;
  if (r.bf16) c.device.dtype = "bf16";
  if (r.validation) {
    c.data.val_split = 0.25;
    c.data.eval_every = 2;
    c.data.eval_batches = 2;
  }
  c.optimizer.recompute = r.recompute;
  if (r.sample) c.output.sample_every = 2;
  if (r.init_from) {
    c.model.init_from = model_dir + (r.tie ? "_tied" : "");
    c.optimizer.seed = 99;  // the file's weights, not the seed's, must be what trains
  }
  return c;
}

// What Trainer::run left: each step's training and validation loss from its --metrics file
// (rank 0), the final weights (rank 0) and the sample the run ends with.
struct Outcome {
  RunResult result;
  std::map<int64_t, double> val_loss;  // by step
  std::string sample;
};

Outcome train(TrainConfig c, int ranks, const std::string& metrics) {
  c.output.metrics = metrics;
  resolve(c);
  const int rank = world_rank();
  MPI_Comm sub;
  MPI_Comm_split(MPI_COMM_WORLD, rank < ranks ? 0 : MPI_UNDEFINED, rank, &sub);
  Outcome o;
  if (sub != MPI_COMM_NULL) {
    {
      Trainer t(c, sub);
      t.run();
      o.result.weights = t.full_weights();
      if (c.output.sample_every > 0) o.sample = t.sample();
    }
    MPI_Comm_free(&sub);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) return o;
  std::ifstream in(metrics);
  REQUIRE(in.good());
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json v;
    REQUIRE(parse_json(line, v).empty());
    o.result.losses.push_back(v.at("loss").get<double>());
    if (v.contains("val_loss"))
      o.val_loss[v.at("step").get<int64_t>()] = v["val_loss"].get<double>();
  }
  return o;
}

int ranks_of(const TrainConfig& c) {
  return c.layout.tp * c.layout.cp * c.layout.pp * std::max(1, c.layout.dp);
}

}  // namespace

TEST_CASE("features: the covering array covers every allowed pair") {
  const std::vector<std::string> missing = uncovered();
  std::string list;
  for (const std::string& m : missing) list += m + "; ";
  CHECK_MESSAGE(missing.empty(), "uncovered pairs (factor=value): ", list);
}

TEST_CASE("features x dtype x layout classes, pairwise, each against one rank") {
  SharedDir dir;
  // The --init-from models: one rank, 20 steps from another seed, exported as a directory;
  // untied and tied.
  for (const bool tie : {false, true}) {
    TrainConfig m = tiny_model(8);
    m.optimizer.steps = 20;
    m.optimizer.seed = 7;
    m.model.tie_embeddings = tie;
    m.output.export_ = dir / (tie ? "init_model_tied" : "init_model");
    train(m, 1, dir / (tie ? "init_tied.jsonl" : "init.jsonl"));
  }
  std::map<std::string, Outcome> references;  // by the features that change what one rank does
  int n = 0;
  for (const Run& r : kRuns) {
    const std::string name = "run" + std::to_string(n++);
    const TrainConfig one = featured(r, dir / "init_model");
    const std::string key = std::to_string(r.bf16) + std::to_string(r.validation) +
                            std::to_string(r.sample) + std::to_string(r.init_from) +
                            std::to_string(r.tie);
    if (!references.count(key)) references[key] = train(one, 1, dir / ("ref" + key + ".jsonl"));
    const Outcome& ref = references[key];

    TrainConfig c = laid_out(one, r.layout);
    c.layout.sp = r.sp;
    const int ranks = ranks_of(c);
    if (r.resume) {
      c.checkpoint.ckpt_dir = dir / (name + "_ckpt");
      c.checkpoint.ckpt_every = 2;
    }
    const Outcome run = train(c, ranks, dir / (name + ".jsonl"));
    Outcome resumed;
    if (r.resume) {
      TrainConfig again = c;
      again.checkpoint.resume = c.checkpoint.ckpt_dir + "/step_00000002";
      again.checkpoint.ckpt_dir = dir / (name + "_ckpt2");
      resumed = train(again, ranks, dir / (name + "_resumed.jsonl"));
    }
    if (world_rank() != 0) continue;

    const std::string what = describe(c) + (r.validation ? ", validation" : "") +
                             (r.sample ? ", samples" : "") + (r.resume ? ", resumed" : "") +
                             (r.init_from ? ", init-from" : "") + (r.tie ? ", tied" : "");
    CAPTURE(what);
    const Gaps bound = match_bounds(r.bf16 ? "bf16" : "fp32");
    REQUIRE(run.result.losses.size() == size_t(kSteps));
    const std::string diff = compare(ref.result, run.result, bound);
    CHECK_MESSAGE(diff.empty(), diff);
    if (r.validation) {
      // After steps 2 and 4 (--eval-every 2, and after the last).
      REQUIRE(run.val_loss.size() == 2);
      for (const auto& [step, loss] : ref.val_loss) {
        REQUIRE(run.val_loss.count(step) == 1);
        CHECK(std::abs(run.val_loss.at(step) - loss) <= bound.loss * loss);
      }
    }
    if (r.sample) CHECK(run.sample.find(" -> ") != std::string::npos);
    if (r.init_from) {
      // Started from the file: the first loss is the trained model's, well below the
      // ln(256) = 5.545 a fresh model from seed 99 would start at.
      CHECK(run.result.losses.front() < std::log(256.0) - 0.1);
    }
    if (r.resume) {
      // From its step-2 checkpoint the run redoes steps 2 and 3 to the same bits.
      REQUIRE(resumed.result.losses.size() == 2);
      CHECK(resumed.result.losses[0] == run.result.losses[2]);
      CHECK(resumed.result.losses[1] == run.result.losses[3]);
      for (const auto& [tensor, w] : run.result.weights) {
        CAPTURE(tensor);
        CHECK(resumed.result.weights.at(tensor) == w);
      }
    }
  }
}
