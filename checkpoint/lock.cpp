#include "checkpoint/lock.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

// A lock being taken over is moved aside to `lock.<pid of the taker>.stale` first.
constexpr const char* kAsideSuffix = ".stale";

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string first_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// What tells this machine and this PID namespace apart from others: the kernel's boot id
// (a reboot, or another machine that took the host name) and the namespace's inode ("pid:
// [4026531836]"), without which a pid means nothing.
std::string boot_id() {
  return first_line("/proc/sys/kernel/random/boot_id");
}
std::string pid_namespace() {
  char buf[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : "";
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
  std::string job, host, boot, pid_ns;  // boot and pid_ns "" in locks of older tetras
  int64_t pid = 0;
  unsigned long long start = 0;
  int64_t attempt = 0;  // 0 in locks of older tetras

  // On this host, in this boot and PID namespace: where its pid can be looked up.
  bool checkable() const {
    return host == host_name() && (boot.empty() || boot == boot_id()) &&
           (pid_ns.empty() || pid_ns == pid_namespace());
  }
  std::string describe() const {
    std::string s = (job.empty() ? "" : "job " + job + ", ") +
                    (attempt > 0 ? "attempt " + std::to_string(attempt) + ", " : "") + "pid " +
                    std::to_string(pid);
    if (host != host_name()) return s + " on host " + host;
    if (!boot.empty() && boot != boot_id())
      return s + " on host " + host + " before a reboot, or on another machine of that name";
    if (!pid_ns.empty() && pid_ns != pid_namespace())
      return s + " on host " + host + " in another PID namespace (a container)";
    return s + " on host " + host;
  }
  // Why this process cannot look the holder up.
  std::string unchecked() const {
    if (host != host_name()) return "it ran on host " + host;
    if (!boot.empty() && boot != boot_id()) return "it ran before a reboot or on another machine";
    return "it ran in another PID namespace";
  }
};

std::optional<Holder> parse_holder(const std::string& text) {
  json v;
  if (!parse_json(text, v).empty() || !v.is_object()) return std::nullopt;
  const auto str = [&](const char* key) {
    return v.contains(key) && v.at(key).is_string() ? v.at(key).get<std::string>() : "";
  };
  if (!v.contains("host") || !v.at("host").is_string() || !v.contains("pid") ||
      !v.contains("start_time"))
    return std::nullopt;
  const auto pid = json_int(v.at("pid"));
  const auto start = json_int(v.at("start_time"));
  if (!pid || !start || *pid <= 0) return std::nullopt;
  const auto attempt =
      v.contains("attempt") ? json_int(v.at("attempt")) : std::optional<int64_t>(0);
  if (!attempt || *attempt < 0) return std::nullopt;
  return Holder{str("job"),    str("host"), str("boot_id"),
                str("pid_ns"), *pid,        (unsigned long long)*start,
                *attempt};
}

// Whether a checkable holder still runs: the same process (not a later one that got its
// pid), not a zombie waiting to be reaped.
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

// Seconds since the file was last written; a large number when it cannot be read.
double age_seconds(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 1e9;
  timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  return double(now.tv_sec - st.st_mtim.tv_sec) + 1e-9 * double(now.tv_nsec - st.st_mtim.tv_nsec);
}

bool no_hard_links(int err) {
  return err == EPERM || err == ENOSYS || err == EOPNOTSUPP || err == EMLINK;
}

// Writes text to a fresh file of this process's own and links it to `path`: the lock appears
// whole or not at all. Where the file system has no hard links, creates it exclusively.
// Returns 0 or the errno.
int create_lock(const std::string& path, const std::string& text) {
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
  if (r == 0) return 0;
  return no_hard_links(link_err) ? create_exclusive(path, text) : link_err;
}

}  // namespace

int create_exclusive(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  const bool written = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
  const int err = errno;
  ::close(fd);
  if (written) return 0;
  ::unlink(path.c_str());
  fail("cannot write the lock '", path, "': ", std::strerror(err));
}

std::string job_identity() {
  const char* slurm = std::getenv("SLURM_JOB_ID");
  if (slurm && *slurm) {
    const char* cluster = std::getenv("SLURM_CLUSTER_NAME");
    return "slurm:" + std::string(cluster && *cluster ? cluster : "") + "/" + slurm;
  }
  const char* launch = std::getenv("TETRA_JOB");
  if (launch && *launch) return std::string("launch:") + launch;
  return "";
}

std::string lock_text(const std::string& job, int pid, int attempt) {
  const std::optional<Process> p = process(pid);
  json v = json::object();
  v["job"] = job;
  v["attempt"] = attempt;
  v["host"] = host_name();
  v["boot_id"] = boot_id();
  v["pid_ns"] = pid_namespace();
  v["pid"] = pid;
  v["start_time"] = int64_t(p ? p->start : 0);
  return v.dump() + "\n";
}

