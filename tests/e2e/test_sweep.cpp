// tetra sweep: the layouts it runs are exactly those an enumeration written here from
// tetra's rules finds; on 4 ranks every layout runs, matches one rank, sends the plan's bytes
// and holds the plan's memory (within 10 %); the SVG has one entry per layout; layouts made
// to fail (a rank killed) or to differ (another seed) by the launcher are reported as such
// and the sweep goes on; bad input is one error line; a SIGTERM to the sweep or the lab
// stops its running job and exits 130. Runs the real `tetra` binary.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/spawn.hpp"
#include "../support/svg_summary.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"
#include "plan/memory.hpp"
#include "plan/setup.hpp"
#include "plan/traffic.hpp"

namespace {

using tetra::json;
using tetra::test::count;
using tetra::test::int_of;
using tetra::test::jsonl_records;
using tetra::test::parsed_json;
using tetra::test::spawn;
using tetra::test::Spawned;
using tetra::test::svg_summary;
using tetra::test::TempDir;
using tetra::test::tetra_bin;

// The tiny model of these tests: TP 4 cannot split its 2 KV heads; PP 4 fits its 4 layers.
const std::string kModel = tetra::test::tiny_model_flags(
    {.layers = 4, .dim = 64, .ffn_dim = 128, .global_batch = 8, .peak_tflops = 0});

struct Model {
  int layers = 4, heads = 4, kv = 2, ffn = 128, vocab = 256, seq = 16, batch = 8;
};

// The layouts of `ranks` ranks by tetra's rules as the README and docs/design.md state them,
// written out here rather than asked of tetra: TP divides the heads, the KV heads, the FFN
// width and the vocabulary; 2 CP divides the sequence; DP divides the batch; the default
// micro-batch is G/(DP PP) when that divides, else 1; a pipeline needs PP micro-batches and
// interleaved a multiple of PP; PP V chunks need as many layers; SP needs the micro-batch's
// tokens on a rank to split over TP. Titles as the sweep prints them.
std::set<std::string> enumerate(const Model& m, int ranks, const std::vector<int>& zeros,
                                const std::vector<std::string>& schedules,
                                const std::vector<int>& vpps, const std::vector<bool>& sps) {
  std::set<std::string> out;
  for (int tp = 1; tp <= ranks; ++tp)
    for (int cp = 1; tp * cp <= ranks; ++cp)
      for (int pp = 1; tp * cp * pp <= ranks; ++pp) {
        if (ranks % (tp * cp * pp)) continue;
        const int dp = ranks / (tp * cp * pp);
        if (m.heads % tp || m.kv % tp || m.ffn % tp || m.vocab % tp) continue;
        if (cp > 1 && m.seq % (2 * cp)) continue;
        if (m.batch % dp) continue;
        const int per_dp = m.batch / dp;
        const int b = per_dp % pp == 0 ? std::max(1, per_dp / pp) : 1;
        const int micro = per_dp / b;
        if (micro < pp) continue;
        for (int zero : zeros)
          for (bool sp : sps) {
            if (sp && (tp == 1 || (b * m.seq / cp) % tp)) continue;
            std::string title = "TP " + std::to_string(tp) + " x CP " + std::to_string(cp) +
                                " x PP " + std::to_string(pp) + " x DP " + std::to_string(dp) +
                                ", ZeRO-" + std::to_string(zero);
            if (pp == 1) {
              out.insert(title + (sp ? ", SP" : ""));
              continue;
            }
            for (const std::string& s : schedules)
              for (int v : s == "interleaved" ? vpps : std::vector<int>{1}) {
                if (pp * v > m.layers) continue;
                if (s == "interleaved" && micro % pp) continue;
                out.insert(title + ", " + s + (v > 1 ? " V " + std::to_string(v) : "") +
                           (sp ? ", SP" : ""));
              }
          }
      }
  return out;
}

// The layout titles of a sweep's table (dry run: every row after the header).
std::set<std::string> titles_of(const std::string& out, const std::string& header) {
  std::set<std::string> titles;
  const size_t at = out.find(header);
  REQUIRE(at != std::string::npos);
  std::istringstream rows(out.substr(out.find('\n', at) + 1));
  for (std::string row; std::getline(rows, row) && row.rfind("TP ", 0) == 0;)
    titles.insert(row.substr(0, row.find("  ")));
  return titles;
}

}  // namespace

