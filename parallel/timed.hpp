// Counting one communication call: its bytes and calls into the group's CommStats, its wall
// time, and a span on the trace's comm lane. Shared by the MPI and NCCL communicators.
#pragma once
#include <cmath>
#include <string>

#include "parallel/comm.hpp"
#include "parallel/trace.hpp"
#include "util/clock.hpp"

namespace tetra {

// Adds one call's bytes and wall time to the stats when it goes out of scope, and shows
// the call as a span on the trace's comm lane ("all_reduce tp").
class Timed {
 public:
  Timed(CommStats& s, CommOp op, double bytes, const char* what, const std::string& group)
      : Timed(s, what, group, bytes) {
    s_.calls += 1;
    s_.by_op[int(op)] += 1;
    s_.bytes += bytes;
  }
  // Time only, for the wait of a call already counted.
  Timed(CommStats& s, const char* what, const std::string& group, double bytes = 0)
      : s_(s), t0_(Clock::now()), span_(trace::Lane::Comm, [&](trace::Event& e) {
          e.name = std::string(what) + " " + group;
          e.arg("bytes", int64_t(std::llround(bytes)));
          e.arg("group", group);
        }) {}
  ~Timed() { s_.seconds += seconds_since(t0_); }

 private:
  CommStats& s_;
  Clock::time_point t0_;
  trace::Span span_;
};

}  // namespace tetra
