// Small helpers the tests share.
#pragma once
#include <stdlib.h>

#include <doctest/doctest.h>

#include <bit>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "util/error.hpp"
#include "util/json.hpp"

namespace tetra::test {

// The whole file at `path` (empty if it cannot be read), and how often `what` occurs in `text`.
inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// How many lines of `text` are exactly `line`.
inline int lines_with(const std::string& text, const std::string& line) {
  return count("\n" + text + "\n", "\n" + line + "\n");
}

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
  std::string operator/(const std::string& name) const { return file(name); }
};

// Floats that test bf16 rounding: ties both ways, values just either side of a tie, a NaN,
// the overflow to infinity, a subnormal.
inline std::vector<float> bf16_rounding_cases() {
  return {1.0f,
          std::bit_cast<float>(0x3F808000u),
          std::bit_cast<float>(0x3F818000u),
          std::bit_cast<float>(0x3F808001u),
          std::bit_cast<float>(0x3F807FFFu),
          -0.0f,
          std::numeric_limits<float>::quiet_NaN(),
          3.4e38f,
          1e-40f};
}

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

// text parsed as JSON; a failed check with the parser's message when it is not JSON.
inline json parsed_json(const std::string& text) {
  json v;
  const std::string problem = parse_json(text, v);
  REQUIRE_MESSAGE(problem.empty(), problem);
  return v;
}

// The records of a JSONL file (a --metrics file, a sweep's), each line parsed.
inline std::vector<json> jsonl_records(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(bool(in), "cannot read ", path);
  std::vector<json> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(parsed_json(line));
  return out;
}

// v as an int64; a failed check when it is not an integer.
inline int64_t int_of(const json& v) {
  const std::optional<int64_t> i = json_int(v);
  REQUIRE_MESSAGE(i.has_value(), v.dump(), " is not an integer");
  return *i;
}

}  // namespace tetra::test
