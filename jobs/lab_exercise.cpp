// tetra lab --exercise and --check: the exercises' stubs, the copy, the build and the grading.
#include "jobs/lab_exercise.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "checkpoint/safetensors.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"
#include "util/json.hpp"
#include "util/output_file.hpp"

namespace tetra::lab {

namespace fs = std::filesystem;

namespace {

// Each stub's lines; stubbed() indents them as the begin marker is.
const char* const kRingStub =
    R"(// EXERCISE ring_reduce_scatter: a stub to replace. `tetra lab --check` grades what you write.
//
// The data-parallel gradient sync, the first pass of a ring all-reduce. Each of the N ranks of
// the dp_cp group (comm_) holds the unit's full gradients of its own sequences, u.grads [np]
// (fp32, np = N s with the padding: part q is u.grads.flat(q * s, s), s = u.shard); rank r
// must end with
//   u.grad_shard [s] = the sum over all ranks q of q's part r,
// its 1/N of the summed gradients, which AdamW then updates; the second pass, the all-gather of
// the updated weights (publish()), brings every rank the rest.
// Write the ring: in step t = 0 .. N - 2 rank r sends its running sum of part (r - t - 1) mod N
// to rank (r + 1) mod N and receives part (r - t - 2) mod N from rank (r - 1) mod N, which it
// adds to its own: comm_.isend(x, peer, tag) and comm_.irecv(x, peer, tag), then wait() on
// both; be_.add(y, x) is y += x. Sum in place in u.grads (its parts are free to overwrite)
// and receive into u.grad_shard, which is s long: no new buffer, as the check holds each
// rank's peak memory to tetra plan's. After N - 1 steps part r holds the sum over every rank:
// copy it into u.grad_shard (be_.copy(dst, src)). A rank sends (N - 1) s floats, (N - 1) / N
// of its gradients, at any N, and the check holds the bytes sent to tetra plan's count too.
// tetra itself calls the collective, comm_.reduce_scatter(out, in), which on MPI runs this
// same ring over MPI_Sendrecv (faster than MPI's own algorithms on a few ranks).
// The stub copies this rank's own part, unsummed: one rank's gradients, not the group's.
be_.copy(u.grad_shard.flat(), u.grads.flat(comm_.rank() * u.shard, u.shard));
)";

const char* const kZeroStub =
    R"(// EXERCISE zero2_reduce_scatter: a stub to replace. `tetra lab --check` grades what you
// write.
//
// Model code calls this after each weight-gradient pass (W) of unit u, one per micro-batch;
// each has added its gradients into u.grads [np] (fp32). After the step's last one
// (micro_batches_ of them; count them in u.weight_passes, which grads_fresh() reads) the unit's
// gradients are complete, and they are reduce-scattered at once, while the backward of the
// units before it goes on: reduce_scatter_grads(u) sums them over dp_cp into this rank's shard,
// u.grad_shard [s = np / N]. Then ZeRO-2 (and 3, zero_ >= 2) free the full gradients,
// u.grads.reset(), keeping the shard alone: 4 s bytes a unit instead of 4 (np + s), ZeRO-2's
// saving over ZeRO-1, which keeps u.grads. Where the dp_cp group is one rank (alias_) the
// shard is u.grads itself: nothing to free. The check holds each rank's peak memory to tetra
// plan's, which frees each unit's gradients right after its reduce-scatter.
// The stub counts the pass and syncs nothing: the shard stays zero, the gradients stay.
++u.weight_passes;
be_.fill(grad_shard(u), 0.f);
)";

const char* const kTpStub =
    R"(// EXERCISE tp_column_backward: a stub to replace. `tetra lab --check` grades what you write.
//
// This rank holds out/TP rows of the weight, w_ [out/TP, in]; forward computed
// y [T, out/TP] = x W^T from the input on all T tokens, x [T, in]. Given dy [T, out/TP]
// (backward_weight below does the weight gradient, dW += dy^T x, in its own pass):
//  1. the input gradient: dx [T, in] = dy W. This rank holds only out/TP of the outputs, so
//     its dy W is a partial sum: the full dx is the sum over the TP group.
//     be_.matmul(C, A, transpose A, B, transpose B) computes C = op(A) op(B).
//  2. return it summed over the TP group, on the rows this rank keeps outside the TP region:
//     the conjugate of forward's entry. Forward's identity (copy_to_tensor_parallel_region)
//     has an all-reduce for backward, [T, in] -> [T, in]; under --sp forward all-gathered the
//     rows (gather_from_sequence_parallel_region), and backward reduce-scatters them,
//     [T, in] -> [T/TP, in]. reduce_tokens() above does the one the layout needs; at TP 1 the
//     sum is dx itself.
// The stub returns zeros, [tp_.local_rows(T), in].
Buffer dx(be_, tp_.local_rows(dy.rows()) * w_.cols(), dy.dtype);
be_.fill(dx.flat(), 0.f);
return dx;
)";

