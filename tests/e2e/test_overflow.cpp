// Sizes that cannot overflow (issue 24, class 2). Every count derived from user input is
// computed in 64 bits with overflow checks (util/checked.hpp): the layout's product, the
// pipeline's chunks, the parameter count, the tokens of a run; config.json's integers are
// read as 64 bits and refused when they do not fit the int tetra keeps them in. Each refusal
// is one error line and exit 2, never a signal (TP*PP = 65536*65536 wrapped to 0 and divided).
#include <doctest/doctest.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <string>

#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"
#include "model/config.hpp"
#include "parallel/chunks.hpp"
#include "parallel/grid.hpp"
#include "util/checked.hpp"

using namespace tetra::test;
namespace fs = std::filesystem;

namespace {

const std::string kModel = tetra::test::tiny_model_flags();

}  // namespace

TEST_CASE("overflow: the checked helpers refuse what does not fit 64 bits") {
  CHECK(tetra::checked_mul(65536, 65536) == int64_t(1) << 32);
  CHECK_FALSE(tetra::checked_mul(int64_t(1) << 32, int64_t(1) << 31).has_value());
  CHECK_FALSE(tetra::checked_add(INT64_MAX, 1).has_value());
  CHECK(tetra::checked_product({65536, 65536, 65536}) == int64_t(1) << 48);
  CHECK_FALSE(tetra::checked_product({65536, 65536, 65536, 65536}).has_value());
  CHECK(tetra::checked_int(INT_MAX) == INT_MAX);
  CHECK_FALSE(tetra::checked_int(4294967360).has_value());
}

TEST_CASE("overflow: a layout whose product wraps in 32 bits is refused, not divided by") {
  using tetra::resolve_layout;
  // 65536 * 65536 is 0 in 32 bits: world % 0 was a SIGFPE, and TP*CP*PP*DP = 0 * 1 matched
  // nothing; 65536 * 32768 * 2 is 0 too.
  CHECK(error_of([] {
          resolve_layout(65536, 65536, 1, 0, 1);
        }).find("does not divide the 1 ranks") != std::string::npos);
  CHECK(error_of([] {
          resolve_layout(65536, 1, 65536, 1, 1);
        }).find("= 4294967296 must equal the number of ranks (1)") != std::string::npos);
  CHECK(error_of([] { resolve_layout(65536, 32768, 2, 1, 8); }).find("4294967296") !=
        std::string::npos);
  CHECK(error_of([] {
          tetra::plan_chunks(4, 65536, 65536);
        }).find("= 4294967296 chunks is more than the 4 layers") != std::string::npos);

  expect_refusal(tetra_bin() + " train --tp 65536 --pp 65536 --steps 1",
                 "TP*CP*PP = 65536*1*65536 = 4294967296 does not divide the 1 ranks");
  expect_refusal(
      tetra_bin() + " train --tp 65536 --cp 65536 --dp 1 --steps 1",
      "the layout TP*CP*PP*DP = 65536*65536*1*1 = 4294967296 must equal the number of ranks");
  // PP * V = 2^32 chunks wrapped to 0 "chunks", which fit any model, and crashed.
  expect_refusal(tetra_bin() +
                     " plan --pp 65536 --vpp 65536 --layers 4 --global-batch 65536 "
                     "--micro-batch 1",
                 "passes per stage and step");
  expect_refusal(tetra_bin() + " plan --tp 65536 --cp 65536 --pp 2", "ranks");
}

TEST_CASE("overflow: a parameter count past 2^50 is refused, not printed negative") {
  tetra::ModelConfig c;
  c.dim = 2000000000;
  c.heads = 2;
  c.kv_heads = 2;
  CHECK(error_of([&] { c.validate(); }).find("parameters, more than tetra's limit of 2^50") !=
        std::string::npos);
  c = tetra::ModelConfig{};
  c.vocab = c.vocab_rows = int64_t(1) << 32;
  CHECK(error_of([&] { c.validate(); }).find("the vocabulary of 4294967296 tokens") !=
        std::string::npos);
  // The plan printed "-1.62e+03 PB" and "fits" for this one.
  const Spawned r = spawn(tetra_bin() + " plan --dim 2000000000 --heads 2 --kv-heads 2", 60);
  CAPTURE(r.out);
  CHECK(r.status == 2);
  CHECK(count(r.err, "tetra: error:") == 1);
  CHECK(r.err.find("more than tetra's limit of 2^50") != std::string::npos);
  CHECK(r.out.find("fits") == std::string::npos);
  // 2 * dim^2 of q and o alone is just below 2^63; k and v take the sum past it.
  expect_refusal(
      tetra_bin() + " train --dim 2147483644 --heads 2 --kv-heads 2 --layers 1 --steps 1",
      "more than 2^63 parameters, more than tetra's limit");
}

TEST_CASE("overflow: the tokens of a run count in 64 bits") {
  // 2^62 steps of 4 x 16 tokens: tokens seen (step * G * S) would wrap.
  expect_refusal(
      tetra_bin() + " train" + kModel + "--steps 4611686018427387904",
      "--steps 4611686018427387904 of --global-batch 4 x --seq-len 16 tokens are more tokens "
      "than 64 bits count");
}

TEST_CASE("overflow: config.json's integers are read as 64 bits and range-checked") {
  TempDir d;
  const std::string dir = d / "model";
  REQUIRE(spawn(tetra_bin() + " train" + kModel + "--steps 1 --export " + dir).status == 0);
  const tetra::json exported = parsed_json(slurp(dir + "/config.json"));
  // Each is the model's own value plus 2^32: its low 32 bits are what the model has, so a
  // reader that cuts to int accepted the file and trained on another shape than it says.
  for (const std::string key :
       {"intermediate_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers"}) {
    CAPTURE(key);
    tetra::json c = exported;
    c[key] = int_of(exported[key]) + (int64_t(1) << 32);
    std::ofstream(dir + "/config.json") << c.dump();
    expect_refusal(tetra_bin() + " train" + kModel + "--steps 1 --init-from " + dir,
                   "config.json's \"" + key + "\" is " + std::to_string(int_of(c[key])) +
                       ", more than tetra's limit of ");
  }
}
