// tetra lab: every lesson answered with the formula's answer, computed here from the lesson's
// sizes, is graded right, and with a textbook mistake is graded wrong and shown the working;
// the measured value each prints is the one in its run's metrics (and, where the formula is
// exact, equal to it); bad input is one error line. Runs the real `tetra` binary.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "cli/options.hpp"
#include "plan/memory.hpp"

namespace {

using tetra::json;
using tetra::test::count;
using tetra::test::jsonl_records;
using tetra::test::parsed_json;
using tetra::test::spawn;
using tetra::test::Spawned;
using tetra::test::TempDir;
using tetra::test::tetra_bin;

tetra::ModelConfig model(int layers, int dim, int heads, int kv, int ffn, int seq) {
  return {.vocab = 256,
          .layers = layers,
          .dim = dim,
          .heads = heads,
          .kv_heads = kv,
          .ffn_dim = ffn,
          .seq_len = seq};
}

double bytes(const std::vector<json>& recs, const char* group) {
  return recs.back()["comm_bytes"][group].get<double>();
}

// A lesson, the formula's answer from its sizes, a textbook mistake, and how to read the
// measured value from its first run's metrics.
struct Case {
  std::string lesson, right, wrong;
  double formula;
  bool exact_measure;  // the run measures the formula's number exactly
  double (*measured)(const std::vector<json>&);
};

std::vector<Case> cases() {
  // dp: DP 4, ZeRO-1 on 2 blocks of width 64: a ring sends 2(N-1)/N of the fp32 parameters.
  const double P1 = double(model(2, 64, 4, 4, 128, 16).total_params());
  // zero: DP 4, ZeRO-3, 8 blocks: shards 16P/N, plus one gathered block's weights and full
  // gradient, plus the activations the lesson gives (tetra plan's count).
  const tetra::ModelConfig z = model(8, 64, 4, 4, 256, 8);
  const double P2 = double(z.total_params());
  const double block = 4.0 * 64 * 64 + 3.0 * 64 * 256 + 2 * 64;
  const tetra::TrainConfig zc = tetra::parse_train_options(
      {"--dp", "4", "--zero", "3", "--layers", "8", "--dim", "64", "--heads", "4", "--kv-heads",
       "4", "--ffn-dim", "256", "--seq-len", "8", "--global-batch", "4"});
  const double A = tetra::plan::peak_memory(tetra::plan::make_setup(zc.run_spec(), zc.model, 4))
                       .memory.activations;
  // tp: TP 4 with SP, 2 blocks, T = 64 tokens of width 64: 4 all-reduces a block, the
  // embedding's and the head's, 3 loss floats a token, and 2L+1 norm gradients.
  const double tp = 1.5 * ((4 * 2 + 2) * 64 * 64 * 4.0 + 3 * 64 * 4.0 + 5 * 64 * 4.0);
  // cp: CP 2, 2 blocks, K and V of 4 x 16 tokens x 32: gathered, and their gradients scattered.
  const double cp = 4 * 2 * 0.5 * (4 * 16 * 32 * 4.0);
  // 4d: rank 0 holds the embedding and blocks 0-1, TP halves (norms whole), over CP x DP = 4.
  const std::vector<tetra::UnitLayout> units = tetra::make_units(model(4, 64, 4, 2, 128, 16), 2, 0);
  double P0 = 0;
  for (int u = 0; u < 3; ++u) P0 += double((units[u].numel + 3) / 4 * 4);
  const auto num = [](double x) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.0f", x);
    return std::string(buf);
  };
  return {
      {"dp", num(1.5 * 4 * P1), num(2 * 4 * P1), 1.5 * 4 * P1, true,
       [](const std::vector<json>& r) { return bytes(r, "dp_cp"); }},
      {"zero", num(16 * P2 / 4 + 8 * block + A), num(16 * P2 / 4 + A), 16 * P2 / 4 + 8 * block + A,
       false,
       [](const std::vector<json>& r) {
         double peak = 0;
         for (const json& j : r) peak = std::max(peak, j["peak_memory_bytes"].get<double>());
         return peak;
       }},
      {"tp", num(tp), num(tp / 2), tp, true,
       [](const std::vector<json>& r) { return bytes(r, "tp"); }},
      // (p-1)/(m+p-1) with p = 2, m = 4, answered as a percentage; (p-1)/m is the mistake.
      {"pp", "20%", "0.25", 0.2, false,
       [](const std::vector<json>& r) {
         double sum = 0;
         for (size_t i = 1; i < r.size(); ++i) sum += r[i]["bubble"].get<double>();
         return sum / double(r.size() - 1);
       }},
      {"cp", num(cp), num(2 * cp), cp, true,
       [](const std::vector<json>& r) { return bytes(r, "cp"); }},
      {"4d", num(1.5 * 4 * P0), num(4 * P0), 1.5 * 4 * P0, true,
       [](const std::vector<json>& r) { return bytes(r, "dp_cp"); }},
      // Checkpoints every 3 steps, rank 1 killed in step 7: the restart starts at step 6.
      {"resume", "6", "7", 6, true,
       [](const std::vector<json>& r) {
         for (size_t i = 1; i < r.size(); ++i)
           if (r[i]["step"].get<int>() <= r[i - 1]["step"].get<int>())
             return r[i]["step"].get<double>();
         return -1.0;
       }},
  };
}

