// Exercises in the code (jobs/lab_exercise.hpp): every exercise's markers are in the sources
// tetra was built from exactly once, in its file and nowhere else, and its stub replaces them
// and nothing else; the copy step's refusals. That each stub compiles and fails its check,
// and that the reference passes, is tests/e2e/test_lab_exercise_run.cpp's.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "../support/test_util.hpp"
#include "jobs/lab_exercise.hpp"
#include "util/error.hpp"

namespace {

namespace fs = std::filesystem;
using tetra::lab::Exercise;
using tetra::lab::exercises;
using tetra::lab::stubbed;

doctest::Contains has(const std::string& part) {
  return doctest::Contains(part.c_str());
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("lab exercise: each stub replaces its marked lines and nothing else") {
  const std::string source = tetra::lab::source_dir();
  for (const Exercise& e : exercises()) {
    CAPTURE(e.name);
    const std::string text = tetra::test::slurp(source + "/" + e.file);
    const std::vector<std::string> before = lines_of(text), after = lines_of(stubbed(text, e));
    size_t begin = 0, end = 0;
    for (size_t i = 0; i < before.size(); ++i) {
      if (before[i].find("// exercise(" + e.name + ") begin") != std::string::npos) begin = i;
      if (before[i].find("// exercise(" + e.name + ") end") != std::string::npos) end = i;
    }
    REQUIRE(begin < end);
    const size_t stub_lines = lines_of(e.stub).size();
    REQUIRE(after.size() == before.size() - (end - begin + 1) + stub_lines);
    for (size_t i = 0; i < begin; ++i) CHECK(after[i] == before[i]);
    for (size_t i = end + 1; i < before.size(); ++i)
      CHECK(after[i - (end - begin + 1) + stub_lines] == before[i]);
    // The stub says it is one and what to do, indented as the marker was.
    const std::string indent = before[begin].substr(0, before[begin].find('/'));
    CHECK(after[begin].rfind(indent + "// EXERCISE " + e.name + ": a stub to replace.", 0) == 0);
    CHECK(stubbed(text, e).find("exercise(" + e.name + ")") == std::string::npos);
    CHECK(stubbed(text, e).find("The stub ") != std::string::npos);
  }
}

TEST_CASE("lab exercise: the markers are in the sources once each, in the exercise's file") {
  const fs::path source = tetra::lab::source_dir();
  std::map<std::string, int> seen;  // "file: marker line" -> count
  for (const char* folder : {"util", "backend", "model", "parallel", "transformer", "optim", "data",
                             "checkpoint", "plan", "train", "plot", "jobs", "cli"}) {
    for (const auto& f : fs::recursive_directory_iterator(source / folder)) {
      if (f.path().extension() != ".cpp" && f.path().extension() != ".hpp") continue;
      for (const std::string& line : lines_of(tetra::test::slurp(f.path().string()))) {
        const size_t at = line.find("// exercise(");
        if (at != std::string::npos && line.find_first_not_of(' ') == at)
          ++seen[f.path().lexically_relative(source).string() + ": " + line.substr(at)];
      }
    }
  }
  std::map<std::string, int> expected;
  for (const Exercise& e : exercises()) {
    expected[e.file + ": // exercise(" + e.name + ") begin"] = 1;
    expected[e.file + ": // exercise(" + e.name + ") end"] = 1;
  }
  CHECK(seen == expected);
  CHECK(exercises().size() == 5);
}

TEST_CASE("lab exercise: markers missing, doubled or reversed are refused") {
  const Exercise& e = tetra::lab::find_exercise("cp_chunks");
  const std::string b = "  // exercise(cp_chunks) begin\n", x = "  int x = 0;\n",
                    end = "  // exercise(cp_chunks) end\n";
  CHECK(stubbed("a\n" + b + x + end + "z\n", e).find("EXERCISE cp_chunks") != std::string::npos);
  for (const std::string& bad : {x, b + x, x + end, b + b + x + end, end + x + b})
    CHECK_THROWS_WITH_AS(stubbed(bad, e), has("must hold the lines '// exercise(cp_chunks) begin'"),
                         tetra::Error);
  CHECK_THROWS_WITH_AS(tetra::lab::find_exercise("tp"),
                       has("no exercise 'tp' (--exercise takes ring_reduce_scatter, "
                           "zero2_reduce_scatter, tp_column_backward, pp_1f1b_order, cp_chunks)"),
                       tetra::Error);
}
