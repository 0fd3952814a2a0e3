// How tetra opens what it reads (--data, --val-data, --init-from, a model directory's files,
// checkpoints, metrics and traces): only a regular file, or a directory where one is
// expected. A FIFO, a device or a socket is refused with a message instead of read, since
// opening a FIFO blocks until a writer comes (forever, for a typo) and a device never ends.
// Files are opened with O_NONBLOCK and checked on the open descriptor (fstat), so that the
// check and the read see the same file and not even the open can block.
//
// util/ cannot throw tetra::Error: each function returns "" or the problem ("not found",
// "it is a FIFO, not a regular file", kNotFound) for the caller to throw after the path.
#pragma once
#include <cstdint>
#include <string>

namespace tetra {

// The problem of a path that does not exist, for callers to whom that is no error.
inline const std::string kNotFound = "not found";

// An open regular file (fd >= 0, blocking again, closed by the destructor), or the problem.
struct InputFile {
  int fd = -1;
  int64_t size = 0;
  std::string problem;
  InputFile() = default;
  InputFile(InputFile&& o) noexcept;
  InputFile& operator=(InputFile&& o) noexcept;
  ~InputFile();
};
InputFile open_input_file(const std::string& path);

// "" when `path` is (or links to) a regular file, else the problem: a stat, for a caller that
// hands the path to a library that opens it itself.
std::string input_file_problem(const std::string& path);

// "" when `path` is (or links to) a directory, else the problem.
std::string input_dir_problem(const std::string& path);

// The whole content of a regular file into `out`; "" or the problem. `limit` bounds what is
// read (a refusal past it), for files whose size the user decides.
std::string read_input_file(const std::string& path, std::string& out, int64_t limit = INT64_MAX);

}  // namespace tetra
