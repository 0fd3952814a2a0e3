// tetra's error types and its exit statuses. Error is everything a user can get wrong: bad
// flags, bad files, bad layouts. Each command catches it at the top, prints "tetra: error:
// <what>" once (rank 0) and exits with the error's status, from the one table below
// (docs/design.md's CLI contract).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tetra {

// Every exit status tetra gives, and what it means to whoever started it.
namespace exit_status {
inline constexpr int kOk = 0;
inline constexpr int kFailed = 1;      // a check failed (plan --compare) or a job tetra ran failed
inline constexpr int kInput = 2;       // bad input or an internal error: a rerun fails the same way
inline constexpr int kDiverged = 65;   // EX_DATAERR: a loss, gradient or weight not finite
inline constexpr int kLocked = 73;     // EX_CANTCREAT: another job holds the checkpoint directory
inline constexpr int kPreempted = 75;  // EX_TEMPFAIL: signalled, checkpointed: resume me
inline constexpr int kCannotRun = 127;    // a command tetra was to start cannot be started
inline constexpr int kInterrupted = 130;  // SIGINT or SIGTERM stopped a command and its jobs
}  // namespace exit_status

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
  Error(const std::string& what, int exit_status) : std::runtime_error(what), status(exit_status) {}
  int status = exit_status::kInput;  // the program's exit status when this error ends it
};

// An error every rank of a communicator holds, with the same message (parallel/agree.hpp
// makes them): one rank (0) reports it and every rank exits. Any other Error is one rank's
// alone, and that rank must take the job down (MPI_Abort) or the others wait for it forever.
struct AgreedError : Error {
  using Error::Error;
};

// Numbers that are not finite: a step whose loss or gradient norm is not (training stopped
// before that step's update, so no checkpoint holds its weights; every rank sees the same
// totals, so every rank throws it), or a model's weights or logits in tetra generate (agree()
// carries it to every rank). The program exits 65, which tetra launch does not restart
// (resuming is bit-exact, so a rerun would diverge again).
struct DivergedError : AgreedError {
  explicit DivergedError(const std::string& what) : AgreedError(what, exit_status::kDiverged) {}
};

// SIGINT or SIGTERM reached a command while a job it started ran (the job was stopped).
struct Interrupted : Error {
  explicit Interrupted(const std::string& what) : Error(what, exit_status::kInterrupted) {}
};

// A job a command started (a run of tetra sweep or tetra lab) failed or timed out: not the
// command's input.
struct JobFailed : Error {
  explicit JobFailed(const std::string& what) : Error(what, exit_status::kFailed) {}
};

// What ends a command: an Error's own status, else (an exception from a library: tetra's own
// bug or the system's) kInput with "internal error: " before its words.
inline int exit_status_of(const std::exception& e) {
  const auto* error = dynamic_cast<const Error*>(&e);
  return error ? error->status : exit_status::kInput;
}
inline std::string error_text(const std::exception& e) {
  return dynamic_cast<const Error*>(&e) ? e.what() : std::string("internal error: ") + e.what();
}

// fail("heads (", h, ") must divide dim (", d, ")") throws Error with the pieces joined.
template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  throw Error(os.str());
}

template <typename... Args>
void check(bool ok, Args&&... args) {
  if (!ok) fail(std::forward<Args>(args)...);
}

}  // namespace tetra
