// The checkpoints-and-faults section of a run's configuration: where checkpoints go and how
// often, which to resume from, what a resumed run may change, and the failures injected to
// test all of it. (The watchdog's timeout is the run's: train/config.hpp.)
#pragma once
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "data/config.hpp"
#include "model/config.hpp"
#include "optim/config.hpp"
#include "parallel/config.hpp"
#include "util/settings.hpp"

namespace tetra {

struct CheckpointConfig {
  std::string ckpt_dir;    // sharded checkpoints here, locked while running ("": none)
  int64_t ckpt_every = 0;  // with ckpt_dir: also every N steps (0: only after the last)
  int keep = 3;            // the newest K checkpoints of the line are kept
  // Written by a thread per rank while training goes on (checkpoint/saver.hpp); the run
  // stops only to copy its state to memory.
  bool ckpt_async = false;
  // "auto" (the newest checkpoint in ckpt_dir that verifies, if any), "never", or a
  // checkpoint directory.
  std::string resume = "auto";
  std::set<std::string> allow_change;  // settings a resumed run may change (changeable())
  std::string inject_failure;          // RANK@STEP[:MODE] (train/faults.hpp)
};

// Calls f(table) for the sections a resumed run compares with its checkpoint's, in the
// schema's order: those of the layers below this one. (The run and output sections, in train/,
// and this layer's own are free on resume: test_setting_words checks.)
template <typename F>
void for_each_compared_table(F&& f) {
  f(kLayoutKeys);
  f(kModelKeys);
  f(kBatchKeys);
  f(kOptimizerKeys);
  f(kDataKeys);
  f(kDeviceKeys);
}

// The settings --allow-change may name (their tables mark them Resume::Changeable), by their
// flag's name without the dashes, as users type them ("min-lr"), in the schema's order.
std::vector<std::string> changeable();
// "steps, lr, ...": changeable() as --help and refusals list it.
std::string changeable_list();

// Checkpoints, resuming and injected failures are one run's own: a sweep passes none on.
inline const settings::Table<CheckpointConfig> kCheckpointKeys{
    "checkpoint",
    "Checkpoints and faults",
    {.resume = settings::Resume::Free, .swept = false},
    {settings::key(&CheckpointConfig::ckpt_dir, "ckpt_dir", "DIR",
                   "write sharded checkpoints here, after the last step at least; lock it "
                   "while running"),
     settings::key(&CheckpointConfig::ckpt_every, "ckpt_every", "N",
                   "checkpoint every N steps too (0: only after the last)",
                   settings::non_negative()),
     settings::key(&CheckpointConfig::keep, "keep", "K", "keep the newest K checkpoints",
                   settings::at_least_1()),
     settings::key(&CheckpointConfig::ckpt_async, "ckpt_async", "",
                   "write checkpoints in the background: training stops only to copy the "
                   "state to memory; pre-emption and the last step wait for the write"),
     settings::key(&CheckpointConfig::resume, "resume", "auto|never|DIR",
                   "auto: continue from the newest checkpoint in `checkpoint.ckpt_dir` that "
                   "verifies",
                   [](const std::string& s) -> std::string {
                     return s.empty() ? "takes auto, never or a checkpoint directory" : "";
                   }),
     settings::key(&CheckpointConfig::allow_change, "allow_change", "A,B",
                   "settings a resumed run may change from the checkpoint's run, "
                   "comma-separated: " +
                       changeable_list(),
                   [](const std::string& s) -> std::string {
                     const std::vector<std::string> names = changeable();
                     for (size_t at = 0; at <= s.size();) {
                       const size_t comma = std::min(s.find(',', at), s.size());
                       const std::string name = s.substr(at, comma - at);
                       if (std::find(names.begin(), names.end(), name) == names.end())
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
