#include "parallel/watchdog.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <sstream>
#include <thread>

#include "parallel/placement.hpp"
#include "util/error.hpp"

namespace tetra::watchdog {

constexpr int kSlots = 256;  // groups alive at once on a rank (a trainer has six)
constexpr int kNameLen = 16;

// Boards live in memory shared between processes, so their atomics must not need locks.
static_assert(std::atomic<int64_t>::is_always_lock_free &&
              std::atomic<uint64_t>::is_always_lock_free);

// One rank's progress board. Only its rank writes it (but for `fired`); the other ranks of
// the machine read it.
struct Board {
  struct Slot {
    std::atomic<uint64_t> key{0};     // the group's name and members hashed; 0: slot free
    std::atomic<int64_t> entered{0};  // collectives this rank has entered on the group
    char name[kNameLen] = {};
  };
  // The call in progress: since_ns is 0 between calls and is written last, so that a reader
  // who sees the same since_ns before and after reading the rest has read one call.
  std::atomic<int64_t> since_ns{0};  // monotonic clock when it began
  std::atomic<int32_t> op{0}, slot{0};
  std::atomic<int32_t> peer{0};   // world rank, for a send or receive
  std::atomic<int64_t> seq{0};    // a collective's number on its group
  std::atomic<int32_t> fired{0};  // on the machine's first board: a rank is reporting
  // Step progress: the step in progress (-1 outside steps), and a count that every call and
  // every step begun raise, so that the watchdog sees the rank move.
  std::atomic<int64_t> step{-1};
  std::atomic<int64_t> progress{0};
  Slot slots[kSlots];
};

namespace {

// The coarse monotonic clock: a few ms of resolution are plenty against a timeout of
// seconds, and reading it costs a third of the precise one. It is the same clock in every
// process of the machine, so boards compare.
int64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

bool is_collective(Op op) {
  return op < Op::Send;
}

// The groups alive in this process, by slot. The watchdog thread reads it to describe a call.
struct Entry {
  uint64_t key = 0;
  std::string name;
  std::vector<int> world;
  int refs = 0;
};
struct Registry {
  std::mutex mu;
  Entry entries[kSlots];
};

// The running watchdog of this process.
struct State {
  double timeout = 0;  // seconds
  int me = 0;          // world rank
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Win win = MPI_WIN_NULL;
  Board* mine = nullptr;
  Board* first = nullptr;            // the machine's first board
  std::vector<const Board*> boards;  // by world rank; null for ranks on other machines
  Hosts hosts;                       // where every world rank runs, to name other machines
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::thread thread;
};

// Both are made once and never destroyed: a watchdog thread still running at exit (stop()
// never called) must not meet their destructors.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}
State* g_state = nullptr;
Board* g_mine = nullptr;  // the hot path's copy of g_state->mine; null while off

uint64_t group_key(const std::string& name, const std::vector<int>& world) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (char c : name) mix(uint8_t(c));
  for (int r : world) mix(uint32_t(r) + 0x100);
  return h ? h : 1;
}

void publish(Board& b, int slot, const Entry& e) {
  Board::Slot& s = b.slots[slot];
  s.entered.store(0, std::memory_order_relaxed);
  std::strncpy(s.name, e.name.c_str(), kNameLen - 1);
  s.key.store(e.key, std::memory_order_release);
}

struct Snapshot {
  int64_t since_ns = 0, seq = 0;
  Op op = Op::AllReduce;
  int slot = -1, peer = -1;
};

// The call a board shows now; false between calls (or when it just changed).
bool snapshot(const Board& b, Snapshot& s) {
  s.since_ns = b.since_ns.load(std::memory_order_acquire);
  if (s.since_ns == 0) return false;
  s.op = Op(b.op.load(std::memory_order_relaxed));
  s.slot = b.slot.load(std::memory_order_relaxed);
  s.peer = b.peer.load(std::memory_order_relaxed);
  s.seq = b.seq.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return b.since_ns.load(std::memory_order_relaxed) == s.since_ns;
}

std::string call_text(const Snapshot& s, const std::string& group) {
  static const char* const kNames[] = {"all_reduce", "reduce_scatter",    "all_gather",
                                       "broadcast",  "barrier",           "send to",
                                       "recv from",  "wait for isend to", "wait for irecv from"};
  std::ostringstream os;
  os << kNames[int(s.op)];
  if (is_collective(s.op)) {
    os << " #" << s.seq;
  } else {
    os << " world rank " << s.peer;
  }
  os << " on group " << group;
  return os.str();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) os << (i ? ", " : "") << ranks[i];
  if (ranks.size() > 16) os << ", ... (" << ranks.size() << " in all)";
  return os.str();
}

