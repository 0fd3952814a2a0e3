#include "checkpoint/atomic_file.hpp"

#include "util/error.hpp"
#include "util/output_file.hpp"

namespace tetra::ckpt {

void sync_dir(const std::string& dir, const std::string& context) {
  const std::string problem = tetra::sync_dir(dir);
  check(problem.empty(), context, ": ", problem);
}

void write_file_atomically(const std::string& path, const std::string& text,
                           const std::string& context) {
  const std::string problem = replace_file(path, text);
  check(problem.empty(), context, ": cannot write '", path, "': ", problem);
}

}  // namespace tetra::ckpt
