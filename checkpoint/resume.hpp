// Resuming a run: which checkpoint it continues, whether its configuration may continue that
// checkpoint's run, and restoring a rank's parameters and Adam state from a checkpoint written
// at any layout. Nothing here is collective: a test runs it in one process.
#pragma once
#include <set>
#include <string>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/config.hpp"
#include "parallel/zero.hpp"

namespace tetra::ckpt {

// Rank 0: the checkpoint to resume from under c.resume: "auto" takes the newest one of
// c.ckpt_dir's line that verifies (warning on stderr about each one skipped, and refusing when
// checkpoints exist but none verifies), a path is verified and taken, "never" and an "auto"
// without a checkpoint directory or checkpoint give "" (start from step 0).
std::string resume_path(const CheckpointConfig& c);

// Throws tetra::Error, naming `path` (the checkpoint), when a run whose checkpoints record
// `now` may not continue the one `saved` records (RunState's model, layout and config
// sections; `now`'s step is not used):
//  - another model (the trained shape as a whole), or another value of a setting that fixes
//    the run (its table marks it Resume::Fixed: the seed, the global batch);
//  - a step past now's steps;
//  - another value of a setting --allow-change may name (Resume::Changeable) that `allowed`
//    does not name; all such differences in one message. A min_lr left to its default
//    (!min_lr_given) follows lr: a change of lr, or allowing one, covers it.
// Settings marked Resume::Free (the layout, the micro-batch, the ZeRO stage, validation, the
// device, checkpoints and outputs) may differ: restore() takes any layout and ZeRO stage. A
// key `saved` does not record (an older tetra's checkpoint) is compared only when
// --allow-change may name it, and then differs ("not recorded").
void check_resumable(const RunState& saved, const RunState& now,
                     const std::set<std::string>& allowed, bool min_lr_given,
                     const std::string& path);

// Loads every unit of `params` (this rank's, TP-local for TP rank tp_rank) from r: each
// rank assembles the whole tensors of its units from all shard files, keeps its TP slice,
// and ZeroParams::load_state keeps its ZeRO shard, so any saved layout resumes at any other.
void restore(const Reader& r, ZeroParams& params, int tp_rank);

}  // namespace tetra::ckpt
