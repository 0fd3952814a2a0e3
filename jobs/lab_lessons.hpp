// The lessons of `tetra lab`, in order: each sets up a small layout, explains one idea with
// its formula, asks for one number the run then measures, and knows the formula's answer and
// its working for this layout. jobs/lab.cpp asks, runs and grades.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "jobs/train_args.hpp"
#include "util/json.hpp"

namespace tetra::lab {

// One tetra train job of a lesson. A supervised one runs under tetra launch (one restart)
// with a checkpoint directory of its own.
struct LessonRun {
  std::string label;  // "TP 4 with --sp"
  int ranks = 1;
  std::vector<std::string> flags;  // tetra train's, without --metrics and --ckpt-dir
  bool supervised = false;
};

// What the runs measured: the number, where it comes from, and lines to show beside it.
struct Measured {
  double value = 0;
  std::string source;  // "comm_bytes.dp_cp of every step's metrics"
  std::string note;
};

enum class Unit { Bytes, Fraction, Step };

struct Lesson {
  std::string name, title;
  std::string idea;      // a few lines, with the formula
  std::string question;  // what to predict, and in which unit
  Unit unit = Unit::Bytes;
  double formula = 0;   // the formula's answer for this lesson's layout
  std::string working;  // how the formula gets there, with the numbers
  std::vector<LessonRun> runs;
  // From each run's metrics records, in the order of runs. Throws tetra::Error when the
  // records do not hold the number (a run that did not get that far).
  std::function<Measured(const std::vector<std::vector<json>>&)> measure;
  // Graded exactly (a count), else within 5 % of the formula.
  bool exact() const { return unit == Unit::Step; }
};

// Every lesson, in order. Builds their setups through tetra train's own flag parser and the
// plan's layout of units, so the numbers they state are the trainer's.
std::vector<Lesson> lessons(const TrainArgs& train);

// The lesson named (or numbered from 1) `which`, as an index; throws tetra::Error for none.
size_t find_lesson(const std::vector<Lesson>& all, const std::string& which);

// "690,048 B", "42.9 % (0.4286)", "step 6".
std::string show(Unit unit, double value);

}  // namespace tetra::lab
