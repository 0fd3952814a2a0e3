#include "util/output_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tetra {

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
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  struct stat d;
  if (::stat(dir.c_str(), &d) != 0 || !S_ISDIR(d.st_mode))
    return "its directory '" + dir + "' does not exist";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "its directory '" + dir + "' is not writable: " + std::strerror(errno);
  return "";
}

}  // namespace tetra
