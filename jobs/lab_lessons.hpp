// The lessons of `tetra lab`, as data: each explains one idea with its formula (in English and
// Chinese, the numbers filled in from one table of values), asks for one number, knows the
// formula's answer for its small layout, the common mistakes and what each gives, the runs
// that measure it (built from tetra train's schema) and the code that does it. jobs/lab.cpp
// asks, runs and grades; the lessons themselves are in jobs/lab_*.cpp by topic.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "jobs/train_args.hpp"
#include "util/json.hpp"

namespace tetra::lab {

enum class Lang { En, Zh };

// --lang's value ("en" or "zh"); empty: the locale's, the first of LC_ALL, LC_MESSAGES and
// LANG that is set, Chinese when it starts with "zh".
Lang language(const std::string& flag);

// A text in both languages; "{name}" stands for the lesson's value `name`, so that both show
// the same digits.
struct Text {
  std::string en, zh;
};
using Values = std::map<std::string, std::string>;

// `t` in language `lang` with every {name} replaced by its value; throws tetra::Error for a
// name `values` lacks.
std::string fill(const Text& t, Lang lang, const Values& values);

enum class Unit {
  Bytes,   // "690,048 B"
  Share,   // of a whole: 0.2, 20 % or 1/5
  Ratio,   // "1.33x"
  Step,    // a step number, exact
  Count,   // a whole count, exact
  Days,    // "66.9 days"
  Millis,  // "100 ms"
};

// A mistake learners make, the number it gives for this lesson, and what it leaves out.
struct Mistake {
  std::string id;  // a short name for scripts and tests: "values", "forward-only"
  double value = 0;
  Text says;
};

// Where the code that does what a lesson teaches lives: a file of the tree and the function
// (or Class::method) to read there.
struct CodeRef {
  std::string file, function;
};

// One tetra train job of a lesson: a configuration and the settings it gives (its flags,
// built from the schema). A supervised one runs under tetra launch (one restart), with a
// checkpoint directory of its own.
struct LessonRun {
  Text label;
  int ranks = 1;
  TrainConfig config;
  std::set<std::string> keys;  // "layout.dp", ...: the settings its command line gives
  bool supervised = false;
};

// What one run wrote: its metrics records and its log's path.
struct RunOutput {
  std::vector<json> metrics;
  std::string log;
};

// What the runs measured that the lesson is about.
struct Measured {
  double value = 0;
  Text source;              // where the number comes from
  std::vector<Text> notes;  // what else the runs measured, beside it
  Values values;            // numbers the source and notes name
  bool ring_bytes = false;  // bytes from comm_bytes: counted per call at ring volumes
};

struct Lesson {
  std::string name;
  Unit unit = Unit::Bytes;
  Text title, idea, question;
  Text hint;     // after a wrong answer that matches no mistake
  Text working;  // the worked answer, shown after the run
  Values values;
  double formula = 0;  // the formula's answer for this lesson's layout
  std::vector<Mistake> mistakes;
  std::vector<CodeRef> code;
  std::vector<LessonRun> runs;  // none: tetra plan's code computes it, nothing to run
  // From the runs' output, in the order of runs. Throws tetra::Error when the records do not
  // hold the number (a run that did not get that far).
  std::function<Measured(const std::vector<RunOutput>&)> measure;

  // Graded exactly (a step, a count), else within 5 % of the formula's answer.
  bool exact() const { return unit == Unit::Step || unit == Unit::Count; }
  bool right(double answer) const;
  // The mistake `answer` matches (within 1 %, exactly for an exact lesson), if it is not right.
  const Mistake* diagnose(double answer) const;
};

// Every lesson, in order. Builds their setups through tetra train's own flag parser and the
// plan's layout of units, so the numbers they state are the trainer's.
std::vector<Lesson> lessons(const TrainArgs& train);

// The lesson named (or numbered from 1) `which`, as an index; throws tetra::Error for none.
size_t find_lesson(const std::vector<Lesson>& all, const std::string& which);

// The line a lesson whose bytes come from comm_bytes shows: how they are counted.
extern const Text kRingBytes;

// "690,048 B", "20.0 % (0.2000)", "step 6", "66.9 days" / "66.9 天".
std::string show(Unit unit, double value, Lang lang);

}  // namespace tetra::lab
