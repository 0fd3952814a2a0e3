#include "util/output_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/input_file.hpp"
#include "util/output_file.hpp"

namespace tetra {
namespace {

namespace fs = std::filesystem;

std::string marker_text(const std::string& command) {
  return "tetra " + command + "\n";
}

// What lstat says is at path: 0 when nothing is there; -1 (errno set) when it cannot tell.
int kind_at(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) return int(st.st_mode & S_IFMT);
  return errno == ENOENT ? 0 : -1;
}

// The nearest directory at or above a missing path, which creating it needs to be writable.
std::string existing_ancestor(const fs::path& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  std::error_code ec;
  while (p.has_parent_path() && p != p.parent_path() && !fs::exists(p, ec)) p = p.parent_path();
  return p.string();
}

std::string entry_problem(const std::string& path, bool directory) {
  const int kind = kind_at(path);
  if (kind == 0 || kind == (directory ? S_IFDIR : S_IFREG)) return "";
  if (kind < 0) return "'" + path + "': " + std::strerror(errno);
  if (kind == S_IFLNK)
    return "'" + path + "' is a symbolic link, which tetra does not write through";
  return "'" + path + "' is not a " + (directory ? "directory" : "regular file");
}

}  // namespace

std::string dir_output_problem(const std::string& path) {
  if (path.empty()) return "the path is empty";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return std::strerror(errno);
    const std::string above = existing_ancestor(path);
    if (::stat(above.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return "it cannot be created: '" + above + "' is not a directory";
    if (::access(above.c_str(), W_OK | X_OK) != 0)
      return "it cannot be created in '" + above + "': " + std::strerror(errno);
    return "";
  }
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (::access(path.c_str(), W_OK | X_OK) != 0)
    return std::string("it is not writable: ") + std::strerror(errno);
  return "";
}

std::string output_dir_problem(const OutputDir& o, const std::string& flag) {
  const std::string named = flag + " '" + o.dir + "'";
  if (const std::string p = dir_output_problem(o.dir); !p.empty()) return named + ": " + p;
  if (kind_at(o.dir) == 0) return "";  // new: nothing in it to check
  std::error_code ec;
  const bool empty = fs::is_empty(o.dir, ec);
  if (ec) return named + ": " + ec.message();
  if (empty) return "";
  const std::string marker = (fs::path(o.dir) / kOutputMarker).string();
  std::string text;
  const std::string unread =
      kind_at(marker) == S_IFREG ? read_input_file(marker, text, 4096) : std::string("missing");
  if (!unread.empty() || text != marker_text(o.command)) {
    const std::string whose = unread.empty() && text.rfind("tetra ", 0) == 0
                                  ? " (its " + std::string(kOutputMarker) + " says " +
                                        text.substr(0, text.find('\n')) + ")"
                                  : " (it has no " + std::string(kOutputMarker) + ")";
    return named + " is neither empty nor an earlier tetra " + o.command + "'s" + whose +
           ": name a new or empty directory";
  }
  // An earlier run's directory: what this run writes must still be what tetra made there.
  for (const std::string& d : o.dirs)
    if (std::string p = entry_problem((fs::path(o.dir) / d).string(), true); !p.empty())
      return "cannot write in " + named + ": " + p;
  for (const std::string& f : o.files)
    if (std::string p = entry_problem((fs::path(o.dir) / f).string(), false); !p.empty())
      return "cannot write in " + named + ": " + p;
  return "";
}

std::string claim_output_dir(const OutputDir& o) {
  std::error_code ec;
  fs::create_directories(o.dir, ec);
  if (ec) return "cannot create '" + o.dir + "': " + ec.message();
  const std::string marker = (fs::path(o.dir) / kOutputMarker).string();
  std::string text;
  if (kind_at(marker) == S_IFREG && read_input_file(marker, text, 4096).empty() &&
      text == marker_text(o.command))
    return "";
  return replace_file(marker, marker_text(o.command));
}

}  // namespace tetra
