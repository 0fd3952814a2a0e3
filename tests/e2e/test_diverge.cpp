// Guards against training that cannot go well: a --min-lr above --lr is refused (the
// schedule would climb), and a step whose loss or gradient norm is not finite stops the run
// before its update, with one error line and exit status 65, no checkpoint of that step, and
// no restart by tetra launch (resuming is bit-exact, so a rerun would diverge again).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "../support/spawn.hpp"

using namespace tetra::test;

namespace {

// lr 1e30: step 0's update sends the weights far out, and step 1's gradients overflow.
const std::string kDiverging =
    " train --dim 32 --layers 1 --heads 2 --kv-heads 1 --ffn-dim 64 --seq-len 16"
    " --global-batch 2 --steps 4 --peak-tflops 1 --lr 1e30";

}  // namespace

TEST_CASE("guards: --min-lr above --lr is refused") {
  const Spawned s = spawn(tetra_bin() + " train --lr 0.1 --min-lr 1 --steps 1");
  CHECK(s.status == 2);
  CHECK(count(s.err, "tetra: error:") == 1);
  CHECK(count(s.err, "--min-lr 1 is above --lr 0.1") == 1);
}

TEST_CASE("guards: a diverged step stops the run before its update and its checkpoint") {
  const TempDir tmp;
  const std::string dir = tmp / "diverge_ckpt";
  const Spawned s = spawn(tetra_bin() + kDiverging + " --ckpt-dir " + dir + " --ckpt-every 1");
  CHECK(s.status == 65);
  CHECK(count(s.err, "tetra: error:") == 1);
  CHECK(count(s.err, "step 1 diverged") == 1);
  CHECK(count(s.out, "summary:") == 0);
  // Step 0 ran and was saved (its weights came from finite gradients); step 1 was not.
  CHECK(std::filesystem::exists(dir + "/step_00000001"));
  CHECK_FALSE(std::filesystem::exists(dir + "/step_00000002"));

  // Every rank sees the same totals: one line from rank 0, the same status.
  const Spawned dp = spawn(mpirun(2) + tetra_bin() + kDiverging + " --dp 2");
  CHECK(dp.status == 65);
  CHECK(count(dp.err, "tetra: error:") == 1);
}

TEST_CASE("guards: tetra launch does not restart a diverged run") {
  const Spawned s = spawn(tetra_bin() + " launch --restarts 2 -- " + tetra_bin() + kDiverging);
  CHECK(s.status == 65);
  CHECK(count(s.err, "the run diverged, not restarting") == 1);
  CHECK(count(s.err, "attempt 2") == 0);
}

TEST_CASE("guards: a NaN in the --init-from file stops the run at step 0, with nothing saved") {
  const TempDir tmp;
  const std::string model = tmp / "nan_init.safetensors", dir = tmp / "nan_ckpt";
  const std::string shape =
      " --dim 32 --layers 1 --heads 2 --kv-heads 1 --ffn-dim 64 --seq-len 16 --global-batch 2";
  REQUIRE(spawn(tetra_bin() + " train --steps 1" + shape + " --export " + model).status == 0);
  // The data follow the 8-byte header length and the header; the first tensor by name is
  // lm_head.weight, whose first row then makes every token's logits NaN.
  std::string bytes = slurp(model);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  const uint32_t nan = 0x7FC00000;
  for (int i = 0; i < 32; ++i) std::memcpy(&bytes[8 + header + 4 * i], &nan, 4);
  std::ofstream(model, std::ios::binary) << bytes;

  const Spawned s = spawn(tetra_bin() + " train --steps 3" + shape + " --init-from " + model +
                          " --ckpt-dir " + dir + " --ckpt-every 1");
  CHECK(s.status == 65);
  CHECK(count(s.err, "step 0 diverged: loss nan") == 1);
  CHECK_FALSE(std::filesystem::exists(dir + "/step_00000001"));
}
