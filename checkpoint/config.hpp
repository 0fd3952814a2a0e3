// The checkpoints-and-faults section of a run's configuration: where checkpoints go and how
// often, which to resume from, what a resumed run may change, and the failures injected to
// test all of it. (The watchdog's timeout is the run's: train/config.hpp.)
#pragma once
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "util/settings.hpp"

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
};

// The settings of a run that --allow-change may name, by their flag's name without the dashes
// (as users type them): resuming with any other value than the checkpoint's run had is
// refused unless allowed.
inline const std::vector<std::string> kChangeable = {"data",  "lr",   "min-lr",       "warmup",
                                                     "steps", "clip", "weight-decay", "dtype"};

// "data, lr, ...": kChangeable as --help and refusals list it.
inline std::string changeable_list() {
  std::string list;
  for (const std::string& name : kChangeable) list += (list.empty() ? "" : ", ") + name;
  return list;
}

inline const settings::Table<CheckpointConfig> kCheckpointKeys{
    "checkpoint",
    "Checkpoints and faults",
    {settings::key(&CheckpointConfig::ckpt_dir, "ckpt_dir", "DIR",
                   "write sharded checkpoints here, after the last step at least; lock it "
                   "while running"),
     settings::key(&CheckpointConfig::ckpt_every, "ckpt_every", "N",
                   "checkpoint every N steps too (0: only after the last)",
                   settings::non_negative()),
     settings::key(&CheckpointConfig::keep, "keep", "K", "keep the newest K checkpoints",
                   settings::at_least_1()),
     settings::key(&CheckpointConfig::resume, "resume", "auto|never|DIR",
                   "auto: continue from the newest checkpoint in --ckpt-dir that verifies",
                   [](const std::string& s) -> std::string {
                     return s.empty() ? "takes auto, never or a checkpoint directory" : "";
                   }),
     settings::key(&CheckpointConfig::allow_change, "allow_change", "A,B",
                   "settings a resumed run may change from the checkpoint's run, "
                   "comma-separated: " +
                       changeable_list(),
                   [](const std::string& s) -> std::string {
                     for (size_t at = 0; at <= s.size();) {
                       const size_t comma = std::min(s.find(',', at), s.size());
                       const std::string name = s.substr(at, comma - at);
                       if (std::find(kChangeable.begin(), kChangeable.end(), name) ==
                           kChangeable.end())
                         return "takes a comma-separated list of " + changeable_list() + " (got '" +
                                name + "')";
                       at = comma + 1;
                     }
                     return "";
                   }),
     settings::key(&CheckpointConfig::inject_failure, "inject_failure", "R@S[:MODE]",
                   "fail rank R at step S, first attempt only: kill, ckpt, hang, slow=MS, "
                   "preempt")}};

}  // namespace tetra
