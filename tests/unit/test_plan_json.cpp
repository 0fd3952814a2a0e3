// tetra plan --json: one object, that parses back to itself and whose numbers the text prints
// (the text is written from it), for layouts that cover every section: the 405B preset and
// its 8,192-GPU and long-context variants, a 4D CPU layout, interleaved, and TP with SP,
// ZeRO-3 and recompute. The grid's ranks against the rank formula, and the schedule's events
// against the simulator. (The binary's --json output: tests/e2e/test_plan_json_run.cpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/options.hpp"
#include "parallel/chunks.hpp"
#include "parallel/grid.hpp"
#include "parallel/schedule.hpp"
#include "plan/plan_report.hpp"
#include "plot/svg_schedule.hpp"

using namespace tetra;

namespace {

PlanOptions options(const std::string& flags) {
  std::vector<std::string> args = {"plan"};
  std::istringstream words(flags);
  for (std::string w; words >> w;) args.push_back(w);
  return parse_command_line(args).plan;
}

json plan_of(const std::string& flags) {
  const PlanOptions p = options(flags);
  return plan::plan_json(p.train.run_spec(), p.train.model, p.request);
}

// The number after the first match of `before` in the text, commas dropped, with the unit
// that follows it applied (a byte unit B to PB, a time s, ms or us, or %), and half a unit
// of its last printed digit: as far as its rounding may take it from the value printed.
struct Printed {
  double value = NAN, half_ulp = 0;
};
Printed printed_after(const std::string& text, const std::string& before) {
  const std::regex re(before + "\\s*(-?[0-9][0-9,]*)(\\.[0-9]*)?(e[+-]?[0-9]+)?\\s*" +
                      "(kB|MB|GB|TB|PB|B|ms|us|s|%)?");
  std::smatch m;
  if (!std::regex_search(text, m, re)) {
    FAIL("no '" << before << "' in:\n" << text);
    return {};
  }
  std::string digits = m[1].str() + m[2].str() + m[3].str();
  digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
  const std::string unit = m[4];
  const double scale = unit == "kB"   ? 1e3
                       : unit == "MB" ? 1e6
                       : unit == "GB" ? 1e9
                       : unit == "TB" ? 1e12
                       : unit == "PB" ? 1e15
                       : unit == "ms" ? 1e-3
                       : unit == "us" ? 1e-6
                       : unit == "%"  ? 1e-2
                                      : 1;
  const int decimals = m[2].length() > 0 ? int(m[2].length()) - 1 : 0;
  const double exponent = m[3].length() > 0 ? std::stod("1" + m[3].str()) : 1;
  return {std::stod(digits) * scale, 0.5 * std::pow(10.0, -decimals) * exponent * scale};
}
double number_after(const std::string& text, const std::string& before) {
  return printed_after(text, before).value;
}

// The text prints the object's value, rounded to the digits it shows.
bool printed_as(const Printed& p, double value) {
  return std::abs(p.value - value) <= p.half_ulp * (1 + 1e-9);
}
#define check_printed(text, before, value) \
  CHECK(printed_as(printed_after(text, before), (value).get<double>()))

const char* const kLayouts[] = {
    "--preset llama3-405b",
    "--preset llama3-405b --dp 64",
    "--preset llama3-405b --cp 16 --dp 8 --seq-len 131072 --global-batch 128",
    "--tp 2 --cp 2 --pp 2 --dp 2 --gpu cpu",
    "--pp 4 --vpp 2 --schedule interleaved --global-batch 8 --micro-batch 1 --layers 8 --gpu h100",
    "--tp 2 --sp --zero 3 --dtype bf16 --recompute full --dp 2 --gpu a100",
};

}  // namespace

