// Inputs that cannot hang (issue 24, class 4). Every input path is opened as a regular file
// (or a directory where one is expected) through util/input_file, with O_NONBLOCK and the
// check on the open descriptor: a FIFO, whose open waits for a writer that never comes, is
// refused with one error line instead (exit 2). And a rank that hangs outside any collective
// is caught by the watchdog's step progress, as one that hangs inside one always was.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"
#include "util/input_file.hpp"

using namespace tetra::test;
namespace fs = std::filesystem;

namespace {

const std::string kModel =
    tetra::test::tiny_model_flags({.layers = 1, .heads = 2, .kv_heads = 1, .global_batch = 2});

std::string train(const std::string& args) {
  return tetra_bin() + " train" + kModel + args;
}

void fifo(const std::string& path) {
  fs::remove_all(path);
  REQUIRE(::mkfifo(path.c_str(), 0644) == 0);
}

}  // namespace

TEST_CASE("input files: open_input_file takes regular files only, without blocking") {
  TempDir d;
  fifo(d / "f");
  std::ofstream(d / "r") << "abc";
  CHECK(tetra::open_input_file(d / "f").problem == "it is a FIFO, not a regular file");
  CHECK(tetra::open_input_file(d.path.string()).problem == "it is a directory, not a regular file");
  CHECK(tetra::open_input_file("/dev/null").problem == "it is a device, not a regular file");
  CHECK(tetra::open_input_file(d / "missing").problem == tetra::kNotFound);
  const tetra::InputFile r = tetra::open_input_file(d / "r");
  CHECK(r.fd >= 0);
  CHECK(r.size == 3);
  std::string text;
  CHECK(tetra::read_input_file(d / "r", text) == "");
  CHECK(text == "abc");
  CHECK(tetra::read_input_file(d / "r", text, 2).find("past the 2 tetra reads") !=
        std::string::npos);
  CHECK(tetra::input_dir_problem(d / "r") == "it is not a directory");
  CHECK(tetra::input_dir_problem(d.path.string()) == "");
}

TEST_CASE("input files: a FIFO as --data, --val-data, --tokenizer or --init-from is refused") {
  TempDir d;
  fifo(d / "f");
  expect_refusal(train("--steps 1 --data " + (d / "f")),
                 "data file '" + (d / "f") + "': it is a FIFO");
  expect_refusal(train("--steps 1 --val-data " + (d / "f")), "it is a FIFO, not a regular file");
  expect_refusal(train("--steps 1 --init-from " + (d / "f")), "it is a FIFO, not a regular file");
  std::ofstream(d / "text.txt") << std::string(4000, 'a');
  expect_refusal(train("--steps 1 --data " + (d / "text.txt") + " --tokenizer " + (d / "f")),
                 "it is a FIFO, not a regular file");
}

TEST_CASE("input files: a model directory's config.json or weights as a FIFO are refused") {
  TempDir d;
  REQUIRE(spawn(train("--steps 1 --export " + (d / "m"))).status == 0);
  for (const std::string file : {"config.json", "model.safetensors"}) {
    CAPTURE(file);
    fs::copy(d / "m", d / "copy", fs::copy_options::recursive);
    fifo(d / ("copy/" + file));
    expect_refusal(train("--steps 1 --init-from " + (d / "copy")),
                   "it is a FIFO, not a regular file");
    expect_refusal(tetra_bin() + " generate --init-from " + (d / "copy") + " --prompt a --tokens 1",
                   "it is a FIFO, not a regular file");
    fs::remove_all(d / "copy");
  }
}

TEST_CASE("input files: plan --compare and plot inputs as a FIFO are refused") {
  TempDir d;
  fifo(d / "f");
  expect_refusal(tetra_bin() + " plan --compare " + (d / "f"), "it is a FIFO, not a regular file");
  for (const std::string flag : {"--loss", "--trace", "--barrier"})
    expect_refusal(tetra_bin() + " plot " + flag + " " + (d / "f") + " --out " + (d / "x.svg"),
                   "it is a FIFO, not a regular file");
}

TEST_CASE("input files: a checkpoint's manifest, latest or lock as a FIFO does not hang") {
  TempDir d;
  const std::string ck = d / "ck";
  REQUIRE(spawn(train("--steps 2 --ckpt-dir " + ck)).status == 0);
  // `latest` cannot be read: said, and the newest checkpoint that verifies is taken.
  fifo(ck + "/latest");
  const Spawned r = spawn(train("--steps 3 --allow-change steps --ckpt-dir " + ck), 30);
  CAPTURE(r.err);
  CHECK(r.status == 0);
  CHECK(count(r.err, "tetra: warning: '" + ck + "/latest' cannot be read (it is a FIFO") == 1);
  REQUIRE(fs::is_regular_file(ck + "/latest"));  // else reading it here would block the test
  CHECK(slurp(ck + "/latest") == "step_00000003\n");
  // A lock that is a FIFO is named, with what to do.
  fifo(ck + "/lock");
  expect_refusal(train("--steps 3 --ckpt-dir " + ck), "the lock '" + ck + "/lock' cannot be read");
  fs::remove(ck + "/lock");
  // ckpt verify and --resume of a checkpoint whose manifest is a FIFO.
  fifo(ck + "/step_00000002/manifest.json");
  expect_refusal(tetra_bin() + " ckpt verify " + ck + "/step_00000002", "it is a FIFO");
  expect_refusal(train("--steps 3 --resume " + ck + "/step_00000002"), "it is a FIFO");
}

TEST_CASE("input files: a rank that hangs outside any collective is caught by the watchdog") {
  // One rank: no collective ever waits for it, so only its step progress tells.
  const Spawned one = spawn(train("--steps 4 --inject-failure 0@1:hang --timeout 2"), 60);
  CAPTURE(one.err);
  CHECK(one.status != 0);
  CHECK(one.status != 124);
  CHECK(count(one.err, "tetra: error: watchdog:") == 1);
  CHECK(one.err.find("world rank 0 has made no progress in step 1 for ") != std::string::npos);
  // Two pipeline ranks, the first hanging: whichever notices first reports, once.
  const Spawned two = spawn(mpirun(2) + "--bind-to none " + tetra_bin() + " train " +
                                with_defaults(kModel,
                                              "--pp 2 --layers 2 --steps 4 "
                                              "--inject-failure 0@1:hang --timeout 2"),
                            60);
  CAPTURE(two.err);
  CHECK(two.status != 0);
  CHECK(two.status != 124);
  CHECK(count(two.err, "tetra: error: watchdog:") == 1);
}
