// `tetra lab [LESSON] [--answer X [--answer Y]] [--lang en|zh] [--list]`: lessons in 4D
// parallelism that ask the learner to predict a number, diagnose a wrong prediction (a known
// mistake, else a hint) and give a second try, run the layout, and grade the prediction beside
// the formula's answer and the measured value (within 5 %, or exactly for a step or a count),
// with the worked answer and the code that does it. The lessons are in jobs/lab_*.cpp;
// `--exercise NAME` and `--check` are exercises in the code (jobs/lab_exercise.hpp). Text
// only; the parent of its MPI jobs, like tetra launch.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "jobs/job.hpp"
#include "jobs/lab_lessons.hpp"
#include "jobs/train_args.hpp"

namespace tetra {

struct LabOptions {
  std::string lesson;                // a name or a number from 1; empty: every lesson in order
  std::vector<std::string> answers;  // --answer, once per try; empty: ask on the terminal
  std::string lang;                  // --lang en|zh; empty: from the locale (lab::language)
  bool list = false;
  std::string out;  // keep each run's log and metrics here (default: a temporary directory)
  JobOptions job{.run_timeout = 300};
  // Exercises in the code (jobs/lab_exercise.hpp): make one's copy in `dir`, or check it.
  std::string exercise;
  bool check = false;
  std::string dir = "tetra-exercise";
};

// A number as a learner types it: digits, with commas only between groups of three
// ("3,099,520"), a decimal point and an exponent ("3.79e25"), or a fraction of two such
// ("1/5"); a trailing % divides by 100. Spaces around it are fine, inside it not: "1 2",
// "0x10", "inf" and "1,2" are not numbers. `percent`: it ended in %.
bool parse_answer(const std::string& text, double& value, bool* percent = nullptr);

// An answer to a question of `unit`. A share is 0.2, 20 % or 1/5: a number above 1 without %
// reads as a percentage (AsPercent, "20" is 20 %) up to 100, and past 100 % is refused.
enum class Reading { Number, AsPercent, NotNumber, NotShare };
Reading read_answer(const std::string& text, lab::Unit unit, double& value);

// Runs lesson l's jobs, their files in dir, through job's launcher and time limit; what each
// wrote. before(k) is called as run k starts and after(k, result) when it has ended; go_on as
// run_job's. Throws JobFailed for a run that failed or timed out, Interrupted for one go_on
// stopped.
std::vector<lab::RunOutput> run_lesson(const lab::Lesson& l, const JobOptions& job,
                                       const TrainArgs& train, const std::string& dir,
                                       const std::function<void(size_t)>& before,
                                       const std::function<void(size_t, const JobResult&)>& after,
                                       const std::function<bool()>& go_on = nullptr);

// Runs the lessons `o` asks for (parsed by cli/jobs_flags.cpp). Returns 0 when the lessons ran
// (right or wrong answers alike), 2 for bad input, 1 when a run failed, 130 when interrupted.
int run_lab(const LabOptions& o, const TrainArgs& train);

}  // namespace tetra
