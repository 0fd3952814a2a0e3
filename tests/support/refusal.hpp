// A refused command: one "tetra: error:" line, its documented status (util/error.hpp's
// exit_status table), no step run, and the directory it ran in exactly as it was: the same
// names, each file's size and content, each link's target. A refusal that changed anything
// (created a checkpoint directory, moved `latest`, truncated a file, wrote through a link)
// fails here, whichever file it touched.
#pragma once
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "spawn.hpp"
#include "test_util.hpp"
#include "util/error.hpp"

namespace tetra::test {

// Every entry under root, one line each in name order: "a/b: file 12 bytes, fnv 3f2a...",
// "a/l: link -> target", "a/: directory", "a/f: fifo" (anything else: its mode). Links are
// listed, never followed.
inline std::string tree_listing(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  std::vector<std::string> lines;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string name = fs::relative(p, root).string();
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) {
      lines.push_back(name + ": vanished");
      continue;
    }
    if (S_ISLNK(st.st_mode)) {
      lines.push_back(name + ": link -> " + fs::read_symlink(p, ec).string());
    } else if (S_ISDIR(st.st_mode)) {
      lines.push_back(name + "/: directory");
    } else if (S_ISREG(st.st_mode)) {
      uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the content
      for (const char c : slurp(p.string())) h = (h ^ uint8_t(c)) * 0x100000001b3ull;
      char hash[17];
      std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(h));
      lines.push_back(name + ": file " + std::to_string(st.st_size) + " bytes, fnv " + hash);
    } else {
      lines.push_back(name +
                      (S_ISFIFO(st.st_mode) ? ": fifo" : ": mode " + std::to_string(st.st_mode)));
    }
  }
  if (ec) lines.push_back("(listing failed: " + ec.message() + ")");
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// Runs the shell line `command` in `cwd` (a directory the test may have filled) and checks the
// refusal: exit `status` within timeout_s (a run that blocks or allocates for minutes ends in
// the limit's status instead), exactly one "tetra: error:" line, which holds `why`, no step
// line, and cwd's tree as it was before.
inline Spawned expect_refusal_in(const std::filesystem::path& cwd, const std::string& command,
                                 const std::string& why, int status = exit_status::kInput,
                                 int timeout_s = 30) {
  CAPTURE(command);
  const std::string before = tree_listing(cwd);
  const Spawned r = spawn("cd " + cwd.string() + " && " + command, timeout_s);
  CAPTURE(r.err);
  CHECK(r.status == status);
  CHECK(count(r.err, "tetra: error:") == 1);
  CHECK(r.err.find(why) != std::string::npos);
  CHECK(count("\n" + r.out, "\nstep ") == 0);  // refused before any step
  CHECK(tree_listing(cwd) == before);
  return r;
}

// The same in a fresh empty directory, which must stay empty.
inline Spawned expect_refusal(const std::string& command, const std::string& why,
                              int status = exit_status::kInput, int timeout_s = 30) {
  const TempDir cwd;
  return expect_refusal_in(cwd.path, command, why, status, timeout_s);
}

}  // namespace tetra::test
