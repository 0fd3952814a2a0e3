// `tetra lab [LESSON] [--answer X] [--list]`: lessons in 4D parallelism that ask the learner
// to predict a number, run the layout, and grade the prediction beside the formula's answer
// and the measured value (within 5 %, or exactly for a step). The lessons are in
// cli/lab_lessons.cpp. Text only; the parent of its MPI jobs, like tetra launch.
#pragma once
#include <string>
#include <vector>

#include "cli/job.hpp"

namespace CLI {
class App;
}

namespace tetra {

struct LabOptions {
  std::string lesson;  // a name or a number from 1; empty: every lesson in order
  std::string answer;  // --answer as given; empty: ask on the terminal
  double answer_value = 0;
  bool list = false;
  std::string out;  // keep each run's log and metrics here (default: a temporary directory)
  JobOptions job{.run_timeout = 300};
};

void add_lab_options(CLI::App& app, LabOptions& o);
// Checks the lesson's name and reads --answer as a number. Throws tetra::Error.
void finish_lab_options(const CLI::App& app, LabOptions& o);

// An answer as a learner types it: a number, with commas between digit groups allowed and a
// trailing % dividing by 100. False for anything else.
bool parse_answer(const std::string& text, double& value);

// args: what follows `tetra lab`. Returns 0 when the lessons ran (right or wrong answers
// alike), 2 for bad input, 1 when a run failed, 130 when interrupted.
int run_lab(const std::vector<std::string>& args);

}  // namespace tetra
