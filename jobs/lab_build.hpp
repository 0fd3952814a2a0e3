// What the lesson files (jobs/lab_*.cpp) share: a lesson's small run as a configuration, its
// plan, and readers of the metrics; the lessons themselves, by topic.
#pragma once
#include <string>
#include <vector>

#include "jobs/lab_lessons.hpp"
#include "plan/setup.hpp"

namespace tetra::lab {

// A lesson's configuration: a small model, fp32, `steps` steps of `batch` sequences, and a
// fixed peak (--peak-tflops 1) so that no run spends time probing one.
TrainConfig tiny(int layers, int dim, int heads, int kv_heads, int ffn, int seq, int batch,
                 int steps);

// A configuration as tetra train reads it from the command line its schema gives it, and
// tetra plan's setup of it on `ranks` ranks.
struct Setup {
  TrainConfig config;
  std::set<std::string> keys;  // the settings that differ from tetra train's defaults
  plan::Setup plan;
  int ranks = 1;
};
Setup setup(const TrainArgs& train, const TrainConfig& c, int ranks);
LessonRun run_of(const Setup& s, Text label, bool supervised = false);

// The parameters a rank of pipeline stage 0 holds, TP-local, each unit padded to a multiple
// of dp_cp as ZeRO's flat buffers are.
double stage0_params(const plan::Setup& s);

// A group's bytes in the last record (ring-counted).
Measured group_bytes(const std::vector<json>& records, const std::string& group);
// The most of `key` over the records, and its mean and median over the steps after the
// first (the median for times, which a busy machine's one slow step would skew).
double most(const std::vector<json>& records, const char* key);
double mean_after_first(const std::vector<json>& records, const char* key);
double median_after_first(const std::vector<json>& records, const char* key);
// A rate (mfu, hfu, tokens_per_s) of the steps after the first as a whole: each step's
// weighted by its step_ms, which is their tokens over their time (never a mean of rates).
double rate_after_first(const std::vector<json>& records, const char* key);

// How much less the second run's peak memory is than the first's (peak_memory_bytes), with
// `note` naming both peaks as {more} and {less}.
Measured peak_drop(const std::vector<json>& more, const std::vector<json>& less, Text note);

// Numbers as the texts show them: with commas, or one printf conversion.
std::string num(const char* format, double x);
std::string pct(double share);  // "20.0 %"

// A note for the lessons that measure memory.
extern const Text kAllocatorPeak;

// The lessons, by topic: jobs/lab_compute.cpp, lab_data.cpp, lab_model.cpp, lab_pipeline.cpp,
// lab_resume.cpp.
Lesson six_nd();
Lesson mfu_hfu(const TrainArgs& train);
Lesson barrier(const TrainArgs& train);
Lesson llama405b();
Lesson dp(const TrainArgs& train);
Lesson zero(const TrainArgs& train);
Lesson zero_traffic(const TrainArgs& train);
Lesson four_d(const TrainArgs& train);
Lesson tp(const TrainArgs& train);
Lesson sp(const TrainArgs& train);
Lesson cp(const TrainArgs& train);
Lesson pp(const TrainArgs& train);
Lesson interleaved(const TrainArgs& train);
Lesson zero_bubble(const TrainArgs& train);
Lesson pp_memory(const TrainArgs& train);
Lesson resume(const TrainArgs& train);

}  // namespace tetra::lab
