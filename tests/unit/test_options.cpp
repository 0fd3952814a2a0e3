// The command line as cli/options.cpp defines it with CLI11: refusals name the flag in
// tetra's words, and the parsed options (given flags, launch's command, ckpt's action) come
// out right. (--help and a flag given twice, as the tetra binary prints them:
// tests/e2e/test_options_run.cpp.)
#include <doctest/doctest.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/options.hpp"
#include "util/error.hpp"

namespace {

std::string error_of(const std::vector<std::string>& args) {
  try {
    tetra::parse_command_line(args);
  } catch (const tetra::Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

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
      {{"train", "--schedule", "zb"},
       "--schedule takes gpipe, 1f1b, interleaved, zb-h1 or zb-v (got 'zb')"},
      {{"train", "--dtype", "fp16"}, "--dtype takes fp32 or bf16 (got 'fp16')"},
      {{"train", "--comm", "gloo"}, "--comm takes auto, nccl or mpi (got 'gloo')"},
      {{"train", "--resume", ""}, "--resume takes auto, never or a checkpoint directory"},
      {{"train", "--comm", "nccl"}, "--comm nccl needs --device cuda"},
      {{"train", "--ckpt-every", "2"}, "--ckpt-every needs --ckpt-dir"},
      {{"train", "--allow-change", "lr,seed"},
       "--allow-change takes a comma-separated list of steps, lr, min-lr, warmup, weight-decay, "
       "clip, data, dtype (got 'seed')"},
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

  const tetra::TrainConfig o =
      tetra::parse_train_options({"--heads", "2", "--tp", "2", "--sp", "--pp", "2",
                                  "--schedule=gpipe", "--vocab", "300", "--min-lr", "0"});
  CHECK(o.given == std::set<std::string>{"model.heads", "layout.tp", "layout.sp", "layout.pp",
                                         "layout.schedule", "model.vocab", "optimizer.min_lr"});
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
