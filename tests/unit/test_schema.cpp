// The configuration's one schema (util/settings.hpp, a table per section): every setting is
// exactly one flag of tetra train, one TOML key and one JSON key, by one naming rule; the
// names older checkpoints recorded read back; and a checkpoint's recorded configuration, as
// `tetra ckpt config` prints it, trains the same run bit for bit through --config.
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
#include "../support/spawn.hpp"
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

int lines_with(const std::string& text, const std::string& line) {
  return count("\n" + text + "\n", "\n" + line + "\n");
}

}  // namespace

TEST_CASE("schema: every setting is one flag, one TOML key and one JSON key, by one rule") {
  const std::vector<Entry> all = schema();
  CHECK(all.size() == 52);
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

namespace {

const std::string kRun =
    " --layers 2 --dim 32 --heads 2 --kv-heads 2 --ffn-dim 64 --seq-len 16 --global-batch 4"
    " --peak-tflops 1 --lr 0.002 --warmup 1 --seed 7 --vocab 300 --recompute full";

std::vector<std::string> losses(const std::string& metrics) {
  std::vector<std::string> out;
  std::istringstream in(slurp(metrics));
  const std::regex re(R"("loss":([-0-9.eE+]+))");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, re)) out.push_back(m[1]);
  }
  return out;
}

// The checkpoint's manifest as a tetra before the schema wrote it: the old names, recompute
// a bool, no model section in the configuration, the model record's rows as vocab.
void write_as_before(const std::string& manifest) {
  json m = json::parse(slurp(manifest));
  json& c = m["config"];
  c["output"]["export_path"] = c["output"]["export"];
  c["output"].erase("export");
  c["output"].erase("tensorboard");
  c["checkpoint"]["timeout"] = c["run"]["timeout"];
  c.erase("run");
  c["optimizer"]["recompute"] = c["optimizer"]["recompute"] == "full";
  c.erase("model");
  json& model = m["model"];
  model["data_vocab"] = model["vocab"];
  model["vocab"] = model["vocab_rows"];
  model.erase("vocab_rows");
  write_manifest(manifest, m);
}

}  // namespace

TEST_CASE("schema: a checkpoint's recorded configuration trains the same run through --config") {
  TempDir d;
  const std::string dir = d.path.string(), bin = tetra_bin();
  const Spawned first = spawn("cd " + dir + " && " + bin + " train" + kRun +
                              " --steps 3 --ckpt-dir ck --metrics a.jsonl --export a.safetensors");
  REQUIRE(first.status == 0);
  const Spawned printed = spawn("cd " + dir + " && " + bin + " ckpt config ck > run.toml");
  REQUIRE(printed.status == 0);
  const std::string toml = slurp(d / "run.toml");
  CAPTURE(toml);
  CHECK(lines_with(toml, "vocab = 300") == 1);
  CHECK(lines_with(toml, "recompute = \"full\"") == 1);
  CHECK(lines_with(toml, "export = \"a.safetensors\"") == 1);
  CHECK(lines_with(toml, "dp = 1") == 1);
  // The same run from the file alone, but for where it writes (flags override the file).
  const Spawned again = spawn("cd " + dir + " && " + bin +
                              " train --config run.toml --ckpt-dir ck2 --metrics b.jsonl "
                              "--export b.safetensors");
  REQUIRE(again.status == 0);
  CHECK(losses(d / "a.jsonl").size() == 3);
  CHECK(losses(d / "b.jsonl") == losses(d / "a.jsonl"));
  CHECK(slurp(d / "b.safetensors") == slurp(d / "a.safetensors"));

  // A checkpoint with the names of a tetra before the schema still resumes, and still prints
  // as the same configuration.
  write_as_before(dir + "/ck/step_00000003/manifest.json");
  const Spawned old = spawn("cd " + dir + " && " + bin + " ckpt config ck > old.toml");
  REQUIRE(old.status == 0);
  const std::string old_toml = slurp(d / "old.toml");
  CHECK(lines_with(old_toml, "vocab = 300") == 1);
  CHECK(lines_with(old_toml, "recompute = \"full\"") == 1);
  CHECK(lines_with(old_toml, "export = \"a.safetensors\"") == 1);
  const Spawned resumed = spawn("cd " + dir + " && " + bin + " train" + kRun +
                                " --steps 4 --allow-change steps --ckpt-dir ck --metrics c.jsonl");
  CAPTURE(resumed.err);
  CHECK(resumed.status == 0);
  CHECK(resumed.out.find("resumed from ") != std::string::npos);
  CHECK(losses(d / "c.jsonl").size() == 1);
}
