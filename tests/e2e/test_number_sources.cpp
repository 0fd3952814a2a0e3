// Every number bounded before it is used, from every source (issue 38, class 2): tetra
// sweep's --ranks (2147483647 crashed on SIGFPE, 2147483646 took 71 s of trial division);
// a config.json's num_hidden_layers of 2147483647 (the model's tensors were listed, 15 GB,
// before the 65,536 limit was checked) for every command that reads one (train, plan,
// generate); the model's limits as flags of every command that takes them and as TOML keys.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"
#include "plan/layouts.hpp"
#include "train/config.hpp"

using namespace tetra::test;

TEST_CASE("number sources: tetra sweep's --ranks is bounded; its layouts come from divisors") {
  for (const char* ranks : {"2147483647", "2147483646", "16777217", "0"})
    expect_refusal(
        tetra_bin() + " sweep --dry-run --ranks " + std::string(ranks) + tiny_model_flags(),
        "--ranks must be from 1 to 16777216, the ranks tetra plans (got " + std::string(ranks) +
            ")");
  // The largest prime the limit allows: 4 factorizations, found by trial division up to its
  // square root (4096 candidates), not up to itself.
  tetra::TrainConfig c;
  const tetra::plan::Layouts all =
      tetra::plan::enumerate_layouts(16777213, c.run_spec(), c.model, {});
  CHECK(all.valid.size() + all.skipped.size() == 4);
  // 12 = 2^2 3 as TP x CP x PP x DP: 2^2 splits over four factors in C(5, 3) = 10 ways, 3 in 4.
  const tetra::plan::Layouts twelve = tetra::plan::enumerate_layouts(12, c.run_spec(), c.model, {});
  CHECK(twelve.valid.size() + twelve.skipped.size() == 40);
}

TEST_CASE("number sources: a config.json past tetra's limits is refused before the model is made") {
  TempDir d;
  const std::string m = d / "m";
  REQUIRE(
      spawn(tetra_bin() + " train" + tiny_model_flags({.steps = 1}) + " --export " + m).status ==
      0);
  tetra::json config = parsed_json(slurp(m + "/config.json"));
  config["num_hidden_layers"] = 2147483647;
  std::ofstream(m + "/config.json", std::ios::trunc) << config.dump(2);
  const std::string why = "init model '" + m +
                          "': config.json's \"num_hidden_layers\" is 2147483647, more than "
                          "tetra's limit of 65536";
  expect_refusal(tetra_bin() + " train --steps 1 --init-from " + m, why);
  expect_refusal(tetra_bin() + " plan --init-from " + m, why);
  expect_refusal(tetra_bin() + " generate --prompt hi --init-from " + m, why);
}

TEST_CASE("number sources: the model's limits hold for flags and TOML keys of every command") {
  TempDir d;
  const std::string toml = d / "c.toml";
  std::ofstream(toml) << "[model]\nlayers = 2147483647\n";
  for (const char* command : {"train --steps 1", "plan", "sweep --dry-run --ranks 1"}) {
    CAPTURE(command);
    const std::string run = tetra_bin() + " " + command + " ";
    expect_refusal(run + "--layers 2147483647",
                   "--layers 2147483647 is more than tetra's limit of 65536 blocks");
    expect_refusal(run + "--seq-len 2147483647",
                   "--seq-len 2147483647 is more than tetra's limit of 16777216 tokens per "
                   "sequence");
    expect_refusal(run + "--vocab 2147483647",
                   "--vocab 2147483647 is more than tetra's limit of 16777216 tokens");
  }
  for (const char* command : {"train --steps 1", "plan"})
    expect_refusal(tetra_bin() + " " + command + " --config " + toml,
                   toml + ": model.layers 2147483647 is more than tetra's limit of 65536 blocks");
}
