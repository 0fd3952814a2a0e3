// tetra train's outputs, checked on rank 0 before the run changes anything (before a token
// cache, the checkpoint directory, its lock or `latest`): so that a refused run leaves every
// file as it was.
//
// Each output alone: --metrics, --trace and an --export file must be regular files or new
// ones in a directory tetra can create files in (util/output_file.hpp), an --export
// directory missing, empty or an earlier export, --tensorboard a directory or a creatable one,
// and --ckpt-dir a directory or a creatable one.
//
// And against each other and the inputs (util/same_path.hpp): no output may be another output,
// lie inside an --export directory, or be an input: the --data and
// --val-data files (or lie inside their directories, where a next run would read it), the
// --tokenizer file, --init-from (a file, or a model directory and its files), the --config file,
// the checkpoint directory's lock and `latest`, a checkpoint in it (the one resumed from among
// them), or inside --resume's checkpoint.
#pragma once
#include "train/config.hpp"

namespace tetra {

// Throws tetra::Error naming the flag and its path, and for a clash both flags and paths.
void check_train_outputs(const TrainConfig& c);

}  // namespace tetra