// What a rank is doing now, as far as its board tells.
std::string state_of(const State& st, int rank, int64_t now) {
  const Board* b = rank >= 0 ? st.boards[rank] : nullptr;
  if (b == nullptr) return "not checked (on host " + st.hosts.name[rank] + ")";
  Snapshot s;
  if (!snapshot(*b, s)) return "outside communication";
  const char* name = b->slots[s.slot].name;
  const std::string group(name, strnlen(name, kNameLen));
  char waited[32];
  std::snprintf(waited, sizeof waited, " for %.1f s", (now - s.since_ns) * 1e-9);
  return "in " + call_text(s, group) + waited;
}

// Collectives this rank has entered on the group with this key, as its board tells.
int64_t entered(const Board& b, uint64_t key) {
  for (const Board::Slot& s : b.slots)
    if (s.key.load(std::memory_order_acquire) == key)
      return s.entered.load(std::memory_order_relaxed);
  return 0;  // it never made the group, so it entered nothing on it
}

// The one-line report of a call stuck for longer than the timeout.
std::string describe(const State& st, const Snapshot& s, int64_t now) {
  Entry e;
  {
    std::lock_guard lock(registry().mu);
    e = registry().entries[s.slot];
  }
  std::ostringstream os;
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.1f", (now - s.since_ns) * 1e-9);
  os << call_text(s, e.name) << " (world ranks " << rank_list(e.world) << ") has waited " << waited
     << " s; ";
  if (!is_collective(s.op)) {
    os << "world rank " << s.peer << " is " << state_of(st, s.peer, now);
    return os.str();
  }
  // Members enter the group's collectives in the same order: whoever has entered fewer than
  // this one's number has not arrived.
  std::vector<int> absent, unchecked;
  for (int r : e.world) {
    if (r == st.me) continue;
    if (st.boards[r] == nullptr) {
      unchecked.push_back(r);
    } else if (entered(*st.boards[r], e.key) < s.seq) {
      absent.push_back(r);
    }
  }
  if (absent.empty() && !unchecked.empty()) {
    os << "every member on this machine (" << st.hosts.name[st.me]
       << ") has arrived; the missing are among those on other machines: "
       << st.hosts.describe(unchecked);
    return os.str();
  } else if (absent.empty()) {
    os << "every member on this machine has arrived (do the ranks call different collectives?)";
  } else {
    os << "ranks that did not arrive: ";
    for (size_t i = 0; i < absent.size() && i < 8; ++i)
      os << (i ? ", " : "") << absent[i] << " (" << state_of(st, absent[i], now) << ")";
    if (absent.size() > 8) os << ", and " << absent.size() - 8 << " more";
  }
  if (!unchecked.empty()) os << "; not checked (other machines): " << st.hosts.describe(unchecked);
  return os.str();
}

std::atomic<void (*)()> abort_hook{nullptr};

void report_and_abort(const State& st, const std::string& report) {
  // Every blocked rank of the machine gets here; the first one reports, the others wait
  // for the abort to reach them.
  if (st.first->fired.exchange(1) != 0) return;
  std::fprintf(stderr, "tetra: error: watchdog: %s\n", report.c_str());
  std::fflush(stderr);
  if (auto hook = abort_hook.load()) hook();
  MPI_Abort(MPI_COMM_WORLD, 3);
  _exit(3);  // not reached; if it were, mpirun would still end the job on this exit
}