DirLock::DirLock(const std::string& dir, const LockRequest& req) {
  const std::string path = (std::filesystem::path(dir) / kLockFile).string();
  const std::string mine = lock_text(req.job, int(::getpid()), req.attempt);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(req.wait_seconds));
  const std::string in_use = "checkpoint directory '" + dir + "' is in use by another job (";
  for (;;) {
    const int err = create_lock(path, mine);
    if (err == 0) break;
    check(err == EEXIST, "cannot take the lock '", path, "': ", std::strerror(err));
    const std::optional<std::string> text = read_text(path);
    if (!text) continue;  // released meanwhile
    const std::optional<Holder> holder = parse_holder(*text);
    if (!holder && age_seconds(path) < 5) {
      // Created exclusively (no hard links) and still being written.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    check(holder.has_value(), "checkpoint directory '", dir, "' has a lock '", path,
          "' that tetra cannot read; if no job uses the directory, delete it");
    const bool same_job = !req.job.empty() && holder->job == req.job;
    std::string why;  // why it may be taken over
    if (holder->checkable()) {
      if (alive(*holder)) {
        if (std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          continue;
        }
        throw LockedError(in_use + holder->describe() +
                          "): two jobs writing one directory would destroy each other's "
                          "checkpoints; wait for it to end or pass another `checkpoint.ckpt_dir`");
      }
      why = "which no longer runs";
    } else if (same_job && req.restart && req.attempt > holder->attempt) {
      // Whether it still runs cannot be told from here: should it, it stops at its next
      // checkpoint (check_held).
      why = "an earlier attempt of this job (this is attempt " + std::to_string(req.attempt) +
            "); tetra cannot check from here that it has stopped (" + holder->unchecked() +
            "): if it still runs, it stops at its next checkpoint";
    } else if (same_job && req.restart) {
      throw LockedError(in_use + holder->describe() + "), attempt " +
                        std::to_string(holder->attempt) + " of this job, which this run (attempt " +
                        std::to_string(req.attempt) +
                        ") does not follow: an attempt takes over only an earlier one's lock");
    } else {
      throw LockedError(in_use + holder->describe() +
                        ", which this machine cannot check); if that job is gone, break the "
                        "lock with: rm '" +
                        path + "'");
    }
    // Move it aside, make sure it is the one just read (another job may have taken it over
    // meanwhile, and then it goes back), and link this job's before the one aside goes: a
    // holder that finds no lock while one is aside waits for the takeover (check_held).
    const std::string aside = path + "." + std::to_string(::getpid()) + kAsideSuffix;
    if (::rename(path.c_str(), aside.c_str()) != 0) continue;
    if (const std::optional<std::string> moved = read_text(aside); moved != text) {
      // Should a third job hold it by now, putting it back fails and the lock moved aside is
      // lost; its owner then finds nothing to remove at release.
      if (moved) (void)create_lock(path, *moved);
      ::unlink(aside.c_str());
      continue;
    }
    const int taken = create_lock(path, mine);
    ::unlink(aside.c_str());
    if (taken == EEXIST) continue;  // a third job linked its own meanwhile
    check(taken == 0, "cannot take the lock '", path, "': ", std::strerror(taken));
    std::fprintf(stderr,
                 "tetra: warning: taking over the lock of checkpoint directory '%s' left by %s, "
                 "%s\n",
                 dir.c_str(), holder->describe().c_str(), why.c_str());
    break;
  }
  path_ = path;
  content_ = mine;
}

void DirLock::release() {
  try {
    if (!path_.empty() && read_text(path_) == content_) ::unlink(path_.c_str());
  } catch (const Error&) {  // someone replaced it: it is not ours to remove
  }
  path_.clear();
}

void DirLock::check_held() const {
  if (path_.empty()) return;
  const auto read_lock = [this]() -> std::optional<std::string> {
    try {
      return read_text(path_);
    } catch (const Error&) {  // replaced by something unreadable: not ours either
      return "";
    }
  };
  // A job taking the lock over moves it aside and links its own before it removes the one
  // aside (the constructor's loop), so a missing lock with one aside is a takeover under way,
  // however long a loaded machine keeps that job from its next step: look again while one is
  // aside (up to a minute), and for a second more before calling it removed (a takeover that
  // finds a third job puts this one back).
  const auto moved_aside = [this] {
    const std::filesystem::path lock(path_);
    const std::string prefix = lock.filename().string() + ".";
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(lock.parent_path(), ec)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with(prefix) && name.ends_with(kAsideSuffix)) return true;
    }
    return false;
  };
  std::optional<std::string> text = read_lock();
  for (int i = 0; i < 1200 && !text && (i < 20 || moved_aside()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    text = read_lock();
  }
  if (text == content_) return;
  const std::optional<Holder> holder = text ? parse_holder(*text) : std::nullopt;
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  throw LockedError("checkpoint directory '" + dir + "' is no longer this job's: its lock " +
                    (holder ? "was taken over by " + holder->describe()
                     : text ? "was replaced"
                            : "was removed") +
                    "; stopping without saving this checkpoint, so that two jobs do not write "
                    "one directory");
}

DirLock::~DirLock() {
  release();
}

}  // namespace tetra::ckpt
