// Where tetra may write an output file (--export, --trace, --metrics, plot --out), and the one
// way it writes a file whole: a fresh temporary beside the target, renamed over it.
//
// An output must be a regular file, or a missing one in a writable directory. Outputs are
// written to a temporary and renamed over the target (or appended, for metrics), so anything
// else would be replaced or fed: a device (as root, renaming over /dev/null replaces it for
// the whole machine), a FIFO, a symbolic link (replaced, not written through), a directory.
// Checked before step 0, so that a typo costs nothing.
//
// The temporary is never a name someone could have prepared: it is made with O_CREAT |
// O_EXCL | O_NOFOLLOW under a fresh random name, so a symbolic link left at "x.svg.tmp" can
// neither take the write nor be renamed over x.svg, and nothing that was there is truncated.
//
// util/ cannot throw tetra::Error: each function returns "" or one line for the caller to
// throw with its context.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace tetra {

// "" when `path` may be written, else what is wrong with it ("it is a directory"), for the
// caller to report after the path.
std::string output_file_problem(const std::string& path);
// "" when `path`'s directory exists and tetra may create entries in it, else what is wrong.
std::string parent_dir_problem(const std::string& path);

// A file of this process's own, created now next to `target` (in its directory) as
// "<dir>/.<name>.<random>.tmp", mode 0644 less the umask. fd is -1 and problem says why when
// none could be made; the caller closes fd and removes (or renames) path.
struct Temporary {
  int fd = -1;
  std::string path, problem;
};
Temporary create_temporary(const std::string& target);

// A new empty file at `target`, open for writing (fd), made as a fresh temporary beside it and
// renamed over it: whatever was at target (an earlier run's file, a symbolic link) is
// replaced, never truncated or written through. For a file written as it goes (a log, a
// JSONL record per run). path is target; fd is -1 and problem says why on failure.
Temporary create_replacing(const std::string& target);

// An existing or new regular file at `path` opened to append (O_APPEND), never through a
// symbolic link (O_NOFOLLOW) nor a FIFO or device; `create`: made when missing. fd -1 and
// problem says why on failure.
Temporary open_for_append(const std::string& path, bool create);

// A file written as a run goes (the metrics, TensorBoard's events, sweep.jsonl): a descriptor
// from create_replacing, open_for_append or an O_EXCL open, closed by the destructor.
class OutputStream {
 public:
  OutputStream() = default;
  explicit OutputStream(int fd) : fd_(fd) {}
  OutputStream(OutputStream&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  OutputStream& operator=(OutputStream&& o) noexcept;
  ~OutputStream();
  bool is_open() const { return fd_ >= 0; }
  // Writes text whole (retrying short writes); false, errno set, on failure.
  bool write(std::string_view text);

 private:
  int fd_ = -1;
};

// Writes n bytes to fd, retrying short writes; false (errno set) on failure.
bool write_all(int fd, const void* data, size_t n);

// Replaces `path` by what `fill` writes to the descriptor of a fresh temporary (false, errno
// set, on failure): the temporary is fsynced, renamed over path, and the directory fsynced,
// so that path holds its old content or all of the new one, even after a crash. Returns ""
// or the problem ("writing '.x.svg.k3x9qa.tmp' failed: No space left on device"); the
// temporary is gone either way.
std::string replace_file(const std::string& path, const std::function<bool(int fd)>& fill);
std::string replace_file(const std::string& path, std::string_view text);

// "" when a file can be created beside `target`, in its directory (a temporary is made there
// and removed), else why not.
std::string creation_problem(const std::string& target);

// "" when everything this process wrote to standard output reached it (flushed, no error),
// else why not: `tetra plan > /dev/full` must fail, not leave an empty file behind a 0.
std::string stdout_problem();

// Persists the entries created, renamed or removed in `dir`; "" or the problem.
std::string sync_dir(const std::string& dir);

}  // namespace tetra