TEST_CASE("sweep --dry-run: exactly the layouts an independent enumeration finds") {
  const Spawned r = spawn(tetra_bin() + " sweep --ranks 8 " + kModel +
                              " --zero 1,3 --schedule gpipe,1f1b,interleaved --vpp 1,2 --sp both"
                              " --dry-run",
                          60);
  CAPTURE(r.out);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const std::set<std::string> want =
      enumerate(Model{}, 8, {1, 3}, {"gpipe", "1f1b", "interleaved"}, {1, 2}, {false, true});
  const std::set<std::string> got = titles_of(r.out, "sent per step by a rank of stage 0");
  CHECK(got == want);
  CHECK(r.out.find(std::to_string(want.size()) + " layouts to run, ") != std::string::npos);
  // What it skipped, and why: TP 4 and 8 cannot split 2 KV heads; PP 8 has 4 layers.
  CHECK(r.out.find("x --kv-heads 2 is not divisible by TP 4") != std::string::npos);
  CHECK(r.out.find("is more than the 4 layers") != std::string::npos);
}

TEST_CASE("sweep --ranks 4: every layout runs and matches one rank, the plan's bytes and memory") {
  TempDir dir;
  // A launcher that kills rank 1 of the PP 4 run at step 1, and gives the TP 2 x DP 2 run
  // another seed (other weights, other losses): one layout fails, one does not match.
  const std::string launcher = dir / "launch.sh";
  std::ofstream(launcher) << "#!/bin/sh\nn=$1; shift\ncase \" $* \" in\n"
                             "  *\" --pp 4 \"*) set -- \"$@\" --inject-failure 1@1 ;;\n"
                             "  *\" --tp 2 --cp 1 --pp 1 --dp 2 \"*) set -- \"$@\" --seed 99 ;;\n"
                             "esac\nexec mpirun --oversubscribe --bind-to none -np \"$n\" \"$@\"\n";
  const std::string out = dir / "sweep";
  const Spawned r =
      spawn(tetra_bin() + " sweep --ranks 4 " + kModel + " --steps 2 --peak-tflops 1 --out " + out +
                " --launcher \"sh " + launcher + " {n}\"",
            600);
  CAPTURE(r.out);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  // More ranks than cores: the table and the picture say what "communication" then is.
  const unsigned cores = std::thread::hardware_concurrency();
  const std::string waiting = "4 ranks on " + std::to_string(cores) +
                              " cores: most of the communication share is waiting for a core";
  CHECK((r.out.find(waiting) != std::string::npos) == (cores < 4));
  CHECK((tetra::test::slurp(out + "/sweep.svg").find(waiting) != std::string::npos) == (cores < 4));

  const std::set<std::string> want = enumerate(Model{}, 4, {1}, {"1f1b"}, {1}, {false});
  const std::vector<json> recs = jsonl_records(out + "/sweep.jsonl");
  int layouts = 0, skipped = 0;
  for (const json& j : recs) {
    const std::string status = j["status"], name = j["name"];
    CAPTURE(name);
    if (status == "skipped") {
      ++skipped;
      continue;
    }
    if (status == "summary" || j["reference"].get<bool>()) continue;
    ++layouts;
    const json& l = j["layout"];
    if (l["pp"] == 4) {  // killed: reported, with mpirun's word for it
      CHECK(status == "failed");
      CHECK(j["exit"] != 0);
      CHECK(r.out.find("FAILED (exit") != std::string::npos);
      continue;
    }
    if (l["tp"] == 2 && l["dp"] == 2) {
      CHECK(status == "mismatch");
      CHECK(j["loss_gap"].get<double>() > 1e-5);
      continue;
    }
    CHECK(status == "ok");
    CHECK(j["matches"] == true);
    CHECK(j["loss_gap"].get<double>() <= 1e-5);
    // The picture's split: compute, exposed communication and bubble, none negative, make
    // up the step.
    const json& split = j["split_ms"];
    for (const char* part : {"compute", "comm", "bubble"}) CHECK(split[part].get<double>() >= 0);
    CHECK(split["compute"].get<double>() > 0);
    CHECK(std::abs(split["compute"].get<double>() + split["comm"].get<double>() +
                   split["bubble"].get<double>() - j["step_ms"].get<double>()) <=
          1e-9 * j["step_ms"].get<double>());
    if (l["pp"] == 1) CHECK(split["bubble"] == 0.0);
    // The plan, computed here: bytes per group exactly, the peak within 10 %.
    tetra::plan::RunSpec spec;
    spec.layout = {l["tp"].get<int>(),
                   l["cp"].get<int>(),
                   l["pp"].get<int>(),
                   l["dp"].get<int>(),
                   false,
                   1,
                   "1f1b"};
    spec.batch.global_batch = 8;
    tetra::ModelConfig cfg{.vocab = 256,
                           .layers = 4,
                           .dim = 64,
                           .heads = 4,
                           .kv_heads = 2,
                           .ffn_dim = 128,
                           .seq_len = 16};
    const tetra::plan::Setup s = tetra::plan::make_setup(spec, cfg, 4);
    for (const auto& [group, bytes] :
         tetra::plan::bytes_by_group(tetra::plan::step_traffic(s, 0))) {
      CAPTURE(group);
      CHECK(int_of(j["comm_bytes"][group]["measured"]) == std::llround(bytes));
    }
    const double peak = tetra::plan::peak_memory(s).memory.peak();
    CHECK(std::abs(j["peak_memory_bytes"]["measured"].get<double>() - peak) <= 0.10 * peak);
  }
  CHECK(layouts == int(want.size()));
  CHECK(skipped == 1);  // TP 4
  CHECK(r.out.find("1 skipped") != std::string::npos);
  CHECK(r.out.find("fastest that fits and matches one rank: ") != std::string::npos);

  const json svg = svg_summary(out + "/sweep.svg");
  REQUIRE(svg["layouts"].size() == want.size());
  std::set<std::string> drawn;
  for (const json& l : svg["layouts"]) {
    drawn.insert(l["name"].get<std::string>());
    const bool ran = l["status"] != "failed";
    CHECK(l["parts"].size() == (ran ? 3u : 0u));  // compute, comm, bubble
    CHECK(l["estimate"] == true);                 // --peak-tflops gives the plan a peak
  }
  std::set<std::string> titles;
  for (const std::string& t : want) titles.insert(t);
  CHECK(drawn == titles);
}

