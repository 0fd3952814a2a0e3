// The checkpoints-and-faults section of a run's configuration: where checkpoints go and how
// often, which to resume from, what a resumed run may change, and the failures injected to
// test all of it.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace tetra {

struct CheckpointConfig {
  std::string ckpt_dir;    // sharded checkpoints here, locked while running ("": none)
  int64_t ckpt_every = 0;  // with ckpt_dir: also every N steps (0: only after the last)
  int keep = 3;            // the newest K checkpoints of the line are kept
  // "auto" (the newest checkpoint in ckpt_dir that verifies, if any), "never", or a
  // checkpoint directory.
  std::string resume = "auto";
  std::set<std::string> allow_change;  // settings a resumed run may change (kChangeable)
  std::string inject_failure;          // RANK@STEP[:MODE] (train/faults.hpp)
  double timeout = 300;                // seconds a collective may block (0: forever)
};

// The settings of a run that --allow-change may name: resuming with any other value than the
// checkpoint's run had is refused unless allowed.
inline const std::vector<std::string> kChangeable = {"data",  "lr",   "min-lr",       "warmup",
                                                     "steps", "clip", "weight-decay", "dtype"};

}  // namespace tetra
