// Output errors are errors: every command that prints its result (train --print-config, plan,
// generate, ckpt inspect|config|verify, sweep --dry-run, lab --list, --help) into a
// standard output that cannot take it (/dev/full: every write fails with ENOSPC) says so in one
// "tetra: error:" line and exits 2, instead of exiting 0 with nothing written (an empty file
// that a later --config would read as no keys). Runs the real `tetra` binary.
#include <doctest/doctest.h>

#include <string>

#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"

using namespace tetra::test;

namespace {

const std::string kFull = "cannot write the standard output";

}  // namespace

TEST_CASE("stdout errors: each printing command into /dev/full is one error line and exit 2") {
  const std::string tetra = tetra_bin();
  for (const std::string& command :
       {tetra + " train" + tiny_model_flags() + "--print-config", tetra + " plan",
        tetra + " plan --preset llama3-8b", tetra + " train --help",
        tetra + " sweep --ranks 2 --dry-run", tetra + " lab --list"})
    expect_refusal(command + " > /dev/full", kFull);
}

TEST_CASE("stdout errors: generate and ckpt inspect, config and verify into /dev/full") {
  const TempDir d;
  REQUIRE(spawn("cd " + d.path.string() + " && " + tetra_bin() + " train" +
                tiny_model_flags({.steps = 1}) + "--ckpt-dir ck --export model")
              .status == 0);
  for (const char* command : {" generate --init-from model --prompt hi --tokens 4",
                              " ckpt inspect ck", " ckpt config ck", " ckpt verify ck"})
    expect_refusal_in(d.path, tetra_bin() + command + " > /dev/full", kFull);
  // Where the output can be written, the same commands succeed.
  const Spawned ok =
      spawn("cd " + d.path.string() + " && " + tetra_bin() + " ckpt inspect ck > /dev/null");
  CHECK(ok.status == 0);
}
