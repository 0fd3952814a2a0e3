#include "parallel/comm_queue.hpp"

#include "parallel/trace.hpp"

namespace tetra {

CommQueue::CommQueue() : thread_([this] { loop(); }) {}

CommQueue::~CommQueue() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

int64_t CommQueue::push(Job job) {
  int64_t ticket = 0;
  {
    std::lock_guard lock(mu_);
    todo_.push_back(std::move(job));
    ticket = ++pushed_;
  }
  cv_.notify_all();
  return ticket;
}

void CommQueue::wait(int64_t ticket) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_ >= ticket || error_; });
  if (error_) std::rethrow_exception(error_);
}

std::vector<CommQueue::Job> CommQueue::take_finished() {
  std::vector<Job> out;
  std::lock_guard lock(mu_);
  out.swap(finished_);
  return out;
}

// One job at a time, the lock released while it runs. After an error the thread runs nothing
// more: the calls after it would no longer meet the other members' in order.
void CommQueue::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || (!todo_.empty() && !error_); });
    if (todo_.empty() || error_) return;
    Job job = std::move(todo_.front());
    todo_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    job.start_us = trace::detail::now_us();
    try {
      job.run();
    } catch (...) {
      error = std::current_exception();
    }
    job.end_us = trace::detail::now_us();
    job.run = nullptr;
    lock.lock();
    if (error) error_ = error;
    finished_.push_back(std::move(job));
    ++done_;
    cv_.notify_all();
  }
}

}  // namespace tetra
