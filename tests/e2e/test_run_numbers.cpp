// The numbers a run prints agree with each other and with the plan: one bubble, the idle
// share of the step, in the plan, plot's simulation, the step line and the metrics for every
// schedule (with the ratio to compute beside it for interleaved), and beside it the schedule's
// bubble at the run's own pass costs, which is the simulation of the costs the record gives
// (timings themselves are never asserted); the summary's throughput is the timed steps' tokens
// over their time, never a mean of the steps' rates. Runs the real `tetra` binary.
#include <doctest/doctest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "parallel/schedule.hpp"

using namespace tetra::test;
using tetra::json;

namespace {

const std::string kModel =
    " --layers 4 --dim 32 --heads 2 --kv-heads 2 --ffn-dim 64 --seq-len 16 --global-batch 8 "
    "--micro-batch 1 --peak-tflops 1";

// The percentages of every match of `pattern`'s first group in the text.
std::vector<double> percents(const std::string& text, const std::string& pattern) {
  std::vector<double> out;
  const std::regex re(pattern);
  for (std::sregex_iterator i(text.begin(), text.end(), re), end; i != end; ++i)
    out.push_back(std::stod((*i)[1]) / 100);
  return out;
}

}  // namespace

TEST_CASE("bubble: plan, plot's simulation, the step line and the metrics say one bubble") {
  const TempDir dir;
  struct Case {
    std::string schedule;
    int vpp;
    double of_step;  // the formula at PP 2, m 8
  };
  for (const Case& c :
       {Case{"gpipe", 1, 1.0 / 9}, Case{"1f1b", 1, 1.0 / 9}, Case{"interleaved", 2, 1.0 / 17},
        Case{"zb-h1", 1, 1.0 / 25}, Case{"zb-v", 2, 1.0 / 49}}) {
    CAPTURE(c.schedule);
    const std::string layout =
        " --pp 2 --schedule " + c.schedule + " --vpp " + std::to_string(c.vpp) + kModel;
    const Spawned p = spawn(tetra_bin() + " plan --json" + layout, 60);
    REQUIRE_MESSAGE(p.status == 0, p.err);
    const json plan = parsed_json(p.out);
    const json& b = plan["bubble"];
    const int m = b["micro_batches"];
    CHECK(m == 8);
    const Spawned sim = spawn(tetra_bin() + " plot --schedule " + c.schedule + " --pp 2 --vpp " +
                                  std::to_string(c.vpp) + " --micro-batches 8 --json",
                              60);
    REQUIRE_MESSAGE(sim.status == 0, sim.err);
    const json s = parsed_json(sim.out)["bubble"];
    // The simulation's idle share of the step is the plan's formula.
    CHECK(s["simulated_of_step"].get<double>() == doctest::Approx(b["of_step"].get<double>()));
    CHECK(s["of_step"] == b["of_step"]);
    CHECK(s["of_compute"] == b["of_compute"]);

    const std::string metrics = dir / (c.schedule + ".jsonl");
    const Spawned run =
        spawn(mpirun(2) + tetra_bin() + " train --steps 2 --metrics " + metrics + layout, 120);
    REQUIRE_MESSAGE(run.status == 0, run.err);
    const std::vector<json> records = jsonl_records(metrics);
    REQUIRE(records.size() == 2);
    // The step line's formula, the metrics' and the plan's: the idle share of the step.
    const std::vector<double> line = percents(run.out, R"(, formula +([0-9.]+)%)");
    REQUIRE(line.size() == 2);
    const std::vector<double> measured = percents(run.out, R"(\| bubble +([0-9.]+)% \()");
    REQUIRE(measured.size() == 2);
    const std::vector<double> at_costs = percents(run.out, R"(\(at costs +([0-9.]+)%, formula)");
    REQUIRE(at_costs.size() == 2);
    const tetra::ScheduleKind kind = tetra::parse_schedule(c.schedule);
    for (size_t i = 0; i < records.size(); ++i) {
      const json& r = records[i];
      CHECK(r["bubble_formula"] == b["of_step"]);
      CHECK(r["bubble_formula_of_compute"] == b["of_compute"]);
      CHECK(std::abs(line[i] - b["of_step"].get<double>()) <= 0.0005 + 1e-12);
      // The measured bubble is a share of the step: below one, and the line prints it.
      CHECK(r["bubble"].get<double>() >= 0);
      CHECK(r["bubble"].get<double>() < 1);
      CHECK(std::abs(measured[i] - r["bubble"].get<double>()) <= 0.0005 + 1e-12);
      // Each model chunk's pass costs (W apart where the schedule splits the backward) and the
      // schedule's bubble at them: the simulation of those very costs, a share of the step.
      const json& pass = r["pass_ms"];
      CHECK(pass.contains("W") == tetra::splits_backward(kind));
      std::vector<tetra::PassCosts> costs(size_t(2 * c.vpp), {0, 0, 0});
      for (const char* key : {"F", "B", "W"}) {
        if (!pass.contains(key)) continue;
        REQUIRE(pass[key].size() == costs.size());
        for (size_t k = 0; k < costs.size(); ++k) {
          const double ms = pass[key][k].get<double>();
          CHECK(ms >= 0);
          (key[0] == 'F' ? costs[k].f : key[0] == 'B' ? costs[k].b : costs[k].w) = ms;
        }
      }
      const double at = r["bubble_at_measured_costs"].get<double>();
      CHECK(at >= 0);
      CHECK(at < 1);
      CHECK(at == doctest::Approx(tetra::simulate(kind, 2, c.vpp, m, costs).bubble()));
      CHECK(std::abs(at_costs[i] - at) <= 0.0005 + 1e-12);
    }
    // The ratio to compute, (p-1)/(V m), beside it where the interleaved schedule's paper
    // uses it, and only there.
    const std::vector<double> ratio = percents(run.out, R"(; idle/compute +([0-9.]+)%\))");
    if (c.schedule == "interleaved") {
      REQUIRE(ratio.size() == 2);
      CHECK(std::abs(ratio[0] - 1.0 / 16) <= 0.0005 + 1e-12);
      CHECK(std::abs(b["of_step"].get<double>() - 1.0 / 17) <= 1e-12);
    } else {
      CHECK(ratio.empty());
    }
    CHECK(std::abs(b["of_step"].get<double>() - c.of_step) <= 1e-12);
  }
}

