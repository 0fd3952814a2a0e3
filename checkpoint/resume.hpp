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
//  - another model, or another value of a setting that fixes the run (the seed, the global
//    batch: any key of the compared sections that --allow-change cannot name);
//  - a step past now's --steps;
//  - another value of a setting --allow-change may name (kChangeable) that `allowed` does not
//    name; all such differences in one message. A --min-lr left to its default
//    (!min_lr_given) follows --lr: a change of --lr, or allowing one, covers it.
// The compared sections are model, batch, optimizer, data and device; within them a few keys
// may change freely (the micro-batch, the ZeRO stage, recomputation, validation, the
// tokenizer, --init-from, the device and the communicators), as may the layout, checkpoint
// and output sections: restore() takes any layout and ZeRO stage. A key `saved` does not record
// (an older tetra's checkpoint) is compared only when --allow-change may name it, and then
// differs ("not recorded").
void check_resumable(const RunState& saved, const RunState& now,
                     const std::set<std::string>& allowed, bool min_lr_given,
                     const std::string& path);

// Loads every unit of `params` (this rank's, TP-local for TP rank tp_rank) from r: each
// rank assembles the whole tensors of its units from all shard files, keeps its TP slice,
// and ZeroParams::load_state keeps its ZeRO shard, so any saved layout resumes at any other.
void restore(const Reader& r, ZeroParams& params, int tp_rank);

}  // namespace tetra::ckpt