TEST_CASE("plan --json: the object parses back to itself, and the text prints its numbers") {
  for (const std::string flags : kLayouts) {
    CAPTURE(flags);
    const json p = plan_of(flags);
    json back;
    REQUIRE(parse_json(p.dump(), back).empty());
    CHECK(back == p);
    const std::string t = plan::plan_text(p);
    const PlanOptions o = options(flags);
    CHECK(t == plan::plan_report(o.train.run_spec(), o.train.model, o.request));
    INFO(t);

    // The model.
    CHECK(number_after(t, "parameters: ") == p["model"]["parameters"].get<double>());
    check_printed(t, "FLOPs per token: 6N ", p["model"]["flops_per_token"]["six_n"]);
    check_printed(t, "bf16 weights ", p["whole_model"]["bf16_weight_bytes"]);
    const json& own = p["whole_model"]["bytes_per_parameter"]["tetra"];
    check_printed(t, "tetra's own, [a-z0-9]+, one rank: ", own["one_rank"]["total"]);
    if (own["zero1"]["ranks"] > 1)
      check_printed(t, "tetra's own, [^;]*; ZeRO-1 over [0-9,]+: ", own["zero1"]["total"]);
    check_printed(
        t, "shards the 12: ", p["whole_model"]["bytes_per_parameter"]["headline"]["zero1_total"]);
    // The batch.
    CHECK(number_after(t, "tokens = ") == p["batch"]["tokens_per_step"].get<double>());
    CHECK(number_after(t, "per step \\([0-9.]+ M\\); ") ==
          p["batch"]["tokens_per_replica"].get<double>());
    // The grid: every stage printed (16 or fewer) with its layers.
    CHECK(number_after(t, "grid: [^=]*= ") == p["grid"]["world"].get<double>());
    for (const json& st : p["grid"]["stages"])
      CHECK(t.find("pp rank " + std::to_string(st["stage"].get<int>()) + " holds layers " +
                   st["label"].get<std::string>() + "\n") != std::string::npos);
    // Memory: the fullest stage's components, its micro-batches in flight, fits or not.
    const json& m = p["memory"];
    const json& st = m["stages"][m["fullest_stage"].get<size_t>()];
    CHECK(number_after(t, "the fullest pipeline stage, ") == m["fullest_stage"].get<double>());
    check_printed(t, "\\): weights ", st["weights"]);
    check_printed(t, ", gradients ", st["gradients"]);
    check_printed(t, ", Adam ", st["adam"]);
    check_printed(t, ", activations ", st["activations"]);
    CHECK(number_after(t, ", activations [^(]*\\(") == st["in_flight"].get<double>());
    check_printed(t, "chunks in flight\\), peak ", st["peak"]);
    CHECK(st["peak"] == m["peak_bytes"]);
    check_printed(t, "in flight\\), peak [^ ]+ [a-zA-Z]+ of ", m["capacity_bytes"]);
    CHECK((t.find(": does NOT fit\n") != std::string::npos) == !m["fits"].get<bool>());
    for (const json& f : m["fixes"]) {
      check_printed(t, "it fits with `" + f["key"].get<std::string>() + "`[^:]*: peak ", f["peak"]);
    }
    // Traffic: each group's bytes exactly, and its time.
    for (const json& g : p["traffic"]["groups"]) {
      if (g["bytes"].get<double>() == 0) continue;
      const std::string name = g["group"];
      CAPTURE(name);
      CHECK(number_after(t, "\n  " + name + ": [^(]*\\(") == std::round(g["bytes"].get<double>()));
      check_printed(t, "\n  " + name + ": [^\n]*/s: ", g["seconds"]);
    }
    for (const json& r : p["traffic"]["ring_factors"])
      check_printed(
          t,
          " " + r["group"].get<std::string>() + " " + std::to_string(r["size"].get<int>()) + ": ",
          r["factor"]);
    if (const json& e = p["traffic"]["gradient_example"]; !e.is_null()) {
      CHECK(number_after(t, "all-reduced over dp_cp, ") == e["ranks"].get<double>());
      check_printed(t, "ranks: ", e["sent_bytes"]);
      check_printed(t, "sent by each, ", e["network_seconds"]);
    }
    // The bubble, of the step, at m and 2m; the ratio form under interleaved.
    const json& b = p["bubble"];
    check_printed(t, "of the step: ", b["of_step"]);
    check_printed(t, "of the step: [^,]*, ", b["at"][1]["of_step"]);
    if (b["schedule"] == "interleaved") check_printed(t, "paper gives it: ", b["of_compute"]);
    // The step time, MFU and HFU.
    const json& s = p["step"];
    if (s["known"].get<bool>()) {
      check_printed(t, "DP beyond the compute [^=]*= ", s["step_s"]);
      check_printed(t, "MFU estimate for this schedule ", s["mfu"]);
      if (p["run"]["recompute"].get<bool>()) check_printed(t, ", HFU ", s["hfu"]);
    }
    if (!p["whole_run"].is_null())
      CHECK(number_after(t, "\n  [0-9.e+]+ tokens: ") == p["whole_run"]["steps"].get<double>());
  }
}

