// `tetra plan`: the text it prints, written from the plan's JSON object (plan_json.hpp) alone,
// so that the text and `tetra plan --json` say the same numbers.
#pragma once
#include <string>

#include "plan/plan_json.hpp"

namespace tetra::plan {

// The text of a plan object that plan_json built.
std::string plan_text(const json& plan);

// plan_text(plan_json(...)). Throws tetra::Error for a layout tetra train would refuse.
std::string plan_report(const RunSpec& spec, const ModelConfig& cfg, const Request& req);

}  // namespace tetra::plan
