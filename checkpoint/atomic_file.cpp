#include "checkpoint/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/error.hpp"

namespace tetra::ckpt {

namespace fs = std::filesystem;

void sync_dir(const std::string& dir, const std::string& context) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::fsync(fd) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  check(ok, context, ": fsync of directory '", dir, "' failed: ", std::strerror(err));
}

void write_file_atomically(const std::string& path, const std::string& text,
                           const std::string& context) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  check(fd >= 0, context, ": cannot create '", tmp, "': ", std::strerror(errno));
  auto abandon = [&](const char* step) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    fail(context, ": ", step, " '", tmp, "' failed: ", std::strerror(err));
  };
  for (size_t done = 0; done < text.size();) {
    const ssize_t r = ::write(fd, text.data() + done, text.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) abandon("writing");
    done += size_t(r);
  }
  if (::fsync(fd) != 0) abandon("fsync of");
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) abandon("closing");
  if (::rename(tmp.c_str(), path.c_str()) != 0) abandon("renaming");
  sync_dir(fs::path(path).parent_path().string(), context);
}

}  // namespace tetra::ckpt