TEST_CASE("sweep: one peak for every layout's MFU, the one-rank row, speed-up and the formula") {
  // No --peak-tflops: every run probes its own peak, which a loaded machine swings; the
  // sweep counts every layout's MFU against the reference's, so MFU follows tok/s.
  TempDir dir;
  const std::string out = dir / "sweep";
  const Spawned r = spawn(
      tetra_bin() + " sweep --ranks 2 " + kModel + " --steps 2 --out " + out + " --schedule gpipe",
      600);
  CAPTURE(r.out);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const std::vector<json> recs = jsonl_records(out + "/sweep.jsonl");
  double per_token = -1, ref_rate = 0;
  int ran = 0;
  for (const json& j : recs) {
    if (j["status"] == "summary") {
      CHECK(j["mfu_peak_source"] == "the one-rank reference's GEMM probe");
      CHECK(j["mfu_peak_flops"].get<double>() > 0);
      continue;
    }
    if (!j.contains("mfu")) continue;
    ++ran;
    const double ratio = j["mfu"].get<double>() / j["tokens_per_s"].get<double>();
    if (per_token < 0) per_token = ratio;
    CHECK(ratio * j["layout"]["tp"].get<int>() * j["layout"]["cp"].get<int>() *
              j["layout"]["pp"].get<int>() * j["layout"]["dp"].get<int>() ==
          doctest::Approx(per_token).epsilon(1e-9));
    if (j["reference"].get<bool>()) ref_rate = j["tokens_per_s"].get<double>();
    // The bubble and its formula: the idle share of the step, (p-1)/(m+p-1) for PP 2, m 2.
    if (j["layout"]["pp"] == 2) {
      CHECK(j["bubble_formula"].get<double>() == doctest::Approx(1.0 / 3));
      // The schedule's bubble at the run's measured pass costs: a share of the step.
      CHECK(j["bubble_at_measured_costs"].get<double>() >= 0);
      CHECK(j["bubble_at_measured_costs"].get<double>() < 1);
    }
  }
  CHECK(ran >= 4);  // the reference and TP 2, CP 2, PP 2, DP 2
  CHECK(r.out.find("MFU at one peak for every layout, ") != std::string::npos);
  CHECK(r.out.find("(the one-rank reference's GEMM probe)") != std::string::npos);
  // The reference's row, first, with speed-up 1; every other row's speed-up is its rate
  // over the reference's.
  const std::regex row(
      R"(\n +(ref|[0-9]+)  (TP [^\n]*?) +([0-9]+) +([0-9.]+)x +([0-9.]+)% [^\n]*)");
  int rows = 0;
  for (std::sregex_iterator i(r.out.begin(), r.out.end(), row), end; i != end; ++i) {
    const std::smatch& m = *i;
    CAPTURE(m[0].str());
    if (rows++ == 0) CHECK(m[1] == "ref");
    CHECK(std::abs(std::stod(m[4]) - std::stod(m[3]) / ref_rate) <= 0.005 + 0.5 / ref_rate);
    if (m[2].str().find("PP 2") != std::string::npos)
      CHECK(m[0].str().find(" 33.3% ") != std::string::npos);  // the formula column
  }
  CHECK(rows == ran);
  if (std::thread::hardware_concurrency() < 2)
    CHECK(r.out.find("2 ranks on 1 cores: most of the communication share is waiting for a core") !=
          std::string::npos);
}