TEST_CASE("plan --json: the grid's ranks, coordinates and groups by the rank formula") {
  const json p = plan_of("--tp 2 --cp 2 --pp 2 --dp 2 --layers 4 --gpu cpu");
  const json& g = p["grid"];
  const Layout l{2, 2, 2, 2};
  REQUIRE(g["ranks"].size() == 16);
  for (const json& r : g["ranks"]) {
    const int rank = r["rank"];
    const Coord c = coord_of(l, rank);
    CHECK(r["tp"] == c.tp);
    CHECK(r["cp"] == c.cp);
    CHECK(r["pp"] == c.pp);
    CHECK(r["dp"] == c.dp);
    // A group is named by its first member: the rank whose coordinate in it is 0.
    CHECK(r["groups"]["tp"] == rank_of(l, {0, c.cp, c.pp, c.dp}));
    CHECK(r["groups"]["cp"] == rank_of(l, {c.tp, 0, c.pp, c.dp}));
    CHECK(r["groups"]["pp"] == rank_of(l, {c.tp, c.cp, 0, c.dp}));
    CHECK(r["groups"]["dp"] == rank_of(l, {c.tp, c.cp, c.pp, 0}));
    CHECK(r["groups"]["dp_cp"] == rank_of(l, {c.tp, 0, c.pp, 0}));
  }
  CHECK(g["stages"][0]["label"] == "embed+0-1");
  CHECK(g["stages"][1]["label"] == "2-3+head");
  CHECK(g["stages"][1]["chunks"][0]["head"] == true);
  CHECK(g["cp_ranks"][0]["positions"] == json::parse("[[0, 15], [48, 63]]"));
  CHECK(g["cp_ranks"][1]["positions"] == json::parse("[[16, 47]]"));
  // The 405B preset lists its 16,384 ranks; past kMaxListedRanks the list is left out.
  CHECK(plan_of("--preset llama3-405b")["grid"]["ranks"].size() == 16384);
  CHECK(plan_of("--preset llama3-405b --dp 256 --global-batch 4096")["grid"]["ranks"].is_null());
}

TEST_CASE("plot --schedule --json: the simulator's events, and the bubble both ways") {
  struct Case {
    ScheduleKind kind;
    int pp, vpp, m;
  };
  for (const Case& c : {Case{ScheduleKind::GPipe, 4, 1, 8}, Case{ScheduleKind::OneFOneB, 4, 1, 8},
                        Case{ScheduleKind::Interleaved, 4, 2, 8}}) {
    const json s = schedule_json(c.kind, c.pp, c.vpp, c.m);
    const SimResult sim = simulate(c.kind, c.pp, c.vpp, c.m, 1.0 / c.vpp, 2.0 / c.vpp);
    REQUIRE(s["ranks"].size() == size_t(c.pp));
    for (int r = 0; r < c.pp; ++r) {
      const json& events = s["ranks"][size_t(r)]["events"];
      REQUIRE(events.size() == sim.timeline[size_t(r)].size());
      CHECK(events.size() == size_t(2 * c.vpp * c.m));
      for (size_t i = 0; i < events.size(); ++i) {
        const TimedAction& a = sim.timeline[size_t(r)][i];
        CHECK(events[i]["kind"] == (a.action.kind == Action::Forward ? "F" : "B"));
        CHECK(events[i]["micro_batch"] == a.action.micro_batch);
        CHECK(events[i]["chunk"] == a.action.chunk * c.pp + r);
        CHECK(events[i]["start"] == a.start);
        CHECK(events[i]["end"] == a.end);
      }
    }
    // With equal stages the simulation's idle share is the formula's.
    const BubbleForms f = bubble_forms(c.kind, c.pp, c.vpp, c.m);
    CHECK(s["bubble"]["of_step"] == f.of_step);
    CHECK(s["bubble"]["simulated_of_step"].get<double>() == doctest::Approx(f.of_step));
    CHECK(s["bubble"]["simulated_of_compute"].get<double>() == doctest::Approx(f.of_compute));
  }
}

