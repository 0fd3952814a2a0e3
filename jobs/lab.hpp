// `tetra lab [LESSON] [--answer X] [--list]`: lessons in 4D parallelism that ask the learner
// to predict a number, run the layout, and grade the prediction beside the formula's answer
// and the measured value (within 5 %, or exactly for a step). The lessons are in
// jobs/lab_lessons.cpp. Text only; the parent of its MPI jobs, like tetra launch.
#pragma once
#include <string>
#include <vector>

#include "jobs/job.hpp"
#include "jobs/train_args.hpp"

namespace tetra {

struct LabOptions {
  std::string lesson;  // a name or a number from 1; empty: every lesson in order
  std::string answer;  // --answer as given; empty: ask on the terminal
  double answer_value = 0;
  bool list = false;
  std::string out;  // keep each run's log and metrics here (default: a temporary directory)
  JobOptions job{.run_timeout = 300};
};

// An answer as a learner types it: a number, with commas between digit groups allowed and a
// trailing % dividing by 100. False for anything else.
bool parse_answer(const std::string& text, double& value);

// Runs the lessons `o` asks for (parsed by cli/jobs_flags.cpp). Returns 0 when the lessons ran
// (right or wrong answers alike), 2 for bad input, 1 when a run failed, 130 when interrupted.
int run_lab(const LabOptions& o, const TrainArgs& train);

}  // namespace tetra
