// The lock on a checkpoint directory: DIR/lock names the job that writes checkpoints there
// (host, pid and the process's start time), so that a second job on the same directory is
// refused before it can rename over the first one's files.
//
// A lock whose process is gone (same host, pid dead, a zombie, or reused by a process that
// started later) is stale and taken over with a warning. A holder on another host cannot be
// checked, so it is refused with its name and the file to delete. A supervised restart may
// start while the failed attempt's ranks are still being torn down: it waits a bounded time
// for a holder on its host to go away before refusing.
#pragma once
#include <string>

namespace tetra::ckpt {

inline constexpr const char* kLockFile = "lock";

class DirLock {
 public:
  DirLock() = default;
  // Takes dir/lock (dir must exist), waiting up to wait_seconds for a live holder on this
  // host to exit. Throws tetra::Error naming the holder when it cannot be taken. A stale
  // lock taken over is said on stderr.
  DirLock(const std::string& dir, double wait_seconds);
  // Removes the lock file if it is still this process's.
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;     // "" when not held
  std::string content_;  // what this process wrote, to recognise it at release
};

// This process's lock text: {"host", "pid", "start_time"} as one JSON line.
std::string lock_text(int pid);

}  // namespace tetra::ckpt
