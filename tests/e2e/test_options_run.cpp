// The command line as the tetra binary shows it: every flag's --help line shows its default,
// and a flag given twice is refused. The --help checks walk the same CLI11 app that parses,
// so a flag added without a default shown fails here. (The parsed options:
// tests/unit/test_options.cpp.)
#include <doctest/doctest.h>
#include <cctype>

#include <CLI/CLI.hpp>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../support/spawn.hpp"
#include "cli/options.hpp"

namespace {

using tetra::test::count;
using tetra::test::spawn;
using tetra::test::Spawned;
using tetra::test::tetra_bin;

// Every subcommand under app, as its path ("train", "ckpt inspect") and its CLI11 app.
void subcommands(const CLI::App& app, const std::string& path,
                 std::vector<std::pair<std::string, const CLI::App*>>& out) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    const std::string p = path.empty() ? sub->get_name() : path + " " + sub->get_name();
    out.emplace_back(p, sub);
    subcommands(*sub, p, out);
  }
}

// The line of a --help text that describes `name` (the name first, after the indent).
std::string help_line(const std::string& help, const std::string& name) {
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find_first_not_of(' ');
    if (at == std::string::npos || line.compare(at, name.size(), name) != 0) continue;
    const size_t end = at + name.size();
    if (end == line.size() || line[end] == ' ' || line[end] == '=') return line;
  }
  return {};
}

}  // namespace