const char* const kCpStub =
    R"(// EXERCISE cp_chunks: a stub to replace. `tetra lab --check` grades what you write.
//
// Context parallelism cuts each sequence of S tokens into 2 CP equal chunks; chunk k holds the
// positions [k S / (2 CP), (k + 1) S / (2 CP)). Under the causal mask the query at position p
// scores p + 1 keys, so early chunks are cheap and late ones dear: CP rank c takes chunk c and
// its mirror, chunk 2 CP - 1 - c, and every rank scores the same number of query-key pairs.
// Append to pos rank c's S / CP global positions: chunk c's in increasing order, then chunk
// 2 CP - 1 - c's (the K/V all-gather's reordering, Backend::cp_zigzag, expects this order).
// CP 2, S 16: rank 0 holds 0 1 2 3 12 13 14 15, rank 1 holds 4 5 6 7 8 9 10 11. At CP 1 the
// one rank holds all S (chunks 0 and 1; S may be odd there).
// The stub gives every rank the first S / CP positions.
for (int64_t p = 0; p < S / cp; ++p) pos.push_back(int32_t(p));
)";

const char* const kPpStub =
    R"(// EXERCISE pp_1f1b_order: a stub to replace. `tetra lab --check` grades what you write.
//
// Append to out this rank's 2 total actions in the order it runs them: forward(k) is its k-th
// forward and backward(k) its k-th backward, k = 0 .. total - 1 (with V = 1 both are
// micro-batch k of chunk 0, and total = m). 1F1B (PipeDream-Flush): first w warm-up forwards
// (w = warmup_forwards(): PP - rank - 1, what keeps the stages below this one busy until the
// first gradient comes back), then one forward and one backward in turn, forward(w + i) before
// backward(i), while forwards are left, then the remaining w backwards. PP 4, m 8:
//   rank 0: F0 F1 F2 | F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 | B5 B6 B7
//   rank 3:          | F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7
// So a rank holds at most w + 1 micro-batches' activations, where GPipe (w = m: all forwards,
// then all backwards) holds all m. The same three phases give GPipe and interleaved 1F1B their
// orders (w, forward() and backward() are theirs). Before anything runs, the check simulates
// every rank's list: each action once, no rank waiting for what never comes, every link's
// messages in the order they are taken, at most w + 1 activations held.
// The stub returns no actions.
static_cast<void>(w);
)";

// Lines of `text`, without their line ends.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Where the exercise's state lives in its copy: DIR/.tetra-exercise/.
std::string state_dir(const std::string& dir) {
  return dir + "/.tetra-exercise";
}

std::string read_text(const std::string& path) {
  std::string text;
  const std::string problem = read_input_file(path, text);
  check(problem.empty(), "cannot read '", path, "': ", problem);
  return text;
}

// Whether a directory of the source tree is left out of the copy: hidden ones (.git), build
// folders, exercise copies, and what .gitignore leaves out at the top (runs, corpora).
bool left_out(const fs::path& p, const fs::path& source) {
  const std::string name = p.filename().string();
  const bool top = p.parent_path() == source;
  return (!name.empty() && name[0] == '.') || name == "build" || name.rfind("build-", 0) == 0 ||
         name == "__pycache__" || (top && (name == "runs" || name == "corpus")) ||
         fs::exists(p / "CMakeCache.txt") || fs::exists(p / ".tetra-exercise");
}

// The files to copy: every regular file under `source` but those left out, as relative paths.
std::vector<fs::path> source_files(const fs::path& source, const fs::path& copy) {
  std::vector<fs::path> out;
  std::error_code ec;
  const fs::path copy_abs = fs::weakly_canonical(copy, ec);
  fs::recursive_directory_iterator it(source, ec), end;
  check(!ec, "cannot list the sources in '", source.string(), "': ", ec.message());
  for (; it != end; it.increment(ec)) {
    check(!ec, "cannot list the sources in '", source.string(), "': ", ec.message());
    const fs::path p = it->path();
    if (it->is_symlink()) continue;
    if (it->is_directory()) {
      if (left_out(p, source) || fs::weakly_canonical(p, ec) == copy_abs)
        it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && p.filename().string()[0] != '.' && p.extension() != ".pyc")
      out.push_back(p.lexically_relative(source));
  }
  return out;
}