TEST_CASE("sweep: bad input is one error line and exit status 2") {
  TempDir dir;
  std::ofstream(dir / "file") << "x";
  const std::pair<std::string, std::string> cases[] = {
      // 5 ranks: TP 5 splits no heads, CP 5 no sequence of 16, PP 5 no 4 layers, DP 5 no 8.
      {"--ranks 5 --dry-run", "no layout of 5 ranks is valid"},
      {"--ranks 4 --zero 1,4 --dry-run", "--zero takes a comma-separated list of 1, 2 and 3"},
      {"--ranks 4 --schedule 1f1b,zigzag --dry-run", "--schedule takes a comma-separated list"},
      {"--ranks 4 --vpp 0 --dry-run", "--vpp takes a comma-separated list"},
      {"--ranks 4 --sp maybe --dry-run", "--sp takes off, on or both"},
      {"--ranks 4", "tetra sweep needs --out DIR (or --dry-run)"},
      {"--ranks 4 --dry-run --launcher mpirun", "--launcher must say where the number of ranks"},
      {"--ranks 4 --tp 2 --dry-run", "unknown flag '--tp'"},
      {"--dry-run", "--ranks is required"},
      {"--ranks 4 --out " + dir / "file", "is not a directory"},
  };
  for (const auto& [args, message] : cases) {
    CAPTURE(args);
    const Spawned r = spawn(tetra_bin() + " sweep " + kModel + " " + args, 60);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(r.err.find(message) != std::string::npos);
  }
}
