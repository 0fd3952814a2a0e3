#include "train/faults.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "parallel/trace.hpp"
#include "util/error.hpp"

namespace tetra {

FaultPlan FaultPlan::parse(const std::string& spec) {
  FaultPlan f;
  const char* usage = " (expected RANK@STEP[:MODE], MODE kill, ckpt, hang, slow=MS or preempt)";
  const size_t at = spec.find('@'), colon = spec.find(':');
  check(at != std::string::npos && at > 0, "`checkpoint.inject_failure` '", spec, "'", usage);
  const std::string mode = colon == std::string::npos ? "kill" : spec.substr(colon + 1);
  try {
    size_t used = 0;
    f.rank = std::stoi(spec.substr(0, at), &used);
    check(used == at, "");
    const std::string step =
        spec.substr(at + 1, colon == std::string::npos ? std::string::npos : colon - at - 1);
    f.step = std::stoll(step, &used);
    check(used == step.size(), "");
  } catch (...) {
    fail("`checkpoint.inject_failure` '", spec, "'", usage);
  }
  check(f.rank >= 0 && f.step >= 0, "`checkpoint.inject_failure` '", spec, "'", usage);
  if (mode == "kill") {
    f.mode = Mode::Kill;
  } else if (mode == "ckpt") {
    f.mode = Mode::Ckpt;
  } else if (mode == "hang") {
    f.mode = Mode::Hang;
  } else if (mode == "preempt") {
    f.mode = Mode::Preempt;
  } else if (mode.rfind("slow=", 0) == 0) {
    f.mode = Mode::Slow;
    f.slow_ms = std::atoi(mode.c_str() + 5);
    check(f.slow_ms > 0, "`checkpoint.inject_failure` '", spec, "': slow=MS needs a positive MS");
  } else {
    fail("`checkpoint.inject_failure` '", spec, "'", usage);
  }
  return f;
}

int FaultPlan::restart_count() {
  int n = 0;
  for (const char* name : {"TETRA_RESTART", "SLURM_RESTART_COUNT"})
    if (const char* v = std::getenv(name)) n += std::max(0, std::atoi(v));
  return n;
}

void FaultPlan::during_step(int rank, int64_t step) const {
  if (mode == Mode::None || rank != this->rank || !first_attempt()) return;
  if (mode == Mode::Slow && step >= this->step) {
    // Compute time for the straggler report (outside any communication call), and a span of
    // its own in a trace.
    trace::Span span(trace::Lane::Compute, [](trace::Event& e) { e.name = "injected slow"; });
    std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
  }
  if (step != this->step) return;
  if (mode == Mode::Kill) {
    std::fprintf(stderr, "tetra: injected failure: killing rank %d at step %lld\n", rank,
                 (long long)step);
    std::fflush(stderr);
    ::kill(::getpid(), SIGKILL);
  }
  if (mode == Mode::Preempt) {
    std::fprintf(stderr, "tetra: injected failure: pre-empting rank %d at step %lld (SIGTERM)\n",
                 rank, (long long)step);
    std::fflush(stderr);
    ::raise(SIGTERM);
  }
  if (mode == Mode::Hang) {
    std::fprintf(stderr, "tetra: injected failure: rank %d stops answering at step %lld\n", rank,
                 (long long)step);
    std::fflush(stderr);
    for (;;) ::pause();
  }
}

int FaultPlan::signal_during_checkpoint(int rank, int64_t step) const {
  if (rank != this->rank || step < this->step || !first_attempt()) return 0;
  return mode == Mode::Ckpt ? SIGKILL : mode == Mode::Preempt ? SIGTERM : 0;
}

}  // namespace tetra
