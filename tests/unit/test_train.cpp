// Single-rank training: determinism, recompute, the loss falling on synthetic data, and
// export -> --init-from round trips. Runs the Trainer in-process on MPI_COMM_SELF.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "../support/test_util.hpp"
#include "backend/fusions.hpp"
#include "checkpoint/safetensors.hpp"
#include "cli/options.hpp"
#include "data/dataset.hpp"
#include "train/trainer.hpp"

using namespace tetra;

namespace {

// The tiny model's flags, less those `extra` gives itself (a flag may be given only once).
TrainConfig tiny(std::vector<std::string> extra = {}) {
  const std::vector<std::string> model = {
      "--layers",  "2",  "--dim",         "32", "--heads",        "4", "--kv-heads", "2",
      "--ffn-dim", "64", "--seq-len",     "16", "--global-batch", "4", "--steps",    "6",
      "--warmup",  "2",  "--peak-tflops", "1"};
  std::vector<std::string> args;
  for (size_t i = 0; i + 1 < model.size(); i += 2)
    if (std::find(extra.begin(), extra.end(), model[i]) == extra.end())
      args.insert(args.end(), {model[i], model[i + 1]});
  args.insert(args.end(), extra.begin(), extra.end());
  return parse_train_options(args);
}

struct Run {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> weights;
};

Run train(const TrainConfig& o) {
  Trainer t(o, MPI_COMM_SELF);
  Run r;
  for (int64_t s = 0; s < o.optimizer.steps; ++s) r.losses.push_back(t.step().loss);
  r.weights = t.full_weights();
  return r;
}

}  // namespace

TEST_CASE("train: two runs with the same seed agree bit for bit") {
  const Run a = train(tiny()), b = train(tiny());
  CHECK(a.losses == b.losses);
  CHECK(a.weights == b.weights);
  const Run c = train(tiny({"--seed", "7"}));
  CHECK(c.losses != a.losses);
}

TEST_CASE("train: --recompute full gives the same losses and weights as none, bit for bit") {
  for (const char* mb : {"4", "1"}) {
    const Run none = train(tiny({"--micro-batch", mb}));
    const Run full = train(tiny({"--micro-batch", mb, "--recompute", "full"}));
    CHECK(none.losses == full.losses);
    CHECK(none.weights == full.weights);
  }
}

TEST_CASE("train: the norm_residual and classifier fusions (TP 1) against the plain path") {
  // norm_residual is the same fp32 arithmetic: bit for bit. The classifier's online softmax
  // rounds the sums of exponentials in another order (within 1e-5, test_fused_ops.cpp); in bf16
  // both change roundings of bf16 values, which six steps carry to 7e-5 of the loss (measured).
  set_unfused("norm_residual,classifier");
  const Run plain = train(tiny()), plain_bf16 = train(tiny({"--dtype", "bf16"}));
  set_unfused("classifier");
  const Run norm = train(tiny());
  set_unfused("");
  const Run both = train(tiny()), both_bf16 = train(tiny({"--dtype", "bf16"}));
  CHECK(norm.losses == plain.losses);
  CHECK(norm.weights == plain.weights);
  REQUIRE(both.losses.size() == plain.losses.size());
  double fp32_gap = 0, bf16_gap = 0;
  for (size_t i = 0; i < plain.losses.size(); ++i) {
    CAPTURE(i);
    CHECK(both.losses[i] == doctest::Approx(plain.losses[i]).epsilon(1e-5));
    CHECK(both_bf16.losses[i] == doctest::Approx(plain_bf16.losses[i]).epsilon(1e-3));
    fp32_gap = std::max(fp32_gap, std::abs(both.losses[i] / plain.losses[i] - 1));
    bf16_gap = std::max(bf16_gap, std::abs(both_bf16.losses[i] / plain_bf16.losses[i] - 1));
  }
  MESSAGE("fused against plain, largest relative loss gap: fp32 ", fp32_gap, ", bf16 ", bf16_gap);
}

TEST_CASE("train: micro-batches accumulate to the same step as one batch") {
  const Run one = train(tiny({"--micro-batch", "4"}));
  const Run four = train(tiny({"--micro-batch", "1"}));
  REQUIRE(one.losses.size() == four.losses.size());
  for (size_t i = 0; i < one.losses.size(); ++i)
    CHECK(four.losses[i] == doctest::Approx(one.losses[i]).epsilon(1e-5));
}

TEST_CASE("train: the loss falls from ln(vocab) towards the synthetic entropy floor") {
  // The demo's model and data (the defaults), fewer steps than the demo's 200.
  TrainConfig o = parse_train_options({"--steps", "120", "--peak-tflops", "1"});
  Trainer t(o, MPI_COMM_SELF);
  double first = 0, last = 0;
  for (int64_t s = 0; s < o.optimizer.steps; ++s) {
    const double loss = t.step().loss;
    if (s == 0) first = loss;
    if (s >= o.optimizer.steps - 10) last += loss / 10;
  }
  const double ln_vocab = std::log(256.0), floor = 1.75 * std::log(2.0);
  MESSAGE("first loss " << first << ", mean of last 10 " << last << ", floor " << floor);
  CHECK(first == doctest::Approx(ln_vocab).epsilon(0.05));
  CHECK(last < floor + 0.6);  // well below ln(256) = 5.55, most of the way to 1.21
}

