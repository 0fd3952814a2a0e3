#include "util/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace tetra {
namespace {

// What a stat says that is not a regular file, in words.
std::string kind_problem(mode_t mode) {
  if (S_ISDIR(mode)) return "it is a directory, not a regular file";
  if (S_ISFIFO(mode)) return "it is a FIFO, not a regular file";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "it is a device, not a regular file";
  if (S_ISSOCK(mode)) return "it is a socket, not a regular file";
  return "it is not a regular file";
}

std::string errno_problem(int err) {
  return err == ENOENT ? kNotFound : std::strerror(err);
}

}  // namespace

InputFile::InputFile(InputFile&& o) noexcept
    : fd(std::exchange(o.fd, -1)), size(o.size), problem(std::move(o.problem)) {}

InputFile& InputFile::operator=(InputFile&& o) noexcept {
  if (this != &o) {
    if (fd >= 0) ::close(fd);
    fd = std::exchange(o.fd, -1);
    size = o.size;
    problem = std::move(o.problem);
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd >= 0) ::close(fd);
}

InputFile open_input_file(const std::string& path) {
  InputFile f;
  if (path.empty()) {
    f.problem = "the path is empty";
    return f;
  }
  // O_NONBLOCK: a FIFO's open would otherwise wait for a writer. A regular file ignores it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    f.problem = errno_problem(errno);
    return f;
  }
  struct stat st;
  const bool stated = ::fstat(fd, &st) == 0;
  if (!stated || !S_ISREG(st.st_mode)) {
    f.problem = stated ? kind_problem(st.st_mode) : std::strerror(errno);
    ::close(fd);
    return f;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  f.fd = fd;
  f.size = int64_t(st.st_size);
  return f;
}

std::string input_file_problem(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return errno_problem(errno);
  return S_ISREG(st.st_mode) ? "" : kind_problem(st.st_mode);
}

std::string input_dir_problem(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return errno_problem(errno);
  return S_ISDIR(st.st_mode) ? "" : "it is not a directory";
}

std::string read_input_file(const std::string& path, std::string& out, int64_t limit) {
  const InputFile f = open_input_file(path);
  if (f.fd < 0) return f.problem;
  const auto too_big = [&](int64_t n) {
    return "it holds " + std::to_string(n) + " bytes or more, past the " + std::to_string(limit) +
           " tetra reads";
  };
  if (f.size > limit) return too_big(f.size);
  // Until the end, not the size fstat gave: the file may grow, and some report none.
  out.clear();
  out.reserve(size_t(f.size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(f.fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return std::string("read failed: ") + std::strerror(errno);
    if (r == 0) return "";
    if (int64_t(out.size()) + r > limit) return too_big(int64_t(out.size()) + r);
    out.append(buf, size_t(r));
  }
}

}  // namespace tetra
