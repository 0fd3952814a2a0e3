#include "util/same_path.hpp"

#include <sys/stat.h>

#include <filesystem>

namespace tetra {

PathId path_id(const std::string& path) {
  namespace fs = std::filesystem;
  PathId id;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) id = {true, st.st_dev, st.st_ino, ""};
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(fs::absolute(path, ec), ec);
  id.resolved = ec ? fs::absolute(path, ec).lexically_normal().string() : resolved.string();
  return id;
}

bool same_path(const PathId& a, const PathId& b) {
  if (a.exists && b.exists) return a.dev == b.dev && a.ino == b.ino;
  return a.resolved == b.resolved;
}

bool within(const PathId& inner, const PathId& outer) {
  if (same_path(inner, outer)) return true;
  const std::string& o = outer.resolved;
  const std::string prefix = !o.empty() && o.back() == '/' ? o : o + "/";
  return inner.resolved.compare(0, prefix.size(), prefix) == 0;
}

std::string same_file_problem(const std::string& out_flag, const std::string& out,
                              const std::string& in_flag, const std::string& in) {
  if (out.empty() || in.empty() || !same_path(path_id(out), path_id(in))) return "";
  return out_flag + " '" + out + "' is " + in_flag + " '" + in + "': name another path for " +
         out_flag;
}

}  // namespace tetra