TEST_CASE("train: export then --init-from reproduces the weights and the step-0 loss") {
  const tetra::test::TempDir tmp;
  const std::string path = tmp / "export.safetensors";
  const std::vector<std::string> shape_free = {"--seq-len",     "16", "--global-batch", "4",
                                               "--steps",       "6",  "--warmup",       "2",
                                               "--peak-tflops", "1"};
  auto init_from = [&] {
    std::vector<std::string> args = {"--init-from", path};
    args.insert(args.end(), shape_free.begin(), shape_free.end());
    return parse_train_options(args);
  };

  // Exported at step 0: the reloaded run starts from the same weights on the same data.
  Trainer a(tiny(), MPI_COMM_SELF);
  a.export_weights(path);
  st::Reader file(path);
  CHECK(file.info("model.layers.1.mlp.down_proj.weight").shape == std::vector<int64_t>{32, 64});
  CHECK(file.info("lm_head.weight").shape == std::vector<int64_t>{256, 32});
  CHECK(file.metadata().at("heads") == "4");
  Trainer b(init_from(), MPI_COMM_SELF);
  CHECK(b.model().layers == 2);
  CHECK(b.model().dim == 32);
  CHECK(b.model().kv_heads == 2);
  CHECK(b.model().ffn_dim == 64);
  CHECK(b.step().loss == a.step().loss);

  // Trained weights survive the round trip bit for bit.
  for (int i = 0; i < 2; ++i) a.step();
  a.export_weights(path);
  Trainer c(init_from(), MPI_COMM_SELF);
  CHECK(c.full_weights() == a.full_weights());
}

TEST_CASE("train: text files and llm.c token shards feed the same trainer") {
  // A repetitive text: the loss must fall within a few steps.
  const tetra::test::TempDir tmp;
  const std::string text = tmp / "corpus.txt", bin = tmp / "tokens.bin";
  {
    std::ofstream f(text);
    for (int i = 0; i < 200; ++i) f << "the quick brown fox jumps over the lazy dog. ";
  }
  std::vector<uint32_t> tokens;
  for (int i = 0; i < 4000; ++i) tokens.push_back(uint32_t((i * 7) % 300));
  data::write_bin_shard(bin, tokens);
  struct Case {
    std::vector<std::string> args;
  };
  for (const Case& c : {Case{{"--data", text}}, Case{{"--data", bin, "--vocab", "300"}}}) {
    CAPTURE(c.args[1]);
    std::vector<std::string> args = c.args;
    args.insert(args.end(), {"--steps", "12", "--lr", "1e-2"});
    Trainer t(tiny(args), MPI_COMM_SELF);
    const double first = t.step().loss;
    double last = first;
    for (int s = 1; s < 12; ++s) last = t.step().loss;
    CHECK(std::isfinite(last));
    CHECK(last < first - 0.5);
  }
}

TEST_CASE("train: --inject-failure slow=MS makes a straggler, on the first attempt only") {
  auto step_ms = [](const char* restart) {
    if (restart) ::setenv("TETRA_RESTART", restart, 1);
    Trainer t(tiny({"--inject-failure", "0@2:slow=150"}), MPI_COMM_SELF);
    std::vector<double> ms;
    for (int s = 0; s < 4; ++s) ms.push_back(t.step().step_ms);
    ::unsetenv("TETRA_RESTART");
    return ms;
  };
  const std::vector<double> first = step_ms(nullptr), restarted = step_ms("1");
  CHECK(first[1] < 150);
  CHECK(first[2] >= 150);
  CHECK(first[3] >= 150);
  CHECK(restarted[2] < 150);
  CHECK(restarted[3] < 150);
}

TEST_CASE("train: one rank's groups are groups of one: said at start-up, nothing sent") {
  const TrainConfig o = tiny();
  Trainer t(o, MPI_COMM_SELF);
  CHECK(t.startup_report().find("; communicators: tp self, cp self, pp self, dp_cp self\n") !=
        std::string::npos);
  const StepResult r = t.step();
  CHECK(r.comm.size() == 5);  // tp, cp, pp, dp_cp and world
  for (const auto& [group, s] : r.comm) {
    CAPTURE(group);
    CHECK(s.calls == 0);
    CHECK(s.bytes == 0);
  }
}

TEST_CASE("train: the start-up report says which fusions run") {
  set_unfused("");
  CHECK(Trainer(tiny(), MPI_COMM_SELF).startup_report().find("\n  fusions: all on\n") !=
        std::string::npos);
  set_unfused("classifier");
  CHECK(Trainer(tiny(), MPI_COMM_SELF)
            .startup_report()
            .find("\n  fusions: on except classifier (TETRA_UNFUSED)\n") != std::string::npos);
  set_unfused("");
}
