// How messages name settings: the layers below cli/ name a setting by its key between
// backquotes ("`model.heads`"), never by its flag, and whoever prints a message words each one
// as the user gave it (settings::worded): its flag for the command line or a default, its key
// and the --config file for the file's (tetra's own words: tests/e2e/test_setting_words_run.cpp).
// And the settings' traits (util/settings.hpp), which the resume comparison, --allow-change and
// tetra sweep derive from.
#include <doctest/doctest.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../support/test_util.hpp"
#include "checkpoint/checkpoint.hpp"
#include "cli/options.hpp"

using namespace tetra::test;
using tetra::TrainConfig;
namespace settings = tetra::settings;

TEST_CASE("setting words: a setting is its flag from the command line, its key from a file") {
  CHECK(settings::worded("`model.heads` must be positive (got 0)") ==
        "--heads must be positive (got 0)");
  CHECK(settings::worded("`model.dim` 30 is not divisible by `model.heads` 4") ==
        "--dim 30 is not divisible by --heads 4");
  const settings::Origin file{"run.toml", {"model.heads"}};
  // One the file gave: its key, and the file before the whole message; the others by flag.
  CHECK(settings::worded("`model.dim` 30 is not divisible by `model.heads` 4", file) ==
        "run.toml: --dim 30 is not divisible by model.heads 4");
  CHECK(settings::worded("`model.dim` 30 is not divisible by `model.kv_heads` 4", file) ==
        "--dim 30 is not divisible by --kv-heads 4");
  // An origin without a file words every setting as a flag.
  CHECK(settings::worded("`model.heads` 3", {"", {"model.heads"}}) == "--heads 3");
  // Backquotes around anything else stay as they are.
  CHECK(settings::worded("a `quoted` word, `a.b.c`, `` and `model.heads`") ==
        "a `quoted` word, `a.b.c`, `` and --heads");
  CHECK(settings::worded("an unmatched ` quote") == "an unmatched ` quote");
}

TEST_CASE("setting words: --help words the settings a help text names as flags") {
  tetra::CommandLine cli;
  const std::unique_ptr<CLI::App> app = tetra::make_app(cli);
  const std::string help = app->get_subcommand("train")->help();
  CHECK(help.find('`') == std::string::npos);
  CHECK(help.find("validation data (as --data)") != std::string::npos);
  CHECK(help.find("newest checkpoint in --ckpt-dir that verifies") != std::string::npos);
}

TEST_CASE("setting traits: resume, --allow-change and sweep derive from the tables") {
  TrainConfig c;
  std::vector<std::string> changeable, compared;  // by the tables of every section
  std::set<std::string> swept;                    // flags
  tetra::for_each_section(c, [&](const auto&, const auto& table) {
    for (const auto& k : table.keys) {
      REQUIRE(k.resume.has_value());
      REQUIRE(k.swept.has_value());
      if (*k.resume == settings::Resume::Changeable) changeable.push_back(k.flag().substr(2));
      if (*k.resume != settings::Resume::Free) compared.push_back(table.name + "." + k.name);
      if (*k.swept) swept.insert(k.flag());
    }
  });
  // What --allow-change takes is every changeable setting, in the schema's order: the resume
  // comparison's tables (checkpoint/config.hpp) hold them all.
  CHECK(tetra::changeable() == changeable);
  CHECK(tetra::changeable_list() == "steps, lr, min-lr, warmup, weight-decay, clip, data, dtype");
  std::vector<std::string> in_compared_tables;
  tetra::for_each_compared_table([&](const auto& table) {
    for (const auto& k : table.keys)
      if (*k.resume != settings::Resume::Free)
        in_compared_tables.push_back(table.name + "." + k.name);
  });
  CHECK(in_compared_tables == compared);
  CHECK(compared == std::vector<std::string>{
                        "batch.global_batch", "optimizer.steps", "optimizer.lr", "optimizer.min_lr",
                        "optimizer.warmup", "optimizer.weight_decay", "optimizer.clip",
                        "optimizer.seed", "data.data", "data.data_field", "device.dtype"});

  // tetra sweep takes tetra train's swept settings as flags, and its own.
  tetra::CommandLine cli;
  const std::unique_ptr<CLI::App> app = tetra::make_app(cli);
  const std::set<std::string> own = {"--help",    "--ranks",    "--zero",          "--schedule",
                                     "--vpp",     "--sp",       "--gpu",           "--gpu-memory",
                                     "--nvlink",  "--network",  "--gpus-per-node", "--out",
                                     "--dry-run", "--launcher", "--run-timeout"};
  std::set<std::string> train_flags;
  for (const CLI::Option* opt : app->get_subcommand("sweep")->get_options())
    if (!own.count(opt->get_name())) train_flags.insert(opt->get_name());
  CHECK(train_flags == swept);
  for (const char* one_runs : {"--init-from", "--tensorboard", "--metrics", "--ckpt-dir",
                               "--val-data", "--tp", "--export"})
    CHECK(swept.count(one_runs) == 0);
  for (const char* shared : {"--heads", "--global-batch", "--lr", "--dtype", "--peak-tflops",
                             "--data", "--preset", "--seed"})
    CHECK(swept.count(shared) == 1);
}

TEST_CASE("setting names: init_from is the model's, and its old place still reads") {
  TempDir d;
  // Today's file, and one written when init_from was among the data's settings (by its key,
  // or by its flag's spelling).
  std::ofstream(d / "now.toml") << "[model]\ninit_from = \"w.safetensors\"\n";
  std::ofstream(d / "old.toml") << "[data]\ninit_from = \"w.safetensors\"\n";
  std::ofstream(d / "older.toml") << "[data]\ninit-from = \"w.safetensors\"\n[checkpoint]\n"
                                     "timeout = 60\n";
  for (const char* file : {"now.toml", "old.toml", "older.toml"}) {
    CAPTURE(file);
    const TrainConfig c = tetra::parse_train_options({"--config", d / file});
    CHECK(c.model.init_from == "w.safetensors");
    CHECK(c.was_given("model.init_from"));
    CHECK(!c.was_given("data.init_from"));
    CHECK(tetra::json(c)["model"]["init_from"] == "w.safetensors");
    CHECK(!tetra::json(c)["data"].contains("init_from"));
  }
  CHECK(tetra::parse_train_options({"--config", d / "older.toml"}).run.timeout == 60);
  // Given twice, in its old place and its new one.
  std::ofstream(d / "both.toml") << "[data]\ninit_from = \"a\"\n[model]\ninit_from = \"b\"\n";
  CHECK(error_of([&] {
          tetra::parse_train_options({"--config", d / "both.toml"});
        }).find("model.init_from is given more than once") != std::string::npos);
  // A checkpoint's record from before the move.
  TrainConfig c;
  tetra::from_json(tetra::json::parse(R"({"data": {"init_from": "m", "data": "t.txt"}})"), c);
  CHECK(c.model.init_from == "m");
  CHECK(c.data.data == "t.txt");
  // --help lists it with the model's settings; the flag is the same.
  tetra::CommandLine cli;
  const std::unique_ptr<CLI::App> app = tetra::make_app(cli);
  CHECK(app->get_subcommand("train")->get_option("--init-from")->get_group() == "Model");
  // The checkpoint's model record is the shape: where the weights came from is not part of it.
  tetra::ModelConfig m;
  m.init_from = "m";
  CHECK(!tetra::ckpt::model_to_json(m).contains("init_from"));
}
