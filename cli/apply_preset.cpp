#include "cli/apply_preset.hpp"

namespace tetra::cli {

void apply_preset(TrainConfig& c, plan::Request* request) {
  const plan::Preset p = plan::preset_named(c.run.preset);
  settings::overlay(kLayoutKeys, c.layout, p.layout, c.given);
  settings::overlay(kModelKeys, c.model, p.model, c.given);
  settings::overlay(kBatchKeys, c.batch, p.batch, c.given);
  settings::overlay(kOptimizerKeys, c.optimizer, p.optimizer, c.given);
  settings::overlay(kDeviceKeys, c.device, p.device, c.given);

  if (!request) return;
  request->preset = c.run.preset;
  const auto set = [&](const char* key, auto& field, const auto& value) {
    if (!c.was_given(key)) field = value;
  };
  set("plan.gpu", request->gpu, p.gpu);
  set("plan.tokens", request->tokens, p.tokens);
  set("plan.achieved_tflops", request->achieved_tflops, p.achieved_tflops);
  set("plan.mfu", request->mfu, p.mfu);
}

}  // namespace tetra::cli