TEST_CASE("options: each subcommand's --help lists every flag it defines, with its default") {
  tetra::CommandLine into;
  const std::unique_ptr<CLI::App> app = tetra::make_app(into);
  std::vector<std::pair<std::string, const CLI::App*>> commands;
  subcommands(*app, "", commands);
  std::set<std::string> paths;
  for (const auto& [path, sub] : commands) paths.insert(path);
  CHECK(paths == std::set<std::string>{"train", "plan", "launch", "ckpt", "ckpt inspect",
                                       "ckpt verify", "ckpt config", "plot", "generate", "tokenize",
                                       "sweep", "lab", "serve"});

  std::set<std::string> train_flags;
  for (const auto& [path, sub] : commands) {
    CAPTURE(path);
    const Spawned r = spawn(tetra_bin() + " " + path + " --help", 60);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    CHECK(r.out.find("Usage: tetra " + path) != std::string::npos);
    for (const CLI::Option* opt : sub->get_options()) {
      if (opt == sub->get_help_ptr() || opt->get_positional()) continue;
      const std::string name = opt->get_name();
      CAPTURE(name);
      if (path == "train") train_flags.insert(name);
      // tetra plan takes the data's, checkpoints' and outputs' flags but does not list them.
      if (opt->get_group().empty()) {
        CHECK(path == "plan");
        CHECK(help_line(r.out, name).empty());
        continue;
      }
      REQUIRE(!opt->get_default_str().empty());
      // A flag with a value shows "--name METAVAR=default", a switch "--name [default]".
      const std::string shown =
          opt->get_expected_max() == 0
              ? name + " [" + opt->get_default_str() + "]"
              : name + " " + opt->get_type_name() + "=" + opt->get_default_str();
      CHECK(help_line(r.out, name).find(shown) != std::string::npos);
    }
  }
  // The flags of the CLI contract (docs/design.md), all there under their names.
  CHECK(train_flags == std::set<std::string>{"--tp",
                                             "--cp",
                                             "--pp",
                                             "--dp",
                                             "--sp",
                                             "--vpp",
                                             "--schedule",
                                             "--pp-balance",
                                             "--layers",
                                             "--dim",
                                             "--heads",
                                             "--kv-heads",
                                             "--ffn-dim",
                                             "--seq-len",
                                             "--rope-theta",
                                             "--rope-type",
                                             "--rope-factor",
                                             "--rope-low-freq-factor",
                                             "--rope-high-freq-factor",
                                             "--rope-original-context",
                                             "--tie-embeddings",
                                             "--doc-mask",
                                             "--micro-batch",
                                             "--global-batch",
                                             "--vocab",
                                             "--steps",
                                             "--lr",
                                             "--min-lr",
                                             "--warmup",
                                             "--weight-decay",
                                             "--clip",
                                             "--seed",
                                             "--zero",
                                             "--recompute",
                                             "--data",
                                             "--data-field",
                                             "--skip-bad-lines",
                                             "--init-from",
                                             "--device",
                                             "--dtype",
                                             "--comm",
                                             "--overlap",
                                             "--ckpt-dir",
                                             "--ckpt-every",
                                             "--ckpt-async",
                                             "--keep",
                                             "--resume",
                                             "--allow-change",
                                             "--inject-failure",
                                             "--timeout",
                                             "--metrics",
                                             "--tensorboard",
                                             "--trace",
                                             "--trace-steps",
                                             "--export",
                                             "--export-dtype",
                                             "--peak-tflops",
                                             "--val-data",
                                             "--val-split",
                                             "--eval-every",
                                             "--eval-batches",
                                             "--tokenizer",
                                             "--sample-every",
                                             "--config",
                                             "--print-config",
                                             "--preset"});

  // tetra plan's --help lists what the plan reads, and not what it does not.
  const std::string plan_help = spawn(tetra_bin() + " plan --help", 60).out;
  for (const char* listed : {"--tp", "--preset", "--peak-tflops", "--zero", "--gpu", "--json"})
    CHECK_MESSAGE(!help_line(plan_help, listed).empty(), listed);
  for (const char* unlisted : {"--ckpt-dir", "--metrics", "--data", "--inject-failure", "--trace"})
    CHECK_MESSAGE(help_line(plan_help, unlisted).empty(), unlisted);
  // ... though it takes them, and names them when it refuses a value.
  const Spawned keep = spawn(tetra_bin() + " plan --keep x", 60);
  CHECK(keep.status == 2);
  CHECK(keep.err.find("tetra: error: --keep ") != std::string::npos);
  CHECK(spawn(tetra_bin() + " plan --ckpt-dir d --metrics m.jsonl --tp 2", 60).status == 0);

  // The defaults shown are TrainConfig' own.
  const std::string train_help = spawn(tetra_bin() + " train --help", 60).out;
  const tetra::TrainConfig defaults;
  CHECK(help_line(train_help, "--steps").find("=" + std::to_string(defaults.optimizer.steps)) !=
        std::string::npos);
  CHECK(help_line(train_help, "--lr").find("X=0.003 ") != std::string::npos);
  // The default ends the flag's column (the help may start on the next line).
  const std::string schedule = help_line(train_help, "--schedule");
  const size_t at = schedule.find("=" + defaults.layout.schedule);
  REQUIRE(at != std::string::npos);
  const size_t after = at + 1 + defaults.layout.schedule.size();
  CHECK((after == schedule.size() || std::isspace((unsigned char)schedule[after])));

  const Spawned top = spawn(tetra_bin() + " --help", 60);
  CHECK(top.status == 0);
  for (const char* command : {"train", "launch", "ckpt"})
    CHECK(help_line(top.out, command).size() > 0);
}

TEST_CASE("options: a flag given twice is refused with one error line and exit status 2") {
  for (const std::string args :
       {"train --steps 1 --steps 2", "train --dim=16 --dim 16", "train --sp --sp",
        "launch --restarts 1 --restarts 2 -- true", "launch --quiet --quiet -- true"}) {
    CAPTURE(args);
    const Spawned r = spawn(tetra_bin() + " " + args, 60);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(count(r.err, "\n") == 1);
    CHECK(r.err.find("is given more than once") != std::string::npos);
    CHECK(r.out.empty());
  }
  // Under mpirun every rank refuses it and rank 0 alone says so.
  const Spawned r = spawn(tetra::test::mpirun(2) + tetra_bin() + " train --steps 1 --steps 2", 60);
  CAPTURE(r.err);
  CHECK(r.status != 0);
  CHECK(r.status != 124);
  CHECK(count(r.err, "tetra: error: --steps is given more than once") == 1);
}