// Writes `text` to path when the file does not hold it already (a build that follows then
// rebuilds only what changed). The previous content, where there was one, is kept under
// `keep` first. True when it wrote.
bool write_if_changed(const fs::path& path, const std::string& text, const fs::path& keep) {
  std::string old;
  const bool existed = fs::exists(path);
  if (existed && read_input_file(path.string(), old).empty() && old == text) return false;
  std::error_code ec;
  if (existed) {
    fs::create_directories(keep.parent_path(), ec);
    fs::copy_file(path, keep, fs::copy_options::overwrite_existing, ec);
    check(!ec, "cannot keep '", path.string(), "' in '", keep.string(), "': ", ec.message());
  }
  fs::create_directories(path.parent_path(), ec);
  const std::string problem = replace_file(path.string(), text);
  check(problem.empty(), problem);
  return true;
}

// The exercise a copy holds (its DIR/.tetra-exercise/exercise.json), or "" for a directory
// that is no exercise copy.
std::string exercise_in(const std::string& dir) {
  const std::string path = state_dir(dir) + "/exercise.json";
  if (!fs::exists(path)) return "";
  json j;
  const std::string problem = parse_json(read_text(path), j);
  check(problem.empty() && j.is_object() && j.contains("exercise") && j["exercise"].is_string(),
        "'", path, "' is not tetra lab's record of an exercise", problem.empty() ? "" : ": ",
        problem);
  return j["exercise"].get<std::string>();
}

// Where `program` is on the PATH, or "".
std::string on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');)
    if (!d.empty() && ::access((d + "/" + program).c_str(), X_OK) == 0) return d + "/" + program;
  return "";
}

std::string jobs_flag() {
  return std::to_string(std::max(1u, std::thread::hardware_concurrency()));
}

// Runs one step of the check, saying what and how long; its output goes to `log`.
JobResult step(const std::string& what, const std::vector<std::string>& argv,
               const std::string& log, double timeout_s) {
  std::printf("%s ... ", what.c_str());
  std::fflush(stdout);
  const JobResult r = run_job(argv, log, timeout_s);
  std::printf("%.1f s\n", r.seconds);
  return r;
}

// The compiler's first error lines in a build log, for a copy that does not build.
std::string first_errors(const std::string& log, int most = 8) {
  std::string out;
  int n = 0;
  for (const std::string& line : lines_of(read_text(log)))
    if (line.find("error") != std::string::npos && n++ < most) out += "  " + line + "\n";
  return out;
}

// The grader of tetra's own build, built there first when it is not.
std::string reference_grader(const std::string& state) {
  const std::string grader = TETRA_LAB_GRADER, build = TETRA_BUILD_DIR;
  if (fs::exists(grader)) return grader;
  check(fs::exists(build + "/CMakeCache.txt"), "the grader of tetra's own build ('", grader,
        "') is missing, and so is the build folder tetra was built in ('", build,
        "'): rebuild tetra");
  const JobResult r = step("building the grader of tetra's own build (once)",
                           {"cmake", "--build", build, "--target", "lab_grader", "-j", jobs_flag()},
                           state + "/reference_build.log", 0);
  if (r.exit_code != 0)
    throw JobFailed("tetra's own grader does not build (exit " + std::to_string(r.exit_code) +
                    "; log: " + state + "/reference_build.log)");
  return grader;
}

}  // namespace

const std::vector<Exercise>& exercises() {
  static const std::vector<Exercise> all = {
      {"ring_reduce_scatter", "dp", "parallel/zero.cpp",
       "ZeroParams::reduce_scatter_grads (the reduce-scatter of the gradient sync)", kRingStub},
      {"zero2_reduce_scatter", "zero", "parallel/zero.cpp",
       "ZeroParams::hand_over_grads (ZeRO-2's reduce-scatter hand-over)", kZeroStub},
      {"tp_column_backward", "tp", "parallel/tp.cpp", "ColumnParallelLinear::backward_input",
       kTpStub},
      {"pp_1f1b_order", "pp", "parallel/schedule.cpp", "make_schedule (1F1B's order)", kPpStub},
      {"cp_chunks", "cp", "parallel/cp.cpp", "cp_positions (the chunk assignment)", kCpStub},
  };
  return all;
}

