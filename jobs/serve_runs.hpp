// tetra serve's runs: one at a time, each in a thread of its own, its events (server-sent
// events: "event: NAME\ndata: JSON\n\n") queued for the HTTP stream that started it. When that
// stream's connection drops or the server stops, the run is stopped: its job's process group
// gets SIGTERM (run_job), and its temporary directory is removed.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "jobs/serve_api.hpp"

namespace tetra::serve {

class EventStream {
 public:
  // Queues one event for the page.
  void emit(const std::string& event, const json& data);
  // Moves the queued events into `out`, waiting up to `wait` for one. True once the run has
  // ended and nothing is left to send.
  bool take(std::vector<std::string>& out, std::chrono::milliseconds wait);
  void finish();
  // The page went or the server stops: the run stops at its next look (every 20 ms).
  void stop() { stop_ = true; }
  bool stopped() const { return stop_; }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::string> events_;
  bool finished_ = false;
  std::atomic<bool> stop_{false};
};

class RunSlot {
 public:
  using Work = std::function<void(EventStream&)>;
  // Starts `work` in a thread of its own, unless a run is going or stopping: null then.
  std::shared_ptr<EventStream> start(Work work);
  // "idle", "running" or "stopping".
  std::string state();
  // Stops the run, if any, and waits for it.
  void stop();
  ~RunSlot() { stop(); }

 private:
  std::mutex m_;
  std::shared_ptr<EventStream> current_;
  std::shared_ptr<std::atomic<bool>> done_;
  std::thread worker_;
};

// The layout run: one rank, then the layout, each step's record as a "step" event, then
// "result" with both runs' records (measured beside planned, and whether the layout matched
// one rank). "error" ends a run that failed or was refused.
void run_layout_work(EventStream& events, RunRequest request, const TrainArgs& train);

// A lesson's runs ("run" and "ran" events for each), then "result": the answers graded, the
// measured value beside the formula's, the notes, the working and the code.
void run_lesson_work(EventStream& events, Api::LessonRequest request, const JobOptions& job,
                     const TrainArgs& train);

}  // namespace tetra::serve
