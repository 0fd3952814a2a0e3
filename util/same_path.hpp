// Whether two paths name one file, or one lies inside another directory: for a command's
// outputs, checked against each other and against its inputs (tetra train's --metrics may not
// be its --data). Every spelling of a file counts: a path's identity is its device and inode
// when it exists (hard links and links to it alike), and its resolved form (symbolic links
// and "..", resolved as far as the path exists, then the rest of its name) for one to be
// created.
#pragma once
#include <sys/types.h>

#include <string>

namespace tetra {

struct PathId {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string resolved;  // absolute, symbolic links resolved where the path exists
};
PathId path_id(const std::string& path);

// a and b are one file (or one directory).
bool same_path(const PathId& a, const PathId& b);
// `inner` is `outer` or lies inside the directory `outer`, by resolved paths.
bool within(const PathId& inner, const PathId& outer);

// "" when the output `out` (given as out_flag) is not the input `in` (in_flag; "" for none),
// else the one line that says so: "--out 'x' is --loss 'x': name another path for --out".
std::string same_file_problem(const std::string& out_flag, const std::string& out,
                              const std::string& in_flag, const std::string& in);

}  // namespace tetra
