// Small helpers the unit tests share.
#pragma once
#include <stdlib.h>

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "model/error.hpp"

namespace tetra::test {

// A fresh directory under the system temp dir, removed with everything in it at scope end
// (write permission restored first, for tests that take it away).
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "tetra_XXXXXX").string();
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    path = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// The message of the tetra::Error that fn throws, or "" when it throws nothing.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const tetra::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tetra::test