// The lesson's summary line: answer, formula, measured, grade.
struct Summary {
  double answer = 0, formula = 0, measured = 0;
  std::string grade;
};

Summary summary(const std::string& out, const std::string& lesson) {
  const std::regex line("lab " + lesson +
                        ": answer ([-0-9.e+]+) \\| formula ([-0-9.e+]+) \\| measured ([-0-9.e+]+) "
                        "\\| (right|wrong)");
  std::smatch m;
  REQUIRE(std::regex_search(out, m, line));
  return {std::stod(m[1]), std::stod(m[2]), std::stod(m[3]), m[4]};
}

bool near(double a, double b, double rel) {
  return std::abs(a - b) <= rel * std::abs(b);
}

}  // namespace

TEST_CASE("lab: every lesson, answered right and answered with a textbook mistake") {
  TempDir dir;
  for (const Case& c : cases()) {
    CAPTURE(c.lesson);
    for (const bool right : {true, false}) {
      const std::string answer = right ? c.right : c.wrong;
      CAPTURE(answer);
      const Spawned r = spawn(
          tetra_bin() + " lab " + c.lesson + " --answer " + answer + " --out " + dir.path.string(),
          300);
      CAPTURE(r.out);
      CAPTURE(r.err);
      REQUIRE(r.status == 0);
      const Summary s = summary(r.out, c.lesson);
      CHECK(s.grade == (right ? "right" : "wrong"));
      CHECK(near(s.formula, c.formula, 1e-9));
      if (!right) CHECK(r.out.find("the working: ") != std::string::npos);
      // The measured value is the run's own, from its metrics; where tetra's formula is exact,
      // it is the formula's number.
      const std::vector<json> recs = jsonl_records(dir / (c.lesson + "-1.jsonl"));
      REQUIRE(!recs.empty());
      const double measured = c.measured(recs);
      CHECK(near(s.measured, measured, 1e-9));
      if (c.exact_measure) CHECK(s.measured == c.formula);
      if (c.lesson == "zero") CHECK(near(s.measured, c.formula, 0.05));
    }
  }
}

TEST_CASE("lab: --list, and bad input is one error line and exit status 2") {
  const Spawned list = spawn(tetra_bin() + " lab --list", 60);
  CHECK(list.status == 0);
  for (const char* name :
       {"1. dp ", "2. zero ", "3. tp ", "4. pp ", "5. cp ", "6. 4d ", "7. resume "})
    CHECK(list.out.find(name) != std::string::npos);
  const std::pair<std::string, std::string> cases[] = {
      {"lab nope --answer 1", "no lesson 'nope'"},
      {"lab 8", "no lesson '8'"},
      {"lab dp --answer twelve", "--answer takes a number (got 'twelve')"},
      {"lab dp --answer 12%%%", "--answer takes a number"},
      {"lab --answer 3", "--answer needs a LESSON"},
      {"lab dp --launcher mpirun", "--launcher must say where the number of ranks"},
      {"lab dp --answer", "--answer needs a value"},
      {"lab dp </dev/null", "no answer to lesson dp"},  // asked, and the input ends
  };
  for (const auto& [args, message] : cases) {
    CAPTURE(args);
    const Spawned r = spawn(tetra_bin() + " " + args, 60);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(r.err.find(message) != std::string::npos);
  }
}
