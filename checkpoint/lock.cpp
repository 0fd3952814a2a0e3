#include "checkpoint/lock.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "util/error.hpp"
#include "util/input_file.hpp"
#include "util/json.hpp"
#include "util/output_file.hpp"

namespace tetra::ckpt {

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// A process as /proc/PID/stat shows it: its state (field 3; Z for a zombie) and its start
// time in clock ticks since boot (field 22), which tells a reused pid apart. The command
// name (field 2) is in parentheses and may hold spaces, so fields are counted after the
// last ')'.
struct Process {
  char state = 0;
  unsigned long long start = 0;
};

std::optional<Process> process(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(f, text)) return std::nullopt;
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream rest(text.substr(paren + 1));
  Process p;
  rest >> p.state;
  std::string skip;
  for (int field = 4; field < 22; ++field) rest >> skip;
  rest >> p.start;
  if (!rest) return std::nullopt;
  return p;
}

struct Holder {
  std::string host;
  int64_t pid = 0;
  unsigned long long start = 0;
  std::string describe() const { return "pid " + std::to_string(pid) + " on host " + host; }
};

std::optional<Holder> parse_holder(const std::string& text) {
  json v;
  if (!parse_json(text, v).empty() || !v.is_object()) return std::nullopt;
  if (!v.contains("host") || !v.at("host").is_string() || !v.contains("pid") ||
      !v.contains("start_time"))
    return std::nullopt;
  const auto pid = json_int(v.at("pid"));
  const auto start = json_int(v.at("start_time"));
  if (!pid || !start || *pid <= 0) return std::nullopt;
  return Holder{v.at("host").get<std::string>(), *pid, (unsigned long long)*start};
}

// Whether the holder, on this host, still runs: the same process (not a later one that got
// its pid), not a zombie waiting to be reaped.
bool alive(const Holder& h) {
  const std::optional<Process> p = process(int(h.pid));
  return p && p->state != 'Z' && p->state != 'X' && p->start == h.start;
}

// The lock's text; nullopt when there is none (released meanwhile). Throws tetra::Error for
// one that is there but cannot be read (a FIFO, whose open would wait for a writer; a
// directory), or that is larger than any lock tetra writes.
std::optional<std::string> read_text(const std::string& path) {
  std::string text;
  const std::string problem = read_input_file(path, text, 4096);
  if (problem == kNotFound) return std::nullopt;
  check(problem.empty(), "the lock '", path, "' cannot be read (", problem,
        "); if no job uses its directory, delete it");
  return text;
}

// Writes text to a fresh file of this process's own and links it to `path`: the lock appears
// whole or not at all. Returns 0 or the errno of the link.
int link_new(const std::string& path, const std::string& text) {
  const Temporary tmp = create_temporary(path);
  check(tmp.fd >= 0, "cannot create the lock '", path, "': ", tmp.problem);
  const bool written = write_all(tmp.fd, text.data(), text.size());
  const int err = errno;
  ::close(tmp.fd);
  if (!written) {
    ::unlink(tmp.path.c_str());
    fail("cannot write the lock '", tmp.path, "': ", std::strerror(err));
  }
  const int r = ::link(tmp.path.c_str(), path.c_str());
  const int link_err = errno;
  ::unlink(tmp.path.c_str());
  return r == 0 ? 0 : link_err;
}

}  // namespace

std::string lock_text(int pid) {
  const std::optional<Process> p = process(pid);
  json v = json::object();
  v["host"] = host_name();
  v["pid"] = pid;
  v["start_time"] = int64_t(p ? p->start : 0);
  return v.dump() + "\n";
}

DirLock::DirLock(const std::string& dir, double wait_seconds) {
  const std::string path = (std::filesystem::path(dir) / kLockFile).string();
  const std::string mine = lock_text(int(::getpid()));
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(wait_seconds));
  for (;;) {
    const int err = link_new(path, mine);
    if (err == 0) break;
    check(err == EEXIST, "cannot take the lock '", path, "': ", std::strerror(err));
    const std::optional<std::string> text = read_text(path);
    if (!text) continue;  // released meanwhile
    const std::optional<Holder> holder = parse_holder(*text);
    check(holder.has_value(), "checkpoint directory '", dir, "' has a lock '", path,
          "' that tetra cannot read; if no job uses the directory, delete it");
    check(holder->host == host_name(), "checkpoint directory '", dir,
          "' is in use by another job (", holder->describe(),
          ", which this machine cannot check); if that job is gone, delete '", path, "'");
    if (alive(*holder)) {
      if (std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      fail("checkpoint directory '", dir, "' is in use by another job (", holder->describe(),
           "): two jobs writing one directory would destroy each other's checkpoints; wait for "
           "it to end or pass another --ckpt-dir");
    }
    // Stale: move it aside, make sure it is the one just read (another job may have taken
    // it over meanwhile, and then it goes back), and retry.
    const std::string aside = path + "." + std::to_string(::getpid()) + ".stale";
    if (::rename(path.c_str(), aside.c_str()) != 0) continue;
    if (read_text(aside) != text) {
      // Should a third job hold it by now, the link fails and the lock moved aside is lost;
      // its owner then finds nothing to remove at release.
      [[maybe_unused]] const int back = ::link(aside.c_str(), path.c_str());
      ::unlink(aside.c_str());
      continue;
    }
    ::unlink(aside.c_str());
    std::fprintf(stderr,
                 "tetra: warning: taking over the lock of checkpoint directory '%s' left by %s, "
                 "which no longer runs\n",
                 dir.c_str(), holder->describe().c_str());
  }
  path_ = path;
  content_ = mine;
}

DirLock::~DirLock() {
  try {
    if (!path_.empty() && read_text(path_) == content_) ::unlink(path_.c_str());
  } catch (const Error&) {  // someone replaced it: it is not ours to remove
  }
}

}  // namespace tetra::ckpt
