// tetra train's configuration as a TOML file (cli/config_file.hpp): --print-config writes
// what --config reads back to the same configuration and the same given flags; flags on the
// command line override the file; a bad file is one error naming the file and the key; and
// with the real binary, a run from a printed configuration trains bit for bit as the command
// that printed it, --init-from included.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"
#include "cli/options.hpp"

using namespace tetra::test;
namespace fs = std::filesystem;

namespace {

tetra::CommandLine parse(std::vector<std::string> args) {
  args.insert(args.begin(), "train");
  return tetra::parse_command_line(args);
}

std::string printed(const std::vector<std::string>& args) {
  std::vector<std::string> all = args;
  all.push_back("--print-config");
  const tetra::CommandLine cli = parse(all);
  REQUIRE(cli.print_config);
  return cli.printed_config;
}

std::string write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
  return path;
}

std::string parse_error(const std::vector<std::string>& args) {
  return error_of([&] { parse(args); });
}

// Losses by step from a metrics file, as written (the digits round-trip).
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

const std::string kModel = tetra::test::tiny_model_flags({.steps = 3});

}  // namespace

TEST_CASE("config file: --print-config reads back to the same configuration and given flags") {
  TempDir d;
  const std::vector<std::vector<std::string>> commands = {
      {},
      // Derived values (the schedule from --vpp, --min-lr from --lr), a wrapped seed, a
      // switch, the two flags of their own kind, a path with a space and one with a quote.
      {"--pp",
       "2",
       "--vpp",
       "2",
       "--lr",
       "2e-3",
       "--seed",
       "-1",
       "--sp",
       "--tp",
       "2",
       "--recompute",
       "full",
       "--ckpt-dir",
       "ck",
       "--allow-change",
       "lr,steps",
       "--data",
       "my file.txt",
       "--val-split",
       "0.25",
       "--eval-every",
       "2",
       "--export",
       "it's/out",
       "--clip",
       "0.1",
       "--rope-theta",
       "500000",
       "--weight-decay",
       "0.3333333333333333"},
      {"--min-lr",   "0",         "--pp",       "2",       "--schedule",    "gpipe",     "--vocab",
       "300",        "--metrics", "a\"b.jsonl", "--dtype", "bf16",          "--timeout", "0",
       "--ckpt-dir", "ck",        "--resume",   "never",   "--peak-tflops", "1e-3"},
  };
  for (const auto& args : commands) {
    CAPTURE(args.size());
    const tetra::CommandLine want = parse(args);
    const std::string toml = printed(args);
    CAPTURE(toml);
    const std::string file = write(d / "run.toml", toml);
    const tetra::CommandLine got = parse({"--config", file});
    CHECK(tetra::json(got.train).dump() == tetra::json(want.train).dump());
    CHECK(got.train.given == want.train.given);
    // And it prints itself again.
    CHECK(printed({"--config", file}) == toml);
  }
  // Every flag of tetra train is a key, in its section; only the given ones are set.
  const std::string toml = printed({"--lr", "0.001"});
  CHECK(toml.find("\n[optimizer]\n") != std::string::npos);
  CHECK(toml.find("\nlr = 0.001\n") != std::string::npos);
  CHECK(toml.find("\n# min_lr = 0.0001\n") != std::string::npos);  // derived: not given
  CHECK(toml.find("\n# tp = 1\n") != std::string::npos);
  CHECK(toml.find("\n# pp_balance = \"even\"\n") != std::string::npos);
  CHECK(count(toml, " = ") == 64);
}

