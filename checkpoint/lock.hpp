// The lock on a checkpoint directory: DIR/lock names the job that writes checkpoints there,
// so that a second job on the same directory is refused before it can rename over the first
// one's files.
//
// The lock records a job identity (the Slurm job id where there is one, else the token of
// the `tetra launch` that runs the job, else none) and the process that holds it: host, boot
// id, PID namespace, pid and start time. A holder is checkable when it runs on this host, in
// this boot, in this PID namespace: then a dead one (exited, a zombie, its pid reused) is
// stale and taken over with a warning, and a live one is refused. A later attempt of the same
// job (the lock records each holder's attempt) takes the lock over on any host (after a node
// failure the requeued job lands elsewhere), warning that it could not check the holder; an
// attempt never takes over one that is not earlier, and any other holder that cannot be
// checked is refused with the command that breaks the lock. Since a holder taken over that
// way may still run, a holder reads its lock again before it installs each checkpoint
// (check_held) and stops, exit status 73, once the lock is no longer its own.
// A restart may start while the failed attempt's ranks are still being torn down: it waits
// a bounded time for a live holder on this host to go away before refusing.
//
// The lock appears whole: written to a file of its own and hard-linked into place, or where
// the file system has no hard links (some FUSE mounts), created exclusively and written.
#pragma once
#include <string>

#include "util/error.hpp"

namespace tetra::ckpt {

inline constexpr const char* kLockFile = "lock";

// A run refused because another job holds its checkpoint directory: exit status 73, not 2
// (bad input), so that a supervisor can tell "wait or break the lock" from "fix the flags".
struct LockedError : Error {
  explicit LockedError(const std::string& what) : Error(what, exit_status::kLocked) {}
};

struct LockRequest {
  std::string job;          // this run's job identity (job_identity()), "" for none
  bool restart = false;     // a supervised or requeued restart of that job
  double wait_seconds = 0;  // how long to wait for a live holder on this host to exit
  int attempt = 0;          // which restart it is (0: the first attempt), recorded in the lock
};

// "slurm:CLUSTER/JOBID" under Slurm (SLURM_JOB_ID), else "launch:TOKEN" under tetra launch
// (TETRA_JOB), else "".
std::string job_identity();

class DirLock {
 public:
  DirLock() = default;
  // Takes dir/lock (dir must exist). Throws LockedError naming the holder when another job
  // holds it, tetra::Error when the file cannot be made. A lock taken over is said on stderr.
  DirLock(const std::string& dir, const LockRequest& request);
  // Removes the lock file if it is still this process's.
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  const std::string& path() const { return path_; }
  // Releases the lock now (what the destructor does).
  void release();
  // Reads the lock again: throws LockedError (exit status 73) naming the new holder when it is
  // no longer this process's (taken over by a restart that could not check this one, or
  // removed), so that a holder stops before it writes into a directory another job now writes.
  void check_held() const;

 private:
  std::string path_;     // "" when not held
  std::string content_;  // what this process wrote, to recognise it at release
};

// This process's lock text for `job`: {"job", "attempt", "host", "boot_id", "pid_ns", "pid",
// "start_time"} as one JSON line.
std::string lock_text(const std::string& job, int pid, int attempt = 0);

// Creates `path` holding `text` with O_EXCL, the fallback where link() is not supported.
// Returns 0 or the errno. (Exposed for the test of the fallback.)
int create_exclusive(const std::string& path, const std::string& text);

}  // namespace tetra::ckpt