TEST_CASE("plot --schedule zb-v --json: the V's chunks, F, B and W, the bubble as the formula") {
  const json s = schedule_json(ScheduleKind::ZeroBubbleV, 4, 2, 8);
  REQUIRE(s["ranks"].size() == 4);
  for (int r = 0; r < 4; ++r) {
    const json& events = s["ranks"][size_t(r)]["events"];
    CHECK(events.size() == 3 * 2 * 8);
    std::set<int> chunks;
    for (const json& e : events) {
      CHECK(e["chunk"] == chunk_id(Placement::V, 4, r, e["virtual_stage"].get<int>()));
      chunks.insert(e["chunk"].get<int>());
    }
    CHECK(chunks == std::set<int>{r, 7 - r});  // rank 0: the first chunk and the last
  }
  const BubbleForms f = bubble_forms(ScheduleKind::ZeroBubbleV, 4, 2, 8);
  CHECK(s["bubble"]["simulated_of_step"].get<double>() == doctest::Approx(f.of_step));
  CHECK(f.of_step == doctest::Approx(3.0 / 51));
}

// Under zb-v the planner's stages hold chunk r and chunk 2 PP - 1 - r: rank 0 the embedding and
// the head, no copy of a tied embedding and no embedding group.
TEST_CASE("plan: zb-v's stages are a V; rank 0 holds both ends") {
  const json p = plan_of("--pp 2 --schedule zb-v --tie-embeddings --layers 4");
  CHECK(p["run"]["layout"]["vpp"] == 2);
  const json& stages = p["grid"]["stages"];
  REQUIRE(stages.size() == 2);
  CHECK(stages[0]["label"] == "embed+0-0, 3-3+head");
  CHECK(stages[1]["label"] == "1-1, 2-2");
  CHECK(stages[0]["chunks"][1]["chunk"] == 3);
}

TEST_CASE("plan: the 405B preset's stages are the paper's, a layer fewer on the first and last") {
  // Llama 3 405B: 126 layers over 16 stages, the first and the last holding 7 beside the
  // embedding and the head, the others 8 (--pp-balance ends, the preset's).
  const json p = plan_of("--preset llama3-405b");
  CHECK(p["run"]["layout"]["pp_balance"] == "ends");
  const json& stages = p["grid"]["stages"];
  REQUIRE(stages.size() == 16);
  CHECK(stages[0]["label"] == "embed+0-6");
  CHECK(stages[15]["label"] == "119-125+head");
  for (size_t i = 0; i < 16; ++i) CHECK(stages[i]["layers"] == (i == 0 || i == 15 ? 7 : 8));
  // The trainer's placement is the planner's: one function, plan_chunks.
  const PlanOptions o = options("--preset llama3-405b");
  const plan::Setup s = plan::make_setup(o.train.run_spec(), o.train.model);
  const std::vector<ChunkPlan> chunks = plan_chunks(126, 16, 1, true);
  REQUIRE(s.run.chunks.size() == chunks.size());
  for (size_t k = 0; k < chunks.size(); ++k) CHECK(s.run.chunks[k].units == chunks[k].units);
  // Even, the default: stage 0 holds the embedding and 8 layers, stages 14 and 15 seven.
  const json even = plan_of("--preset llama3-405b --pp-balance even")["grid"]["stages"];
  CHECK(even[0]["label"] == "embed+0-7");
  CHECK(even[14]["layers"] == 7);
  CHECK(even[15]["layers"] == 7);
  // The plan says which stage is the fullest, and why.
  const std::string t = plan::plan_text(p);
  const json& m = p["memory"];
  CHECK(t.find("  stage " + std::to_string(m["fullest_stage"].get<int>()) + " is the fullest: " +
               m["fullest_why"].get<std::string>() + "\n") != std::string::npos);
  // A chunk left without a layer is refused: 3 layers and 2 ends over 3 chunks.
  CHECK_THROWS_AS(plan_chunks(3, 3, 1, true), Error);
  CHECK(plan_chunks(6, 4, 1, true)[0].units == std::vector<int>{0, 1});
  CHECK(plan_chunks(6, 4, 1, true)[3].units == std::vector<int>{6, 7});
}