TEST_CASE("config file: flags on the command line override its keys, and both count as given") {
  TempDir d;
  const std::string file =
      write(d / "run.toml", "[model]\nlayers = 2\ndim = 64 # a comment\n[optimizer]\nlr = 0.001\n");
  const tetra::TrainConfig c = parse({"--lr", "0.002", "--config", file, "--heads", "8"}).train;
  CHECK(c.model.layers == 2);
  CHECK(c.model.dim == 64);
  CHECK(c.model.heads == 8);
  CHECK(c.optimizer.lr == 0.002);
  CHECK(c.optimizer.min_lr == doctest::Approx(0.0002));  // follows the command line's --lr
  CHECK(c.given ==
        std::set<std::string>{"model.layers", "model.dim", "optimizer.lr", "model.heads"});
  // A switch set false is not given.
  write(d / "sw.toml", "[layout]\nsp = false\ntp = 2\n");
  const tetra::TrainConfig sw = parse({"--config", d / "sw.toml"}).train;
  CHECK(!sw.layout.sp);
  CHECK(sw.given == std::set<std::string>{"layout.tp"});
  CHECK(parse({"--config", write(d / "on.toml", "[layout]\nsp = true\ntp = 2\n")}).train.layout.sp);
}

TEST_CASE("config file: a bad key or value is one error naming the file and the key") {
  TempDir d;
  const std::string f = d / "bad.toml";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[model]\nlayrs = 2\n",
       ": unknown key 'model.layrs' (the keys are tetra train's settings, by section: see "
       "--print-config)"},
      {"[layout]\nlayers = 2\n", ": unknown key 'layout.layers' (layers is model.layers)"},
      {"layers = 2\n", ": unknown key 'layers' (layers is model.layers)"},
      {"[model.inner]\nlayers = 2\n",
       ": unknown key 'model.inner.layers' (layers is model.layers)"},
      {"[model]\nlayers = \"four\"\n", ": model.layers takes an integer, not the string \"four\""},
      {"[model]\nlayers = 2.5\n", ": model.layers takes an integer (got '2.5')"},
      {"[optimizer]\nlr = \"fast\"\n", ": optimizer.lr takes a number, not the string \"fast\""},
      {"[optimizer]\nlr = inf\n", ": optimizer.lr takes a finite number (got 'inf')"},
      {"[layout]\nsp = 1\n", ": layout.sp takes true or false (got '1')"},
      {"[layout]\nschedule = \"zb\"\n",
       ": layout.schedule takes gpipe, 1f1b, interleaved, zb-h1 or zb-v (got 'zb')"},
      {"[checkpoint]\nkeep = 0\n", ": checkpoint.keep must be at least 1 (got 0)"},
      {"[layout]\ndp = -1\n", ": layout.dp must not be negative (got -1)"},
      {"[data]\nval_split = 1.5\n",
       ": data.val_split must be between 0 and 1, exclusive (got 1.5)"},
      {"[optimizer]\nsteps = 99999999999999999999\n",
       ": optimizer.steps takes an integer (got '99999999999999999999', out of range)"},
      {"[optimizer]\nlr = [0.1, 0.2]\n", ": optimizer.lr takes one value, not a list"},
      {"[model]\nlayers = 2\n[device]\ndtype = \"bf16\"\n[model]\nlayers = 3\n",
       ": model.layers is given more than once"},
      {"[model]\nkv-heads = 1\nkv_heads = 2\n", ": model.kv_heads is given more than once"},
      {"[checkpoint]\nallow_change = \"lr,seed\"\n",
       ": checkpoint.allow_change takes a comma-separated list of steps, lr, min-lr, warmup, "
       "weight-decay, clip, data, dtype (got 'seed')"},
      // What the settings imply of each other (resolve()): the file's by key, the others
      // by flag.
      {"[checkpoint]\nckpt_every = 2\n", ": checkpoint.ckpt_every needs --ckpt-dir"},
      {"[optimizer]\nlr = 0.1\nmin_lr = 1\n",
       ": optimizer.min_lr 1 is above optimizer.lr 0.1: the schedule would climb after the "
       "warmup"},
  };
  for (const auto& [text, message] : cases) {
    CAPTURE(text);
    write(f, text);
    CHECK(parse_error({"--config", f}) == f + message);
  }
  CHECK(parse_error({"--config", d / "missing.toml"}) ==
        "--config " + (d / "missing.toml") + ": not a file that can be read");
  // A key the command line gives is not read at all: its value cannot be refused.
  write(f, "[checkpoint]\nkeep = 0\n");
  CHECK(parse_error({"--config", f, "--keep", "2", "--ckpt-dir", d / "ck"}).empty());

  // From the binary, and under mpirun: one line from rank 0, exit status 2, nothing trained.
  write(f, "[model]\nlayers = \"four\"\n");
  for (const std::string& launch : {std::string(), mpirun(2)}) {
    const Spawned r = spawn(launch + tetra_bin() + " train --config " + f, 60);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(r.err.find("tetra: error: " + f +
                     ": model.layers takes an integer, not the string \"four\"") !=
          std::string::npos);
    CHECK(r.out.empty());
  }
}

