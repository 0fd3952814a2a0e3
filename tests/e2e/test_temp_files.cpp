// Temporary files that cannot be redirected (issue 24, class 1). Every write-then-rename makes
// its temporary fresh (O_CREAT | O_EXCL | O_NOFOLLOW, a random name beside the target), so a
// symbolic link planted where tetra used to put its temporary ("x.svg.tmp") is neither written
// through nor renamed over the output, and nothing outside the named output changes.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "util/output_file.hpp"

using namespace tetra::test;
namespace fs = std::filesystem;

namespace {

const std::string kTrain =
    " train --dim 32 --layers 1 --heads 2 --kv-heads 1 --ffn-dim 64 --seq-len 16"
    " --global-batch 2 --steps 2 --peak-tflops 1 ";

// A file that must keep its content, and a symbolic link to it at `link`.
void plant(const TempDir& d, const std::string& link) {
  std::ofstream(d / "precious.txt") << "keep";
  fs::create_symlink(d / "precious.txt", link);
}

bool is_regular(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_link(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

// The names in a directory, to check that no temporary is left behind.
std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// The planted link and its target are as they were, the output is a regular file.
void untouched(const TempDir& d, const std::string& link, const std::string& output) {
  CHECK(slurp(d / "precious.txt") == "keep");
  CHECK(is_link(link));
  CHECK(is_regular(output));
}

}  // namespace

TEST_CASE("temporary files: replace_file writes a fresh temporary, never a planted name") {
  TempDir d;
  const std::string out = d / "x.txt";
  plant(d, out + ".tmp");
  std::ofstream(out) << "old";
  CHECK(tetra::replace_file(out, std::string("new")) == "");
  CHECK(slurp(out) == "new");
  untouched(d, out + ".tmp", out);
  CHECK(names_in(d.path.string()) == std::set<std::string>{"precious.txt", "x.txt", "x.txt.tmp"});

  // Each temporary is new: two in one directory differ, and none opens what is there.
  const tetra::Temporary a = tetra::create_temporary(out), b = tetra::create_temporary(out);
  REQUIRE(a.fd >= 0);
  REQUIRE(b.fd >= 0);
  CHECK(a.path != b.path);
  CHECK(fs::path(a.path).parent_path() == d.path);
  ::close(a.fd);
  ::close(b.fd);
  ::unlink(a.path.c_str());
  ::unlink(b.path.c_str());

  // A failed write leaves the old content and no temporary.
  CHECK(tetra::replace_file(out, [](int) {
          errno = ENOSPC;
          return false;
        }).find("No space left on device") != std::string::npos);
  CHECK(slurp(out) == "new");
  CHECK(names_in(d.path.string()).size() == 3);
  // A directory that cannot take a temporary is named.
  CHECK(tetra::creation_problem((d / "missing") + "/x").find("cannot create a temporary") == 0);
}

TEST_CASE("temporary files: tetra plot --out and plan --draw do not write through x.svg.tmp") {
  TempDir d;
  for (const std::string cmd :
       {" plot --schedule 1f1b --pp 2 --out ", " plan --pp 2 --dp 1 --draw "}) {
    CAPTURE(cmd);
    fs::remove_all(d / "x.svg.tmp");
    fs::remove_all(d / "x.svg");
    plant(d, d / "x.svg.tmp");
    const Spawned r = spawn(tetra_bin() + cmd + (d / "x.svg"), 60);
    CAPTURE(r.err);
    CHECK(r.status == 0);
    untouched(d, d / "x.svg.tmp", d / "x.svg");
    CHECK(slurp(d / "x.svg").find("<svg") != std::string::npos);
    CHECK(names_in(d.path.string()) == std::set<std::string>{"precious.txt", "x.svg", "x.svg.tmp"});
    fs::remove(d / "precious.txt");
  }
}

TEST_CASE("temporary files: --export (file and directory) and --trace do not write through links") {
  TempDir d;
  // One .safetensors file.
  plant(d, d / "w.safetensors.tmp");
  Spawned r = spawn(tetra_bin() + kTrain + "--export " + (d / "w.safetensors"));
  CAPTURE(r.err);
  CHECK(r.status == 0);
  untouched(d, d / "w.safetensors.tmp", d / "w.safetensors");

  // A model directory (tetra's own, so that it may be written again): each of its files.
  REQUIRE(spawn(tetra_bin() + kTrain + "--export " + (d / "model")).status == 0);
  for (const std::string f : {"model.safetensors", "config.json"})
    fs::create_symlink(d / "precious.txt", d / ("model/" + f + ".tmp"));
  r = spawn(tetra_bin() + kTrain + "--export " + (d / "model"));
  CAPTURE(r.err);
  CHECK(r.status == 0);
  for (const std::string f : {"model.safetensors", "config.json"})
    untouched(d, d / ("model/" + f + ".tmp"), d / ("model/" + f));
  CHECK(names_in(d / "model") == std::set<std::string>{"config.json", "config.json.tmp",
                                                       "model.safetensors",
                                                       "model.safetensors.tmp"});

  // The trace: its start-up probe (which truncated the link's target) and its write.
  plant(d, d / "t.json.tmp");
  fs::remove(d / "precious.txt");
  std::ofstream(d / "precious.txt") << "keep";
  r = spawn(tetra_bin() + kTrain + "--trace " + (d / "t.json"));
  CAPTURE(r.err);
  CHECK(r.status == 0);
  untouched(d, d / "t.json.tmp", d / "t.json");
  CHECK(slurp(d / "t.json").find("traceEvents") != std::string::npos);
}

TEST_CASE("temporary files: the checkpoint directory's probe and latest do not write through") {
  TempDir d;
  const std::string ck = d / "ck";
  fs::create_directory(ck);
  std::ofstream(d / "precious.txt") << "keep";
  // The names the probe and `latest` used for their temporaries.
  for (const std::string f : {".tetra_write_probe", "latest.tmp"})
    fs::create_symlink(d / "precious.txt", ck + "/" + f);
  const Spawned r = spawn(tetra_bin() + kTrain + "--ckpt-dir " + ck);
  CAPTURE(r.err);
  CHECK(r.status == 0);
  CHECK(slurp(d / "precious.txt") == "keep");
  CHECK(is_link(ck + "/.tetra_write_probe"));
  CHECK(is_link(ck + "/latest.tmp"));
  CHECK(is_regular(ck + "/latest"));
  CHECK(slurp(ck + "/latest") == "step_00000002\n");
  CHECK(names_in(ck) ==
        std::set<std::string>{".tetra_write_probe", "latest", "latest.tmp", "step_00000002"});
}
