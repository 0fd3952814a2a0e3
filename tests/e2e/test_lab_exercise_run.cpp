// Exercises in the code, as a learner runs them: `tetra lab --exercise NAME --dir DIR` makes a
// copy with the function emptied, `tetra lab --check --dir DIR` builds the copy and fails it
// naming the first tensor that differs from one rank; with the reference body put back it
// passes. In one copy, so that only its first check builds everything: tp_column_backward and
// pp_1f1b_order end to end (a deadlocking order too), ring_reduce_scatter with a ring written
// as its stub says, the other exercises' stubs built and failed. And this build's grader passes
// every exercise's reference, the cheap check of all.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "jobs/lab_exercise.hpp"

namespace {

namespace fs = std::filesystem;
using tetra::test::count;
using tetra::test::mpirun;
using tetra::test::slurp;
using tetra::test::spawn;
using tetra::test::Spawned;
using tetra::test::TempDir;
using tetra::test::tetra_bin;

// The learner's commands. spawn() clears the environment; ccache's settings are passed on, so
// that where this build used ccache the copy's build finds its objects.
Spawned lab(const std::string& args, int timeout_s = 1500) {
  std::string env;
  for (const char* name : {"CCACHE_DIR", "CCACHE_BASEDIR"})
    if (const char* v = std::getenv(name)) env += std::string(name) + "=" + v + " ";
  Spawned r = spawn(env + tetra_bin() + " lab " + args, timeout_s);
  MESSAGE("tetra lab " << args << ": " << r.seconds << " s\n" << r.out << r.err);
  return r;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Puts tetra's own version of `file` back into the copy: the reference body.
void restore(const fs::path& copy, const std::string& file) {
  fs::copy_file(fs::path(TETRA_SOURCE_DIR) / file, copy / file,
                fs::copy_options::overwrite_existing);
}

// "fails on LAYOUT: TENSOR: gradient differs from one rank by X at [I, J] (...)".
bool names_a_tensor(const std::string& out, const std::string& layout) {
  return std::regex_search(
      out, std::regex("fails on " + layout +
                      ": (model\\.[a-z_.0-9]+|lm_head)\\.weight: gradient differs from one rank "
                      "by [0-9.e+-]+ at \\[[0-9]+(, [0-9]+)?\\]"));
}

}  // namespace

TEST_CASE("lab exercise: this build's grader passes every exercise's reference") {
  const TempDir dir;
  for (const tetra::lab::Exercise& e : tetra::lab::exercises()) {
    CAPTURE(e.name);
    const std::string ref = dir / (e.name + ".safetensors");
    const Spawned r = spawn(mpirun(1) + TETRA_LAB_GRADER + " reference " + e.name + " " + ref);
    CHECK(r.status == 0);
    const Spawned g = spawn(mpirun(4) + TETRA_LAB_GRADER + " grade " + e.name + " " + ref, 300);
    CAPTURE(g.out);
    CAPTURE(g.err);
    CHECK(g.status == 0);
    CHECK(g.out.find("passes: equal to one rank on ") != std::string::npos);
    MESSAGE(e.name << ": reference " << r.seconds << " s, grading " << g.seconds << " s");
  }
}

TEST_CASE(
    "lab exercise: --check fails each emptied function naming the tensor, passes it "
    "restored") {
  // In the build folder (ctest runs here), removed at the end.
  const fs::path copy = fs::absolute("lab_exercise_copy");
  fs::remove_all(copy);
  const std::string dir = " --dir " + copy.string();

  Spawned r = lab("--exercise tp_column_backward" + dir);
  REQUIRE(r.status == 0);
  const std::string tp = slurp(copy / "parallel/tp.cpp");
  CHECK(tp.find("// EXERCISE tp_column_backward: a stub to replace.") != std::string::npos);
  CHECK(tp.find("exercise(tp_column_backward)") == std::string::npos);
  CHECK(fs::exists(copy / "CMakeLists.txt"));
  CHECK_FALSE(fs::exists(copy / "build"));

  r = lab("--check" + dir);
  CHECK(r.status == 1);
  CHECK(names_a_tensor(r.out, "TP 2"));
  restore(copy, "parallel/tp.cpp");
  r = lab("--check" + dir);
  CHECK(r.status == 0);
  CHECK(r.out.find("passes: equal to one rank on TP 2; TP 2 x SP; TP 4 x SP; TP 2 x DP 2, "
                   "ZeRO-3 (3 steps") != std::string::npos);

  // Another exercise in the same copy: its build folder is kept, and so is the one file it
  // changes (tp.cpp is tetra's again).
  r = lab("--exercise pp_1f1b_order" + dir);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("It replaces exercise tp_column_backward there: 1 file changed") !=
        std::string::npos);
  CHECK(slurp(copy / ".tetra-exercise/replaced/parallel/schedule.cpp") ==
        slurp(fs::path(TETRA_SOURCE_DIR) / "parallel/schedule.cpp"));
  r = lab("--check" + dir);
  CHECK(r.status == 1);
  CHECK(r.out.find("fails before running anything: 1f1b PP 1, m 1: simulate: rank 0 runs 0 "
                   "actions, not 2 * V * m = 2") != std::string::npos);
  // An order that deadlocks (every backward before the forwards) is named, not run.
  {
    std::string text = slurp(copy / "parallel/schedule.cpp");
    const std::string stub = "static_cast<void>(w);";
    REQUIRE(text.find(stub) != std::string::npos);
    text.replace(text.find(stub), stub.size(),
                 "for (int k = 0; k < total; ++k) out.push_back(backward(k));\n"
                 "  for (int k = 0; k < total; ++k) out.push_back(forward(k));");
    write_file((copy / "parallel/schedule.cpp").string(), text);
  }
  r = lab("--check" + dir);
  CHECK(r.status == 1);
  CHECK(r.out.find("fails before running anything: 1f1b PP 1, m 1: deadlock: rank 0 stops at "
                   "B0.0, waiting for its own F0.0") != std::string::npos);
  restore(copy, "parallel/schedule.cpp");
  r = lab("--check" + dir);
  CHECK(r.status == 0);
  CHECK(r.out.find("passes: equal to one rank on PP 2, 1F1B; PP 4, 1F1B; PP 2, GPipe; PP 2, "
                   "interleaved V 2") != std::string::npos);

