// --preset NAME on the command line: the named run (plan/preset.hpp) fills every part of the
// configuration whose flag was not given, so that a flag beside it replaces one part.
#pragma once
#include "plan/plan_json.hpp"
#include "plan/preset.hpp"
#include "train/config.hpp"

namespace tetra::cli {

// c.run.preset's run into `c` (its layout, model, batch, optimizer and device sections), except
// the settings in c.given; `request` (tetra plan's,
// else null) gets the preset's machine and whole-run numbers likewise.
void apply_preset(TrainConfig& c, plan::Request* request);

}  // namespace tetra::cli
