// Named runs, for `--preset NAME` of tetra plan and tetra train: a model with the layout,
// batch, optimizer settings, precision and machine it is trained with, so that the name alone
// is a whole run and any flag given beside it replaces that one part.
#pragma once
#include <cstdint>
#include <string>

#include "model/config.hpp"
#include "optim/config.hpp"
#include "parallel/config.hpp"

namespace tetra::plan {

struct Preset {
  std::string about;       // where its numbers come from
  ModelConfig model;       // its vocab the tokens, vocab_rows padded
  double card_params = 0;  // the parameter count its model card gives (0: none)
  LayoutConfig layout;
  BatchConfig batch;
  OptimizerConfig optimizer;
  DeviceConfig device;
  // tetra plan's machine and the whole run: tokens, a measured rate per GPU, an MFU (0: none).
  std::string gpu = "h100";
  double tokens = 0, achieved_tflops = 0, mfu = 0;
};

// llama3-405b: Llama 3's own pre-training run (the paper's 16,384-GPU layout, batch, tokens,
// rate and MFU); llama3-8b and llama3-70b: their shapes with a layout of tetra's choosing
// (Meta published none); demo: tools/demo.sh's run; bench: tools/bench/layouts.py's model.
// Throws tetra::Error for any other name.
Preset preset_named(const std::string& name);

}  // namespace tetra::plan
