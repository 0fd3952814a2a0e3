// A communication thread: runs the collectives queued on one MPI communicator, one at a time,
// in the order they were queued, while the rank's main thread computes (--overlap on).
//
// Why a thread: Open MPI 4.1 has no progress thread for point-to-point or collective traffic
// ("OMPI progress: no" in ompi_info), so a non-blocking collective started before a block's
// backward would mostly run inside its wait. The thread makes the blocking call the blocking
// path makes, on the same tensors, with the same counts, so its result is that call's to the
// bit. It calls MPI on a duplicate of the group's communicator, under MPI_THREAD_MULTIPLE: the
// main thread keeps calling MPI on the other groups (and on this one's own communicator)
// meanwhile. The members of a group queue its collectives in the same order, so their threads
// meet in the same order.
//
// The thread touches host memory only: the communicator stages device tensors through the
// backend on the main thread, before a call is queued and after its wait.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tetra {

class CommQueue {
 public:
  // A queued call: what it runs, its name on the trace ("reduce_scatter dp_cp"), and, once
  // run, when it started and ended (trace::detail::now_us()).
  struct Job {
    std::function<void()> run;
    std::string name;
    double bytes = 0;
    double start_us = 0, end_us = 0;
  };

  CommQueue();
  ~CommQueue();  // runs what is queued, then ends the thread
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;

  // Queues a job; returns its ticket (1, 2, ... in queue order).
  int64_t push(Job job);
  // Blocks until job `ticket` has run (and with it every job queued before it); rethrows the
  // error of a job that threw.
  void wait(int64_t ticket);
  // The jobs that have run since the last call, oldest first (their names and times).
  std::vector<Job> take_finished();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> todo_;
  std::vector<Job> finished_;
  int64_t pushed_ = 0, done_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace tetra
