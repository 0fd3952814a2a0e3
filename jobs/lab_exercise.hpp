// Exercises in the code: `tetra lab --exercise NAME [--dir DIR]` copies the sources tetra was
// built from into DIR with one function a lesson teaches emptied, and `tetra lab --check
// [--dir DIR]` builds that copy and grades it against one rank.
//
// In the sources each exercise's body lies between two comment lines,
// `// exercise(NAME) begin` and `// exercise(NAME) end`, which the compiler ignores. The copy
// replaces those lines by the exercise's stub: a comment that says it is a stub to replace and
// what the function must do (the math and the shapes), and a body that compiles and runs but
// does not do the work, so that the untouched exercise fails its check.
//
// The check builds the copy's grader (tests/lab/grader.cpp) with cmake in DIR/build (only the
// grader and what it links, -DTETRA_CUDA=OFF, through ccache where there is one; the folder is
// kept, so a second check rebuilds only what changed), has the grader of tetra's own build
// run the one-rank reference (its sources are whole: a wrong ColumnParallelLinear would agree
// with itself at TP 1), then runs the copy's grader on the layouts that use the function and
// prints the first tensor that differs from one rank, or that it passes. A pipeline order
// goes through the schedule simulator first, so that one that deadlocks is named, never run.
#pragma once
#include <string>
#include <vector>

#include "jobs/job.hpp"

namespace tetra::lab {

struct Exercise {
  std::string name;      // "tp_column_backward"
  std::string lesson;    // the lesson that teaches it: "tp"
  std::string file;      // where it is, under the sources: "parallel/tp.cpp"
  std::string function;  // "ColumnParallelLinear::backward_input"
  std::string stub;      // what replaces the marked lines, indented as their first line
};

// Every exercise, in the order of the lessons.
const std::vector<Exercise>& exercises();
// The exercise named `name`; throws tetra::Error listing them for any other name.
const Exercise& find_exercise(const std::string& name);

// The source `text` of e.file with the lines from `// exercise(NAME) begin` to
// `// exercise(NAME) end` replaced by e's stub. Throws tetra::Error unless each marker line is
// there exactly once, the begin before the end.
std::string stubbed(const std::string& text, const Exercise& e);

// The sources tetra was built from: $TETRA_SOURCE_DIR where set, else the directory recorded
// when tetra was built. Throws tetra::Error when it holds no tetra sources.
std::string source_dir();

// tetra lab --exercise NAME --dir DIR. DIR is made, or is empty, or holds an exercise already
// (then its sources are replaced, the files that change kept in DIR/.tetra-exercise/replaced/,
// and its build folder kept). Returns 0; throws tetra::Error for any other DIR.
int make_exercise(const std::string& name, const std::string& dir);

// tetra lab --check --dir DIR: 0 when the copy passes, 1 when it fails (or does not build).
// Throws tetra::Error when DIR holds no exercise, JobFailed when a step could not run.
int check_exercise(const std::string& dir, const JobOptions& job);

}  // namespace tetra::lab