// Inside a step, outside any call: whether the rank has shown no progress for twice the
// timeout. Twice, so that where other ranks wait for this one in a collective, their report
// (the ranks that did not arrive, and what they are doing) comes first, and this one only
// where nothing waits (one rank, or every rank stuck outside communication). `seen` and
// `since` are the watching thread's own memory of the last change.
bool stalled(const State& st, int64_t now, int64_t& seen, int64_t& since) {
  const int64_t p = st.mine->progress.load(std::memory_order_relaxed);
  if (st.mine->step.load(std::memory_order_relaxed) < 0 || p != seen) {
    seen = p;
    since = now;
    return false;
  }
  return (now - since) * 1e-9 >= 2 * st.timeout;
}

// The watchdog thread: looks at this rank's call a few times per timeout and, when it has
// waited too long, reports it and ends the job. It calls no MPI function but MPI_Abort.
void watch(State& st) {
  using std::chrono::milliseconds;
  const auto poll = std::clamp(
      std::chrono::duration_cast<milliseconds>(std::chrono::duration<double>(st.timeout / 4)),
      milliseconds(1), milliseconds(200));
  int64_t seen = -1, since = 0;
  std::unique_lock lock(st.mu);
  while (!st.cv.wait_for(lock, poll, [&] { return st.stopping; })) {
    Snapshot s;
    const int64_t now = now_ns();
    if (snapshot(*st.mine, s)) {
      if ((now - s.since_ns) * 1e-9 >= st.timeout)
        return report_and_abort(st, describe(st, s, now));
    } else if (stalled(st, now, seen, since)) {
      char waited[32];
      std::snprintf(waited, sizeof waited, "%.1f", (now - since) * 1e-9);
      return report_and_abort(st, "world rank " + std::to_string(st.me) +
                                      " has made no progress in step " +
                                      std::to_string(st.mine->step.load()) + " for " + waited +
                                      " s, outside communication (no call entered, no step begun)");
    }
  }
}

int stop_at_finalize(MPI_Comm, int, void*, void*) {
  stop();
  return MPI_SUCCESS;
}

}  // namespace

void set_abort_hook(void (*hook)()) {
  abort_hook.store(hook);
}

StepWatch::StepWatch(int64_t step) {
  if (g_mine == nullptr) return;
  g_mine->progress.store(g_mine->progress.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
  g_mine->step.store(step, std::memory_order_relaxed);
}

StepWatch::~StepWatch() {
  if (g_mine != nullptr) g_mine->step.store(-1, std::memory_order_relaxed);
}

void start(MPI_Comm world, double timeout_seconds) {
  if (timeout_seconds <= 0) return;
  check(g_state == nullptr, "the watchdog is already running");
  // MPI_Finalize deletes MPI_COMM_SELF's attributes first, while MPI still works: the place
  // to stop the thread and free the window when the program does not call stop().
  static int keyval = MPI_KEYVAL_INVALID;
  if (keyval == MPI_KEYVAL_INVALID)
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, stop_at_finalize, &keyval, nullptr);
  MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr);

  auto* st = new State;
  st->timeout = timeout_seconds;
  st->hosts = gather_hosts(world);
  int world_size = 0, local = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &st->me);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &st->node);
  MPI_Comm_size(st->node, &local);
  MPI_Win_allocate_shared(sizeof(Board), 1, MPI_INFO_NULL, st->node, &st->mine, &st->win);
  new (st->mine) Board;
  std::vector<int> ranks(local);
  MPI_Allgather(&st->me, 1, MPI_INT, ranks.data(), 1, MPI_INT, st->node);
  st->boards.assign(world_size, nullptr);
  for (int i = 0; i < local; ++i) {
    MPI_Aint bytes = 0;
    int unit = 0;
    Board* b = nullptr;
    MPI_Win_shared_query(st->win, i, &bytes, &unit, &b);
    st->boards[ranks[i]] = b;
    if (i == 0) st->first = b;
  }
  MPI_Barrier(st->node);  // every board is built before anyone reads it
  {
    std::lock_guard lock(registry().mu);
    for (int i = 0; i < kSlots; ++i)
      if (registry().entries[i].refs > 0) publish(*st->mine, i, registry().entries[i]);
  }
  g_mine = st->mine;
  st->thread = std::thread(watch, std::ref(*st));
  g_state = st;
}