TEST_CASE("config file: a run from --print-config's output trains bit for bit as the command") {
  TempDir d;
  fs::create_directories(d / "a");
  fs::create_directories(d / "b");
  // A pipeline with a derived schedule and min-lr, validation, bf16 and recomputation; the
  // outputs are relative paths, so the second run writes its own in its own directory.
  const std::string flags = with_defaults(
      kModel,
      "--pp 2 --vpp 2 --layers 4 --lr 2e-3 --val-split 0.25 --eval-every 2 --dtype bf16 "
      "--recompute full --seed 7 --clip 0.5 --metrics m.jsonl --export model");
  const std::string train = mpirun(2) + tetra_bin() + " train ";
  const Spawned a = spawn("cd " + (d / "a") + " && " + train + flags);
  CAPTURE(a.err);
  REQUIRE(a.status == 0);
  const Spawned print =
      spawn("cd " + (d / "a") + " && " + train + flags + " --print-config > run.toml");
  REQUIRE(print.status == 0);
  CHECK(count(slurp(d / "a/run.toml"), "[layout]") == 1);  // rank 0 alone prints
  const Spawned b = spawn("cd " + (d / "b") + " && " + train + "--config ../a/run.toml");
  CAPTURE(b.err);
  REQUIRE(b.status == 0);
  const std::vector<std::string> la = losses(d / "a/m.jsonl"), lb = losses(d / "b/m.jsonl");
  CHECK(la.size() == 3);
  CHECK(la == lb);
  CHECK(!slurp(d / "a/model/model.safetensors").empty());
  CHECK(slurp(d / "a/model/model.safetensors") == slurp(d / "b/model/model.safetensors"));
  CHECK(slurp(d / "a/model/config.json") == slurp(d / "b/model/config.json"));

  // Under --init-from the model's shapes come from the model: not given, they are commented
  // out, and the printed file starts from the model as the command does.
  const std::string from = " --init-from " + (d / "a/model") + " --steps 2 --global-batch 4 ";
  const Spawned p2 = spawn(tetra_bin() + " train" + from + "--print-config > " + (d / "init.toml"));
  REQUIRE(p2.status == 0);
  CHECK(slurp(d / "init.toml").find("\n# layers = 4\n") != std::string::npos);
  const Spawned c = spawn(tetra_bin() + " train --config " + (d / "init.toml"));
  CAPTURE(c.err);
  CHECK(c.status == 0);
  CHECK(c.out.find("model: layers 4, dim 32") != std::string::npos);
  // A given shape that disagrees with the model is refused in both forms, each named as given.
  const Spawned p3 =
      spawn(tetra_bin() + " train" + from + "--layers 3 --print-config > " + (d / "bad.toml"));
  REQUIRE(p3.status == 0);
  const std::pair<std::string, std::string> forms[] = {
      {from + "--layers 3", "tetra: error: --layers 3 disagrees with the init model"},
      {" --config " + (d / "bad.toml"),
       "tetra: error: " + (d / "bad.toml") + ": model.layers 3 disagrees with the init model"}};
  for (const auto& [how, said] : forms) {
    const Spawned r = spawn(tetra_bin() + " train" + how);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find(said) != std::string::npos);
  }
}
