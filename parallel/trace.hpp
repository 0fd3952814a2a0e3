// A Chrome trace of a few training steps (`tetra train --trace FILE`): spans of compute,
// communication and pipeline waiting per rank, which Perfetto or chrome://tracing opens.
//
// One process-wide recorder, used by the main thread only (OpenMP workers never record).
// It is off unless the trainer turns recording on for the traced steps; a hook then costs
// one branch, since a span's name and arguments are built only while recording.
//
//   trace::Span span(trace::Lane::Compute, [&](trace::Event& e) {
//     e.name = "adam";
//     e.arg("step", step);
//   });
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>

namespace tetra::trace {

// A lane is one thread row under its rank's process in the viewer, so that spans of
// different kinds may overlap (a collective inside a backward, a receive that is also a wait).
// Queued: the collectives a communication thread or stream ran beside the compute
// (--overlap on), each recorded by the main thread once it has seen it done.
enum class Lane { Step, Compute, Wait, Comm, Queued };

struct Event {
  std::string name;
  std::string args;  // JSON members without braces: "micro_batch":3,"group":"pp"
  void arg(const char* key, int64_t value);
  void arg(const char* key, const std::string& value);
};

namespace detail {
inline bool recording = false;
double now_us();
void add(Lane lane, double start_us, Event&& e);
}  // namespace detail

// A span that began and ended at detail::now_us() readings taken elsewhere (on a
// communication thread); recorded by the main thread, only while recording.
void add_span(Lane lane, double start_us, double end_us, Event&& e);

inline bool recording() {
  return detail::recording;
}

// Turns recording on or off (the trainer: on for the traced steps only).
void record(bool on);

// Records the time from construction to destruction as one complete event on `lane`;
// `describe(Event&)` fills the name and arguments, and runs only while recording.
class Span {
 public:
  template <typename Describe>
  Span(Lane lane, Describe&& describe) {
    if (!detail::recording) return;
    active_ = true;
    lane_ = lane;
    describe(event_);
    start_us_ = detail::now_us();
  }
  ~Span() {
    if (active_) detail::add(lane_, start_us_, std::move(event_));
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  bool active_ = false;
  Lane lane_ = Lane::Compute;
  double start_us_ = 0;
  Event event_;
};

// Collective over world: drops anything recorded so far and sets the common time origin
// right after a barrier. Ranks on one machine share the steady clock, so their spans line
// up; across machines the clocks are only as aligned as the barrier's exit.
void start(MPI_Comm world);

// Collective over world: gathers every rank's events on rank 0, which writes `path`
// atomically (a temporary file, then a rename). `process_name` labels this rank. Throws
// tetra::Error on rank 0 if the file cannot be written.
void write(MPI_Comm world, const std::string& path, const std::string& process_name);

}  // namespace tetra::trace