void stop() {
  State* st = std::exchange(g_state, nullptr);
  if (st == nullptr) return;
  {
    std::lock_guard lock(st->mu);
    st->stopping = true;
  }
  st->cv.notify_all();
  st->thread.join();
  g_mine = nullptr;
  MPI_Win_free(&st->win);
  MPI_Comm_free(&st->node);
  delete st;
}

Group::Group(MPI_Comm comm, const std::string& name) {
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int n = 0;
  MPI_Group_size(group, &n);
  std::vector<int> ranks(n);
  for (int i = 0; i < n; ++i) ranks[i] = i;
  world_.resize(n);
  MPI_Group_translate_ranks(group, n, ranks.data(), world, world_.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);

  const uint64_t key = group_key(name, world_);
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  Entry *begin = r.entries, *end = r.entries + kSlots;
  Entry* e = std::find_if(begin, end, [&](const Entry& x) { return x.refs > 0 && x.key == key; });
  if (e == end) e = std::find_if(begin, end, [](const Entry& x) { return x.refs == 0; });
  if (e == end) {
    slot_ = -1;
    return;
  }
  slot_ = int(e - begin);
  if (e->refs == 0) {
    *e = Entry{key, name, world_, 0};
    if (g_mine) publish(*g_mine, slot_, *e);
  }
  e->refs += 1;
}

Group::~Group() {
  if (slot_ < 0) return;
  std::lock_guard lock(registry().mu);
  if (--registry().entries[slot_].refs == 0 && g_mine)
    g_mine->slots[slot_].key.store(0, std::memory_order_release);
}

Call::Call(const Group& g, Op op, int peer) : board_(g.slot_ >= 0 ? g_mine : nullptr) {
  if (board_ == nullptr) return;
  if (is_collective(op)) {
    std::atomic<int64_t>& n = board_->slots[g.slot_].entered;
    seq_ = n.load(std::memory_order_relaxed) + 1;  // only this thread writes it
    n.store(seq_, std::memory_order_relaxed);
  }
  show(g, op, peer);
}

Call::Call(const Group& g, Op op, int peer, int64_t seq)
    : board_(g.slot_ >= 0 ? g_mine : nullptr), seq_(seq) {
  if (board_ != nullptr) show(g, op, peer);
}

void Call::show(const Group& g, Op op, int peer) {
  // Only this thread writes it: a load and a store, no locked instruction.
  board_->progress.store(board_->progress.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
  // Readers check since_ns before and after the rest; keep these stores after the 0 that
  // ended the previous call (a compiler-only barrier on x86).
  std::atomic_thread_fence(std::memory_order_release);
  board_->op.store(int32_t(op), std::memory_order_relaxed);
  board_->slot.store(g.slot_, std::memory_order_relaxed);
  const bool p2p = !is_collective(op) && peer >= 0 && peer < int(g.world_.size());
  board_->peer.store(p2p ? g.world_[peer] : -1, std::memory_order_relaxed);
  board_->seq.store(seq_, std::memory_order_relaxed);
  board_->since_ns.store(now_ns(), std::memory_order_release);
}

Call::~Call() {
  if (board_) board_->since_ns.store(0, std::memory_order_release);
}

}  // namespace tetra::watchdog
