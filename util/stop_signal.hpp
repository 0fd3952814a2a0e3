// SIGINT, SIGTERM and SIGHUP reaching a command that has nothing to save (tetra plan, ckpt,
// plot, generate, tokenize, and train before its own handlers: train/preempt.hpp): the command
// ends at once, from the handler, with one line ("tetra: error: interrupted by Interrupt"),
// exit status 130 (exit_status::kInterrupted), and the temporaries it was writing removed. Its
// outputs are written whole (a temporary renamed over the target: util/output_file.hpp) or
// not at all, so none is left half-written. Everything the handler does is async-signal-safe:
// the lines are made when the handlers are installed, the temporaries' names kept in a fixed
// table, and the process ends with _exit.
#pragma once
#include <string>

namespace tetra {

// Installs the handlers for the lifetime of the object and restores the previous ones after.
// `speak`: this process says the line (rank 0; the others end silently).
class StopOnSignal {
 public:
  explicit StopOnSignal(bool speak);
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
};

// A temporary file being written (replace_file's): while the object lives, a signal that ends
// the process under StopOnSignal removes the file. Any thread may hold one; a path longer than
// the table's slots, or one beyond its 32 slots, is not tracked.
class TrackedTemporary {
 public:
  explicit TrackedTemporary(const std::string& path);
  ~TrackedTemporary();
  TrackedTemporary(const TrackedTemporary&) = delete;
  TrackedTemporary& operator=(const TrackedTemporary&) = delete;

 private:
  int slot_ = -1;
};

}  // namespace tetra
