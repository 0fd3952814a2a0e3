// The communication thread of --overlap (parallel/comm_queue.hpp): jobs run one at a time in
// the order queued, a wait returns once its job and every one before it ran, and an error
// surfaces at the wait, after which the thread runs nothing more.
#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "parallel/comm_queue.hpp"

using namespace tetra;

TEST_CASE("comm queue: jobs in queue order, waits, finished jobs with their times") {
  CommQueue q;
  std::vector<int> order;  // written by the thread only, read after the waits
  std::atomic<bool> go{false};
  const int64_t first = q.push({[&] {
                                  while (!go) std::this_thread::yield();
                                  order.push_back(1);
                                },
                                "first", 0});
  std::vector<int64_t> tickets;
  for (int i = 2; i <= 5; ++i) tickets.push_back(q.push({[&, i] { order.push_back(i); }, "n", 0}));
  CHECK(first == 1);
  CHECK(tickets.back() == 5);
  go = true;
  q.wait(tickets[1]);  // job 3: jobs 1 and 2 ran before it
  CHECK(order.size() >= 3);
  q.wait(tickets.back());
  CHECK(order == std::vector<int>{1, 2, 3, 4, 5});
  const std::vector<CommQueue::Job> done = q.take_finished();
  REQUIRE(done.size() == 5);
  CHECK(done[0].name == "first");
  for (const CommQueue::Job& j : done) CHECK(j.end_us >= j.start_us);
  CHECK(q.take_finished().empty());
}

TEST_CASE("comm queue: an error surfaces at the wait, and nothing runs after it") {
  CommQueue q;
  bool ran_after = false;
  const int64_t bad = q.push({[] { throw std::runtime_error("collective failed"); }, "bad", 0});
  const int64_t next = q.push({[&] { ran_after = true; }, "next", 0});
  CHECK_THROWS_WITH_AS(q.wait(bad), "collective failed", std::runtime_error);
  CHECK_THROWS_AS(q.wait(next), std::runtime_error);
  CHECK_FALSE(ran_after);
}
