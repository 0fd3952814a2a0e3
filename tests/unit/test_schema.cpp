// The configuration's one schema (util/settings.hpp, a table per section): every setting is
// exactly one flag of tetra train, one TOML key and one JSON key, by one naming rule; the
// names older checkpoints recorded read back. (A checkpoint's recorded configuration, as
// `tetra ckpt config` prints it, trains the same run bit for bit through --config:
// tests/e2e/test_schema_run.cpp.)
#include <doctest/doctest.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "../support/checkpoint_helpers.hpp"
#include "../support/test_util.hpp"
#include "cli/options.hpp"

using namespace tetra::test;
using tetra::json;
using tetra::TrainConfig;

namespace {

struct Entry {
  std::string section, name;
};

std::vector<Entry> schema() {
  std::vector<Entry> all;
  TrainConfig c;
  tetra::for_each_section(c, [&](const auto&, const auto& table) {
    for (const auto& k : table.keys) all.push_back({table.name, k.name});
  });
  return all;
}

}  // namespace

TEST_CASE("schema: every setting is one flag, one TOML key and one JSON key, by one rule") {
  const std::vector<Entry> all = schema();
  CHECK(all.size() == 64);
  tetra::CommandLine cli;
  const std::unique_ptr<CLI::App> app = tetra::make_app(cli);
  const CLI::App* train = app->get_subcommand("train");
  std::map<std::string, int> flags;  // tetra train's long flags, each with its count
  for (const CLI::Option* opt : train->get_options()) ++flags[opt->get_name()];
  const std::set<std::string> not_settings = {"--help", "--config", "--print-config"};

  const json recorded = TrainConfig();
  const tetra::CommandLine printed = tetra::parse_command_line({"train", "--print-config"});
  const std::string toml = printed.printed_config;
  std::set<std::string> names, keys;
  for (const Entry& e : all) {
    CAPTURE(e.section + "." + e.name);
    // The name rule: lower case words joined by '_'; the flag is the name with '-'.
    CHECK(std::regex_match(e.name, std::regex("[a-z][a-z0-9]*(_[a-z0-9]+)*")));
    std::string flag = "--" + e.name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    CHECK(tetra::settings::flag_of(e.name) == flag);
    CHECK(flags[flag] == 1);
    CHECK(names.insert(e.name).second);  // one flag per name, whatever the section
    CHECK(keys.insert(e.section + "." + e.name).second);
    // The JSON a checkpoint records: under its section, by its name.
    CHECK(recorded.at(e.section).contains(e.name));
    // The TOML: one line in the whole file, under its section's table.
    const std::regex line("\n(# )?" + e.name + " = [^\n]*\n");
    CHECK(std::distance(std::sregex_iterator(toml.begin(), toml.end(), line),
                        std::sregex_iterator()) == 1);
    const size_t table = toml.find("\n[" + e.section + "]\n");
    REQUIRE(table != std::string::npos);
    const size_t next = toml.find("\n[", table + 1);
    std::smatch m;
    const std::string body = toml.substr(table, next == std::string::npos ? next : next - table);
    CHECK(std::regex_search(body, m, line));
  }
  // Nothing else: no flag of tetra train outside the schema, no JSON key, no TOML key.
  for (const auto& [flag, n] : flags) {
    CAPTURE(flag);
    std::string name = flag.substr(2);
    std::replace(name.begin(), name.end(), '-', '_');
    CHECK((names.count(name) == 1 || not_settings.count(flag) == 1));
  }
  size_t json_keys = 0;
  for (const auto& [section, values] : recorded.items()) json_keys += values.size();
  CHECK(json_keys == all.size());
  CHECK(count(toml, " = ") == int(all.size()));
  // Flags users type stay as they were where a field is named otherwise.
  CHECK(flags.count("--export") == 1);
  CHECK(flags.count("--vocab") == 1);
  CHECK(flags.count("--kv-heads") == 1);
  // A TOML key may also be spelled as its flag is (the files tetra wrote before the schema).
  TempDir d;
  std::ofstream(d / "old.toml") << "[model]\nkv-heads = 1\n[output]\nexport = \"x.safetensors\"\n";
  const TrainConfig old = tetra::parse_train_options({"--config", d / "old.toml"});
  CHECK(old.model.kv_heads == 1);
  CHECK(old.output.export_ == "x.safetensors");
  CHECK(old.given == std::set<std::string>{"model.kv_heads", "output.export"});
  CHECK(
      lines_with(tetra::parse_command_line({"train", "--config", d / "old.toml", "--print-config"})
                     .printed_config,
                 "kv_heads = 1") == 1);
}

TEST_CASE("schema: the names older checkpoints recorded read into today's settings") {
  // A configuration as tetra recorded it before the schema: the tokens as data_vocab, the
  // export as export_path, recompute a bool, the watchdog's timeout among the checkpoints.
  const json before = json::parse(R"({
    "model": {"data_vocab": 300, "layers": 2},
    "optimizer": {"recompute": true, "lr": 0.002},
    "output": {"export_path": "w.safetensors", "tensorboard": "tb"},
    "checkpoint": {"timeout": 60, "keep": 2}})");
  TrainConfig c;
  tetra::from_json(before, c);
  CHECK(c.model.vocab == 300);
  CHECK(c.model.layers == 2);
  CHECK(c.optimizer.recompute);
  CHECK(c.optimizer.lr == 0.002);
  CHECK(c.output.export_ == "w.safetensors");
  CHECK(c.output.tensorboard == "tb");
  CHECK(c.run.timeout == 60);
  CHECK(c.checkpoint.keep == 2);
  // And today's record carries every setting, tensorboard included, under the new names.
  const json now = c;
  CHECK(now["model"]["vocab"] == 300);
  CHECK(now["optimizer"]["recompute"] == "full");
  CHECK(now["output"]["export"] == "w.safetensors");
  CHECK(now["output"]["tensorboard"] == "tb");
  CHECK(now["run"]["timeout"] == 60.0);
  CHECK(!now["checkpoint"].contains("timeout"));
  TrainConfig back;
  tetra::from_json(now, back);
  CHECK(json(back) == now);
}
