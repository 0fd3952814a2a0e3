#include "backend/host_wait.hpp"

#include <atomic>

namespace tetra {
namespace {

std::atomic<HostWaitHook> hook{nullptr};

}  // namespace

void set_host_wait_hook(HostWaitHook h) {
  hook.store(h);
}

void before_host_wait(void* stream) {
  if (HostWaitHook h = hook.load()) h(stream);
}

}  // namespace tetra
