// Checkpoint helpers the trainer calls before its grid exists (rank 0 or every rank, no
// collectives except broadcast_string). Trainer::resume_from and Trainer::save_checkpoint
// live in trainer_checkpoint.cpp too.
#pragma once
#include <mpi.h>

#include <string>

#include "train/config.hpp"
#include "util/json.hpp"

namespace tetra {

// Creates the directory if needed and checks that a file can be written in it.
void check_writable_dir(const std::string& dir);
// Rank 0: the checkpoint to resume from under --resume (auto: the newest one in --ckpt-dir
// that verifies, warning about each one skipped), or "" for a fresh start.
std::string find_resume_path(const TrainConfig& opt);
// The settings a checkpoint records of the run that wrote it, keyed by kChangeable's names:
// what a resume compares. --data as an absolute path, so that spellings of one file agree.
json run_settings(const TrainConfig& opt);
// Rank 0's string on every rank of comm.
std::string broadcast_string(MPI_Comm comm, std::string s);

}  // namespace tetra
