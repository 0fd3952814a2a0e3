#include "util/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "util/stop_signal.hpp"

namespace tetra {
namespace {

std::string dir_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// Six characters [0-9a-z] that no other call of any process is likely to draw: the pid, the
// clock and a per-process counter, mixed (splitmix64's finalizer). O_EXCL makes a clash
// harmless (the next name is tried); the randomness only makes the name unguessable ahead.
std::string random_suffix() {
  static std::atomic<uint64_t> counter{0};
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  uint64_t x = (uint64_t(::getpid()) << 32) ^ uint64_t(t.tv_nsec) ^ (uint64_t(t.tv_sec) << 20) ^
               (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  std::string s(6, '0');
  for (char& c : s) {
    c = "0123456789abcdefghijklmnopqrstuvwxyz"[x % 36];
    x /= 36;
  }
  return s;
}

}  // namespace

std::string output_file_problem(const std::string& path) {
  if (path.empty()) return "the path is empty";
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode))
      return "it is a symbolic link, which tetra would replace rather than write through: "
             "name the file itself";
    if (S_ISDIR(st.st_mode)) return "it is a directory";
    if (!S_ISREG(st.st_mode)) return "it is not a regular file (a device, a FIFO or a socket)";
    if (::access(path.c_str(), W_OK) != 0)
      return std::string("it is not writable: ") + std::strerror(errno);
  } else if (errno != ENOENT) {
    return std::strerror(errno);
  }
  // The temporary is created next to the target and renamed over it.
  return parent_dir_problem(path);
}

std::string parent_dir_problem(const std::string& path) {
  const std::string dir = dir_of(path);
  struct stat d;
  if (::stat(dir.c_str(), &d) != 0 || !S_ISDIR(d.st_mode))
    return "its directory '" + dir + "' does not exist";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "its directory '" + dir + "' is not writable: " + std::strerror(errno);
  return "";
}

Temporary create_temporary(const std::string& target) {
  const std::filesystem::path t(target);
  const std::string dir = dir_of(target), name = t.filename().string();
  Temporary tmp;
  for (int attempt = 0; attempt < 100; ++attempt) {
    tmp.path =
        (std::filesystem::path(dir) / ("." + name + "." + random_suffix() + ".tmp")).string();
    tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (tmp.fd >= 0) return tmp;
    if (errno != EEXIST) break;
  }
  tmp.problem = "cannot create a temporary file in '" + dir + "': " + std::strerror(errno);
  return tmp;
}

Temporary create_replacing(const std::string& target) {
  Temporary tmp = create_temporary(target);
  if (tmp.fd < 0) return tmp;
  if (::rename(tmp.path.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::close(tmp.fd);
    ::unlink(tmp.path.c_str());
    Temporary failed;
    failed.problem = "cannot replace '" + target + "': " + std::strerror(err);
    return failed;
  }
  tmp.path = target;
  return tmp;
}

Temporary open_for_append(const std::string& path, bool create) {
  Temporary f;
  f.path = path;
  f.fd = ::open(path.c_str(),
                O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (create ? O_CREAT : 0),
                0644);
  struct stat st;
  if (f.fd >= 0 && ::fstat(f.fd, &st) == 0 && S_ISREG(st.st_mode)) return f;
  f.problem = f.fd < 0 && errno == ELOOP ? "it is a symbolic link"
              : f.fd < 0                 ? std::string(std::strerror(errno))
                                         : "it is not a regular file";
  if (f.fd >= 0) ::close(f.fd);
  f.fd = -1;
  return f;
}

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t r = ::write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = EIO;
      return false;
    }
    p += r;
    n -= size_t(r);
  }
  return true;
}

OutputStream& OutputStream::operator=(OutputStream&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

OutputStream::~OutputStream() {
  if (fd_ >= 0) ::close(fd_);
}

bool OutputStream::write(std::string_view text) {
  return write_all(fd_, text.data(), text.size());
}

std::string replace_file(const std::string& path, const std::function<bool(int fd)>& fill) {
  Temporary tmp = create_temporary(path);
  if (tmp.fd < 0) return tmp.problem;
  const TrackedTemporary tracked(tmp.path);  // removed if a signal ends the process meanwhile
  const auto abandon = [&](const char* step) {
    const int err = errno;
    if (tmp.fd >= 0) ::close(tmp.fd);
    ::unlink(tmp.path.c_str());
    return std::string(step) + " '" + tmp.path + "' failed: " + std::strerror(err);
  };
  if (!fill(tmp.fd)) return abandon("writing");
  if (::fsync(tmp.fd) != 0) return abandon("fsync of");
  const int closed = ::close(tmp.fd);
  tmp.fd = -1;
  if (closed != 0) return abandon("closing");
  if (::rename(tmp.path.c_str(), path.c_str()) != 0) return abandon("renaming");
  return sync_dir(dir_of(path));
}

std::string replace_file(const std::string& path, std::string_view text) {
  return replace_file(path, [&](int fd) { return write_all(fd, text.data(), text.size()); });
}

std::string creation_problem(const std::string& target) {
  const Temporary tmp = create_temporary(target);
  if (tmp.fd < 0) return tmp.problem;
  const TrackedTemporary tracked(tmp.path);
  ::close(tmp.fd);
  ::unlink(tmp.path.c_str());
  return "";
}

std::string stdout_problem() {
  std::cout.flush();
  errno = 0;
  if (std::fflush(stdout) != 0)
    return std::string("cannot write the standard output: ") + std::strerror(errno);
  if (std::ferror(stdout) || !std::cout.good())
    return "cannot write the standard output: a write to it failed (a full disk?)";
  return "";
}

std::string sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::fsync(fd) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  return ok ? "" : "fsync of directory '" + dir + "' failed: " + std::strerror(err);
}

}  // namespace tetra