const Exercise& find_exercise(const std::string& name) {
  std::string names;
  for (const Exercise& e : exercises()) {
    if (e.name == name) return e;
    names += (names.empty() ? "" : ", ") + e.name;
  }
  fail("no exercise '", name, "' (--exercise takes ", names, ")");
}

std::string stubbed(const std::string& text, const Exercise& e) {
  const std::string begin = "// exercise(" + e.name + ") begin",
                    end = "// exercise(" + e.name + ") end";
  const std::vector<std::string> lines = lines_of(text);
  std::vector<size_t> at_begin, at_end;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (trimmed(lines[i]) == begin) at_begin.push_back(i);
    if (trimmed(lines[i]) == end) at_end.push_back(i);
  }
  check(at_begin.size() == 1 && at_end.size() == 1 && at_begin[0] < at_end[0], e.file,
        " must hold the lines '", begin, "' and '", end, "' once each, in that order (found ",
        at_begin.size(), " and ", at_end.size(), ")");
  const std::string& first = lines[at_begin[0]];
  const std::string indent = first.substr(0, first.find_first_not_of(" \t"));
  std::string out;
  for (size_t i = 0; i < at_begin[0]; ++i) out += lines[i] + "\n";
  for (const std::string& s : lines_of(e.stub)) out += (s.empty() ? "" : indent) + s + "\n";
  for (size_t i = at_end[0] + 1; i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

std::string source_dir() {
  const char* env = std::getenv("TETRA_SOURCE_DIR");
  const std::string dir = env && *env ? env : TETRA_SOURCE_DIR;
  const char* from = env && *env ? " ($TETRA_SOURCE_DIR)" : " (where tetra was built from)";
  check(fs::exists(dir + "/CMakeLists.txt") && fs::exists(dir + "/parallel/tp.cpp"),
        "the sources tetra was built from are not at '", dir, "'", from,
        ": set TETRA_SOURCE_DIR to a copy of them");
  return dir;
}

int make_exercise(const std::string& name, const std::string& dir) {
  const Exercise& e = find_exercise(name);
  const std::string source = source_dir();
  const std::string previous = fs::is_directory(dir) ? exercise_in(dir) : "";
  std::error_code ec;
  if (previous.empty() && fs::exists(dir))
    check(fs::is_directory(dir) && fs::is_empty(dir, ec), "--dir '", dir,
          "' holds something else: tetra lab --exercise makes its copy in a new or empty "
          "directory, or replaces an exercise's copy");
  fs::create_directories(dir, ec);
  check(fs::is_directory(dir), "cannot make --dir '", dir, "'", ec ? ": " + ec.message() : "");
  const std::string stub = stubbed(read_text(source + "/" + e.file), e);

  const fs::path state = state_dir(dir), kept = state / "replaced";
  fs::remove_all(kept, ec);
  int replaced = 0;
  for (const fs::path& rel : source_files(source, dir)) {
    const std::string text = rel == e.file ? stub : read_text((source / rel).string());
    const bool existed = fs::exists(dir / rel);
    replaced += write_if_changed(dir / rel, text, kept / rel) && existed;
  }
  fs::create_directories(state, ec);
  const std::string problem =
      replace_file((state / "exercise.json").string(),
                   json{{"exercise", e.name}, {"source", source}}.dump(2) + "\n");
  check(problem.empty(), problem);

  int line = 1;
  for (const std::string& l : lines_of(stub)) {
    if (l.find("// EXERCISE " + e.name) != std::string::npos) break;
    ++line;
  }
  std::printf(
      "exercise %s (lesson %s): tetra's sources, copied from %s into %s,\n"
      "with %s emptied:\n%s/%s, line %d, says what it must do.\n",
      e.name.c_str(), e.lesson.c_str(), source.c_str(), dir.c_str(), e.function.c_str(),
      dir.c_str(), e.file.c_str(), line);
  if (!previous.empty())
    std::printf(
        "It replaces exercise %s there: %d file%s changed, the previous versions in "
        "%s; the build folder is kept.\n",
        previous.c_str(), replaced, replaced == 1 ? "" : "s", kept.c_str());
  std::printf(
      "Write it, then: tetra lab --check --dir %s\n"
      "(the first check builds the copy, minutes; later ones rebuild what changed)\n",
      dir.c_str());
  return 0;
}

int check_exercise(const std::string& dir, const JobOptions& job) {
  const std::string name = fs::is_directory(dir) ? exercise_in(dir) : "";
  check(!name.empty(), "--dir '", dir,
        "' holds no exercise: make one with tetra lab --exercise NAME --dir ", dir);
  const Exercise& e = find_exercise(name);
  const std::string state = state_dir(dir), build = dir + "/build";
  std::printf("checking exercise %s, %s in %s/%s\n", e.name.c_str(), e.function.c_str(),
              dir.c_str(), e.file.c_str());

  // The copy's grader and what it links, nothing else.
  if (!fs::exists(build + "/CMakeCache.txt")) {
    std::vector<std::string> configure = {
        "cmake", "-S", dir, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DTETRA_CUDA=OFF"};
    if (!on_path("ccache").empty()) configure.push_back("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache");
    const JobResult r =
        step("configuring the copy (cmake)", configure, state + "/configure.log", 0);
    if (r.exit_code != 0)
      throw JobFailed("cmake cannot configure the copy (exit " + std::to_string(r.exit_code) +
                      "): " + log_error(state + "/configure.log") + " (log: " + state +
                      "/configure.log)");
  }
  // ccache finds tetra's own objects when both builds name their files relative to their
  // trees: a base directory at or above each (tools/setup.sh builds tetra with its own).
  std::vector<std::string> make = {"cmake",      "--build", build,      "--target",
                                   "lab_grader", "-j",      jobs_flag()};
  const char* basedir = std::getenv("CCACHE_BASEDIR");
  if (!on_path("ccache").empty() && !(basedir && *basedir))
    make.insert(make.begin(),
                {"env", "CCACHE_BASEDIR=" + fs::absolute(dir).lexically_normal().string()});
  const std::string build_log = state + "/build.log";
  const JobResult built = step("building the copy's grader", make, build_log, 0);
  if (built.exit_code != 0) {
    std::printf("fails: the copy does not build; the first errors:\n%s(the whole log: %s)\n",
                first_errors(build_log).c_str(), build_log.c_str());
    return exit_status::kFailed;
  }

  // One rank, from tetra's own sources.
  const std::string reference = state + "/reference.safetensors";
  std::vector<std::string> argv = launcher_words(job.launcher, 1);
  argv.insert(argv.end(), {reference_grader(state), "reference", e.name, reference});
  const JobResult ref =
      step("one rank, from tetra's own sources", argv, state + "/reference.log", job.run_timeout);
  if (ref.exit_code != 0 || ref.timed_out)
    throw JobFailed("the one-rank reference " +
                    std::string(ref.timed_out ? "timed out" : "failed") + " (exit " +
                    std::to_string(ref.exit_code) + "): " + log_error(state + "/reference.log") +
                    " (log: " + state + "/reference.log)");
  const int ranks = std::stoi(st::Reader(reference).metadata().at("ranks"));

  const std::string grade_log = state + "/grade.log";
  argv = launcher_words(job.launcher, ranks);
  argv.insert(argv.end(), {build + "/tests/lab_grader", "grade", e.name, reference});
  const JobResult graded =
      step("grading on " + std::to_string(ranks) + " ranks", argv, grade_log, job.run_timeout);
  bool passed = false, said = false;
  for (const std::string& line : lines_of(read_text(grade_log))) {
    const bool verdict = line.rfind("passes: ", 0) == 0 || line.rfind("fails ", 0) == 0;
    if (verdict || line.find(": equal to one rank") != std::string::npos)
      std::printf("%s\n", line.c_str());
    said = said || verdict;
    passed = passed || line.rfind("passes: ", 0) == 0;
  }
  if (graded.timed_out) {
    std::printf("fails: the grader did not finish in %.0f s (log: %s)\n", job.run_timeout,
                grade_log.c_str());
    return exit_status::kFailed;
  }
  if (!said || (passed != (graded.exit_code == 0))) {
    std::printf("fails: the grader ended with exit %d: %s (log: %s)\n", graded.exit_code,
                log_error(grade_log).c_str(), grade_log.c_str());
    return exit_status::kFailed;
  }
  if (!passed)
    std::printf("Fix %s in %s/%s, then check again.\n", e.function.c_str(), dir.c_str(),
                e.file.c_str());
  return passed ? exit_status::kOk : exit_status::kFailed;
}

}  // namespace tetra::lab