TEST_CASE("summary: throughput is the timed steps' tokens over their time") {
  const TempDir dir;
  const std::string metrics = dir / "run.jsonl";
  // A step made slow (a straggler of 300 ms) among fast ones, where the mean of the steps'
  // rates is not the tokens over the time.
  const Spawned run = spawn(mpirun(2) + tetra_bin() + " train --steps 4 --dp 2 --metrics " +
                                metrics + " --inject-failure 1@2:slow=300" + kModel,
                            120);
  REQUIRE_MESSAGE(run.status == 0, run.err);
  const std::vector<json> records = jsonl_records(metrics);
  REQUIRE(records.size() == 4);
  double tokens = 0, seconds = 0;
  for (size_t i = 1; i < records.size(); ++i) {  // the first step warms up: not timed
    const double s = records[i]["step_ms"].get<double>() / 1e3;
    tokens += records[i]["tokens_per_s"].get<double>() * s;
    seconds += s;
  }
  CHECK(tokens == doctest::Approx(3 * 8 * 16));
  // No pipeline (DP 2): no pass costs and no bubble at them, in the record or on the line.
  for (const json& r : records) {
    CHECK_FALSE(r.contains("pass_ms"));
    CHECK_FALSE(r.contains("bubble_at_measured_costs"));
  }
  CHECK(run.out.find("at costs") == std::string::npos);
  std::smatch m;
  const std::regex summary(
      R"(summary: [^\n]*\| ([0-9]+) tok/s \(([0-9]+) tokens in ([0-9.]+) s of timed steps\) \| )"
      R"(MFU ([0-9.]+)%)");
  REQUIRE_MESSAGE(std::regex_search(run.out, m, summary), run.out);
  CHECK(std::stod(m[2]) == 3 * 8 * 16);
  CHECK(std::abs(std::stod(m[3]) - seconds) <= 0.0005 + 1e-9);
  CHECK(std::abs(std::stod(m[1]) - tokens / seconds) <= 0.5 + 1e-9);
  // MFU from the same throughput: tokens/s x F / (ranks x peak), at --peak-tflops 1.
  const double mfu = records[1]["mfu"].get<double>() / records[1]["tokens_per_s"].get<double>();
  CHECK(std::abs(std::stod(m[4]) / 100 - mfu * tokens / seconds) <= 0.00005 + 1e-12);
}
