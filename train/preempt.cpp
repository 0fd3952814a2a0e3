#include "train/preempt.hpp"

#include <signal.h>

namespace tetra {
namespace {

volatile sig_atomic_t g_received = 0;
struct sigaction g_old_term;  // the handlers before, restored after
struct sigaction g_old_usr1;
struct sigaction g_old_int;

void on_signal(int sig) {
  g_received = sig;
}

}  // namespace

PreemptSignals::PreemptSignals() {
  g_received = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // file writes of a checkpoint in progress go on
  ::sigaction(SIGTERM, &sa, &g_old_term);
  ::sigaction(SIGUSR1, &sa, &g_old_usr1);
  ::sigaction(SIGINT, &sa, &g_old_int);
}

PreemptSignals::~PreemptSignals() {
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  ::sigaction(SIGUSR1, &g_old_usr1, nullptr);
  ::sigaction(SIGINT, &g_old_int, nullptr);
}

int PreemptSignals::received() {
  return g_received;
}

}  // namespace tetra
