#include "util/stop_signal.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "util/error.hpp"

namespace tetra {
namespace {

constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};

// The temporaries being written: a slot is free (0), being filled by its owner (1), or holds a
// path the handler removes (2). Lock-free atomics, which a handler may read.
constexpr int kSlots = 32;
constexpr size_t kPathBytes = 1024;
char g_paths[kSlots][kPathBytes];
std::atomic<int> g_state[kSlots];
static_assert(std::atomic<int>::is_always_lock_free);

// "tetra: error: interrupted by Interrupt\n" per signal, made before the handler may run.
char g_lines[3][96];
size_t g_line_bytes[3];
volatile sig_atomic_t g_speak = 0;
struct sigaction g_old[3];

void stop(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (g_state[i].load() == 2) ::unlink(g_paths[i]);
  for (int i = 0; i < 3; ++i)
    if (kSignals[i] == sig && g_speak) {
      const ssize_t ignored = ::write(STDERR_FILENO, g_lines[i], g_line_bytes[i]);
      (void)ignored;  // nothing better to do with a failed write here
    }
  ::_exit(exit_status::kInterrupted);
}

}  // namespace

StopOnSignal::StopOnSignal(bool speak) {
  g_speak = speak;
  for (int i = 0; i < 3; ++i) {
    const std::string line =
        std::string("tetra: error: interrupted by ") + ::strsignal(kSignals[i]) + "\n";
    g_line_bytes[i] = std::min(line.size(), sizeof g_lines[i]);
    std::memcpy(g_lines[i], line.data(), g_line_bytes[i]);
  }
  struct sigaction sa {};
  sa.sa_handler = stop;
  sigfillset(&sa.sa_mask);  // one signal's handler runs alone
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &g_old[i]);
}

StopOnSignal::~StopOnSignal() {
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &g_old[i], nullptr);
}

TrackedTemporary::TrackedTemporary(const std::string& path) {
  if (path.size() >= kPathBytes) return;
  for (int i = 0; i < kSlots; ++i) {
    int free = 0;
    if (!g_state[i].compare_exchange_strong(free, 1)) continue;
    std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
    g_state[i].store(2);
    slot_ = i;
    return;
  }
}

TrackedTemporary::~TrackedTemporary() {
  if (slot_ >= 0) g_state[slot_].store(0);
}

}  // namespace tetra
