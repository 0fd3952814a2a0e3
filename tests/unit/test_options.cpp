// The command line as cli/options.cpp defines it with CLI11: every flag's --help line
// shows its default, a flag given twice is refused, refusals name the flag in tetra's words,
// and the parsed options (given flags, launch's command, ckpt's action) come out right. The
// --help checks walk the same CLI11 app that parses, so a flag added without a default
// shown fails here.
#include <doctest/doctest.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../support/spawn.hpp"
#include "cli/options.hpp"
#include "util/error.hpp"

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

std::string error_of(const std::vector<std::string>& args) {
  try {
    tetra::parse_command_line(args);
  } catch (const tetra::Error& e) {
    return e.what();
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
                                       "ckpt verify", "ckpt config", "plot", "generate", "sweep",
                                       "lab"});

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
                                             "--layers",
                                             "--dim",
                                             "--heads",
                                             "--kv-heads",
                                             "--ffn-dim",
                                             "--seq-len",
                                             "--rope-theta",
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
                                             "--init-from",
                                             "--device",
                                             "--dtype",
                                             "--comm",
                                             "--ckpt-dir",
                                             "--ckpt-every",
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

  // The defaults shown are TrainConfig' own.
  const std::string train_help = spawn(tetra_bin() + " train --help", 60).out;
  const tetra::TrainConfig defaults;
  CHECK(help_line(train_help, "--steps").find("=" + std::to_string(defaults.optimizer.steps)) !=
        std::string::npos);
  CHECK(help_line(train_help, "--lr").find("X=0.003 ") != std::string::npos);
  CHECK(help_line(train_help, "--schedule").find("=" + defaults.layout.schedule + " ") !=
        std::string::npos);

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

TEST_CASE("options: refusals name the flag in tetra's words") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "no command given (see tetra --help)"},
      {{"frob"}, "unknown command 'frob' (see tetra --help)"},
      {{"train", "--frob"}, "unknown flag '--frob' (see tetra train --help)"},
      {{"train", "extra"}, "unexpected argument 'extra' (see tetra train --help)"},
      {{"train", "--sp=1"}, "--sp takes no value"},
      {{"train", "--dim"}, "--dim needs a value (D)"},
      {{"train", "--dim=0x10"}, "--dim takes an integer (got '0x10')"},
      {{"train", "--steps", "99999999999999999999"},
       "--steps takes an integer (got '99999999999999999999', out of range)"},
      {{"train", "--lr", ""}, "--lr takes a finite number (got '')"},
      {{"train", "--keep", "0"}, "--keep must be at least 1 (got 0)"},
      {{"train", "--dp", "-1"}, "--dp must not be negative (got -1)"},
      {{"train", "--schedule", "zb"}, "--schedule takes gpipe, 1f1b or interleaved (got 'zb')"},
      {{"train", "--dtype", "fp16"}, "--dtype takes fp32 or bf16 (got 'fp16')"},
      {{"train", "--comm", "gloo"}, "--comm takes auto, nccl or mpi (got 'gloo')"},
      {{"train", "--resume", ""}, "--resume takes auto, never or a checkpoint directory"},
      {{"train", "--comm", "nccl"}, "--comm nccl needs --device cuda"},
      {{"train", "--ckpt-every", "2"}, "--ckpt-every needs --ckpt-dir"},
      {{"train", "--allow-change", "lr,seed"},
       "--allow-change takes a comma-separated list of data, lr, min-lr, warmup, steps, clip, "
       "weight-decay, dtype (got 'seed')"},
      {{"ckpt"}, "tetra ckpt needs a command: inspect or verify or config"},
      {{"ckpt", "inspect"}, "tetra ckpt inspect needs DIR"},
      {{"ckpt", "verify", "a", "b"}, "unexpected argument 'b' (see tetra ckpt verify --help)"},
      {{"launch", "--restarts", "1"},
       "tetra launch needs '--' before the command (see tetra launch --help)"},
      {{"launch", "--"}, "no command after '--' (see tetra launch --help)"},
      {{"launch", "--restarts", "-1", "--", "true"}, "--restarts must not be negative (got -1)"},
  };
  for (const auto& [args, message] : cases) {
    CAPTURE(args.size());
    CAPTURE(message);
    CHECK(error_of(args) == message);
  }
}

TEST_CASE("options: given, defaults and derived values") {
  const tetra::TrainConfig none = tetra::parse_train_options({});
  CHECK(none.given.empty());
  CHECK(none.optimizer.min_lr == doctest::Approx(none.optimizer.lr / 10));
  CHECK(none.model.vocab == 256);

  const tetra::TrainConfig o = tetra::parse_train_options(
      {"--heads", "2", "--sp", "--schedule=gpipe", "--vocab", "300", "--min-lr", "0"});
  CHECK(o.given == std::set<std::string>{"model.heads", "layout.sp", "layout.schedule",
                                         "model.vocab", "optimizer.min_lr"});
  CHECK(o.model.heads == 2);
  CHECK(o.layout.sp);
  CHECK(o.layout.schedule == "gpipe");
  CHECK(o.model.vocab == 300);
  CHECK(o.model.rows() == 384);  // padded to a multiple of 128
  CHECK(o.optimizer.min_lr == 0);

  // Integers are read in base 10; a negative seed wraps around, as it always has.
  CHECK(tetra::parse_train_options({"--dim", "010"}).model.dim == 10);
  CHECK(tetra::parse_train_options({"--seed", "-1"}).optimizer.seed == UINT64_MAX);
  CHECK(tetra::parse_train_options({"--recompute", "full"}).optimizer.recompute);
  CHECK(!tetra::parse_train_options({"--recompute", "none"}).optimizer.recompute);
}

TEST_CASE("options: launch's command is everything after the first --; ckpt's action") {
  const tetra::CommandLine l =
      tetra::parse_command_line({"launch", "--restarts", "2", "--", "mpirun", "-np", "2", "tetra",
                                 "train", "--steps", "3", "--", "--help"});
  CHECK(l.command == "launch");
  CHECK(l.help.empty());
  CHECK(l.launch.restarts == 2);
  CHECK(!l.launch.quiet);
  CHECK(l.launch.command == std::vector<std::string>{"mpirun", "-np", "2", "tetra", "train",
                                                     "--steps", "3", "--", "--help"});

  const tetra::CommandLine c = tetra::parse_command_line({"ckpt", "verify", "ck/step_00000004"});
  CHECK(c.command == "ckpt");
  CHECK(c.ckpt.action == "verify");
  CHECK(c.ckpt.dir == "ck/step_00000004");

  const tetra::CommandLine h = tetra::parse_command_line({"train", "--steps", "5", "-h"});
  CHECK(h.command.empty());
  CHECK(h.help.find("--global-batch G=8") != std::string::npos);
}
