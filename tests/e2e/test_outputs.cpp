// Output paths (--export, --trace, --metrics) are checked before step 0: a device, a FIFO,
// a symbolic link or a directory is refused, not replaced, and a missing directory is
// caught before any training; a write that fails (here: past the file-size limit) stops the
// run with one error line instead of dropping metrics without a word.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../support/spawn.hpp"

using namespace tetra::test;

namespace {

const std::string kTrain =
    " train --dim 32 --layers 1 --heads 2 --kv-heads 1 --ffn-dim 64 --seq-len 16"
    " --global-batch 2 --peak-tflops 1 ";

void refused(const std::string& flags, const std::string& why) {
  CAPTURE(flags);
  const Spawned s = spawn(tetra_bin() + kTrain + "--steps 2 " + flags, 30);
  CHECK(s.status == 2);
  CHECK(count(s.err, "tetra: error:") == 1);
  CHECK(count(s.err, why) == 1);
  CHECK(count(s.out, "step ") == 0);  // refused before step 0
}

}  // namespace

TEST_CASE("outputs: what is not a regular file is refused before step 0 and left alone") {
  const TempDir tmp;
  const std::string dir = tmp / "outputs";
  std::filesystem::create_directories(dir);
  // Named .safetensors, so that --export takes them for one file, not a model directory.
  const std::string fifo = dir + "/fifo.safetensors", link = dir + "/link.safetensors",
                    real = dir + "/real.safetensors";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  std::ofstream(real) << "keep";
  std::filesystem::create_symlink(real, link);

  for (const std::string flag : {"--export", "--trace", "--metrics"}) {
    refused(flag + " " + fifo,
            "cannot write " + flag + " file '" + fifo + "': it is not a regular file");
    refused(flag + " " + link, "it is a symbolic link");
    refused(flag + " " + dir,
            flag == "--export" ? "is not a model directory tetra exported" : "it is a directory");
    refused(flag + " " + dir + "/missing/out",
            "its directory '" + dir + "/missing' does not exist");
  }
  struct stat st;
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  CHECK(slurp(real) == "keep");

  // A regular file, or a missing one in a writable directory, is written.
  const Spawned ok = spawn(tetra_bin() + kTrain + "--steps 2 --export " + real + " --metrics " +
                           dir + "/m.jsonl --trace " + dir + "/t.json");
  CHECK(ok.status == 0);
  CHECK(slurp(real).size() > 1000);
  CHECK(std::filesystem::exists(dir + "/m.jsonl"));
  CHECK(std::filesystem::exists(dir + "/t.json"));
}

TEST_CASE("outputs: a metrics write that fails stops the run with one error line") {
  const TempDir tmp;
  const std::string metrics = tmp / "limited.jsonl";
  // The file already holds all but 200 bytes of a 16 MiB file-size limit (32768 blocks of
  // 512 bytes; MPI's own shared-memory files need a few MiB), so the second record cannot be
  // written: with SIGXFSZ ignored, the write fails with EFBIG.
  std::filesystem::resize_file((std::ofstream(metrics), metrics), 32768 * 512 - 200);
  const Spawned s = spawn("trap \"\" XFSZ; ulimit -f 32768; " + tetra_bin() + kTrain +
                          "--steps 30 --metrics " + metrics);
  CHECK(s.status == 2);
  CHECK(count(s.err, "tetra: error: cannot write --metrics file") == 1);
  CHECK(count(s.err, "File too large") == 1);
}
