// The same refusal from the command line and from a --config file, each in the words the user
// gave it in: a setting the command line gave (or a default) by its flag, one the file gave by
// its key after the file's name. Refusals of a value's type or range come from the parse; these
// come from the layers below cli/ (the model's shape, the batch over the layout) and from
// resolve().
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "spawn.hpp"

using namespace tetra::test;

namespace {

const std::string kTiny =
    " --layers 2 --dim 32 --ffn-dim 64 --seq-len 16 --global-batch 4 --steps 2 --peak-tflops 1";

// The one "tetra: error:" line of a refused tetra command (exit status 2).
std::string refusal(const std::string& args) {
  const Spawned r = spawn(tetra_bin() + " " + args);
  CAPTURE(args);
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(count(r.err, "tetra: error: ") == 1);
  return r.err;
}

}  // namespace

TEST_CASE("setting words: a refusal names each setting as the user gave it") {
  TempDir d;
  const std::string file = d / "run.toml";
  std::ofstream(file) << "[model]\nheads = 4\nkv_heads = 3\n";
  // The model's shape (model/, when the run is built).
  CHECK(refusal("train" + kTiny + " --heads 4 --kv-heads 3") ==
        "tetra: error: --heads 4 is not divisible by --kv-heads 3\n");
  CHECK(refusal("train" + kTiny + " --config " + file) ==
        "tetra: error: " + file + ": model.heads 4 is not divisible by model.kv_heads 3\n");
  // The command line's flag overrides the file's key, and is named as a flag.
  CHECK(refusal("train" + kTiny + " --config " + file + " --kv-heads 3") ==
        "tetra: error: " + file + ": model.heads 4 is not divisible by --kv-heads 3\n");
  // tetra plan words them alike.
  CHECK(refusal("plan" + kTiny + " --config " + file) ==
        "tetra: error: " + file + ": model.heads 4 is not divisible by model.kv_heads 3\n");

  // The batch over the layout (parallel/).
  std::ofstream(file) << "[batch]\nglobal_batch = 6\nmicro_batch = 4\n";
  const std::string tiny = " --layers 2 --dim 32 --ffn-dim 64 --seq-len 16 --steps 1";
  CHECK(refusal("train" + tiny + " --global-batch 6 --micro-batch 4") ==
        "tetra: error: --global-batch 6 is not divisible by DP * micro-batch = 1 * 4\n");
  CHECK(refusal("train" + tiny + " --config " + file) ==
        "tetra: error: " + file +
            ": batch.global_batch 6 is not divisible by DP * micro-batch = 1 * 4\n");

  // What the settings imply of each other (resolve(), while parsing).
  std::ofstream(file) << "[checkpoint]\nckpt_every = 2\n";
  CHECK(refusal("train --ckpt-every 2") == "tetra: error: --ckpt-every needs --ckpt-dir\n");
  CHECK(refusal("train --config " + file) ==
        "tetra: error: " + file + ": checkpoint.ckpt_every needs --ckpt-dir\n");
}