  // The ring, written as its stub says (isend / irecv, summing in place, receiving into the
  // shard): the stub fails naming a tensor, the learner's ring passes.
  REQUIRE(lab("--exercise ring_reduce_scatter" + dir).status == 0);
  r = lab("--check" + dir);
  CHECK(r.status == 1);
  CHECK(names_a_tensor(r.out, "DP 2, ZeRO-1"));
  {
    std::string text = slurp(copy / "parallel/zero.cpp");
    const std::string stub =
        "be_.copy(u.grad_shard.flat(), u.grads.flat(comm_.rank() * u.shard, u.shard));";
    REQUIRE(text.find(stub) != std::string::npos);
    text.replace(text.find(stub), stub.size(), R"(const int n = comm_.size(), r = comm_.rank();
  auto part = [&](int q) { return u.grads.flat(int64_t((q % n + n) % n) * u.shard, u.shard); };
  for (int t = 0; t + 1 < n; ++t) {
    auto sent = comm_.isend(part(r - t - 1), (r + 1) % n, t);
    auto got = comm_.irecv(u.grad_shard.flat(), (r + n - 1) % n, t);
    sent->wait();
    got->wait();
    be_.add(part(r - t - 2), u.grad_shard.flat());
  }
  be_.copy(u.grad_shard.flat(), part(r));)");
    write_file((copy / "parallel/zero.cpp").string(), text);
  }
  r = lab("--check" + dir);
  CHECK(r.status == 0);
  CHECK(r.out.find("passes: equal to one rank on DP 2, ZeRO-1; DP 4, ZeRO-1; CP 2 x DP 2, "
                   "ZeRO-2") != std::string::npos);

  // The others: each stub builds and fails, naming what differs.
  REQUIRE(lab("--exercise zero2_reduce_scatter" + dir).status == 0);
  r = lab("--check" + dir);
  CHECK(r.status == 1);
  CHECK(names_a_tensor(r.out, "DP 2, ZeRO-2"));
  REQUIRE(lab("--exercise cp_chunks" + dir).status == 0);
  r = lab("--check" + dir);
  CHECK(r.status == 1);
  CHECK(r.out.find("fails before running anything: CP 2, S 4: position 0 is held by 2 ranks: "
                   "each position of the sequence must be held by exactly one") !=
        std::string::npos);
  fs::remove_all(copy);
}

TEST_CASE("lab exercise: bad input is one error line") {
  const TempDir dir;
  const std::string bin = tetra_bin() + " lab ";
  tetra::test::expect_refusal(bin + "--exercise tp", "no exercise 'tp' (--exercise takes");
  tetra::test::expect_refusal(bin + "--check --dir " + (dir / "none"),
                              "holds no exercise: make one with tetra lab --exercise NAME");
  tetra::test::expect_refusal(bin + "--exercise cp_chunks --check", "one at a time");
  tetra::test::expect_refusal(bin + "dp --check", "--check takes no LESSON");
  tetra::test::expect_refusal(bin + "--dir x", "--dir needs --exercise NAME or --check");
  // A --dir that holds something else is left as it is.
  write_file(dir / "mine.txt", "mine");
  tetra::test::expect_refusal(bin + "--exercise cp_chunks --dir " + dir.path.string(),
                              "holds something else");
  CHECK(slurp(dir / "mine.txt") == "mine");
  // Sources that are not where tetra was built from: named, with the way out.
  tetra::test::expect_refusal("TETRA_SOURCE_DIR=" + (dir / "gone") + " " + bin +
                                  "--exercise cp_chunks --dir " + (dir / "ex"),
                              "the sources tetra was built from are not at '" + (dir / "gone") +
                                  "' ($TETRA_SOURCE_DIR): set TETRA_SOURCE_DIR");
}
