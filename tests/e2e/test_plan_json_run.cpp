// tetra plan --json and tetra plot --schedule --json as a user runs them: one JSON object on
// stdout that parses, whose numbers the text form of the same command prints. (The objects'
// contents: tests/unit/test_plan_json.cpp.)
#include <doctest/doctest.h>

#include <string>

#include "../support/spawn.hpp"
#include "util/format.hpp"
#include "util/json.hpp"

using namespace tetra::test;
using tetra::json;

TEST_CASE("plan --json: one object on stdout, the text's numbers; --compare refuses it") {
  for (const std::string flags :
       {" --preset llama3-405b", " --tp 2 --cp 2 --pp 2 --dp 2 --gpu cpu"}) {
    CAPTURE(flags);
    const Spawned j = spawn(tetra_bin() + " plan --json" + flags, 60);
    REQUIRE_MESSAGE(j.status == 0, j.err);
    json p;
    REQUIRE(tetra::parse_json(j.out, p).empty());
    const Spawned t = spawn(tetra_bin() + " plan" + flags, 60);
    REQUIRE_MESSAGE(t.status == 0, t.err);
    CHECK(t.out.find(p["run"]["layout_text"].get<std::string>()) != std::string::npos);
    CHECK(t.out.find(tetra::commas(p["batch"]["tokens_per_step"].get<double>()) +
                     " tokens per step") != std::string::npos);
  }
  const Spawned both = spawn(tetra_bin() + " plan --json --compare x.jsonl", 30);
  CHECK(both.status == 2);
  CHECK(count(both.err, "tetra: error:") == 1);
}

TEST_CASE("plot --schedule --json: the events on stdout and no SVG; --json alone is refused") {
  const Spawned j = spawn(tetra_bin() + " plot --schedule interleaved --pp 4 --vpp 2 --json", 30);
  REQUIRE_MESSAGE(j.status == 0, j.err);
  json s;
  REQUIRE(tetra::parse_json(j.out, s).empty());
  CHECK(s["schedule"] == "interleaved");
  CHECK(s["ranks"].size() == 4);
  const Spawned bad = spawn(tetra_bin() + " plot --loss x.jsonl --json", 30);
  CHECK(bad.status == 2);
  CHECK(count(bad.err, "tetra: error: --json goes with --schedule") == 1);
}
