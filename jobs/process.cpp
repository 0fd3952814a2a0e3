#include "jobs/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "util/output_file.hpp"

extern char** environ;

namespace tetra {
namespace {

// NAME of "NAME=VALUE".
std::string_view name_of(std::string_view var) {
  return var.substr(0, var.find('='));
}

// This process's environment with the spec's changes, as the child gets it.
std::vector<std::string> child_env(const ProcessSpec& spec) {
  std::vector<std::string> names = spec.unset_env;
  for (const std::string& v : spec.set_env) names.emplace_back(name_of(v));
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::find(names.begin(), names.end(), name_of(*e)) == names.end()) env.emplace_back(*e);
  env.insert(env.end(), spec.set_env.begin(), spec.set_env.end());
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& words) {
  std::vector<char*> out;
  for (std::string& w : words) out.push_back(w.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

pid_t start_process(const ProcessSpec& spec) {
  check(!spec.argv.empty(), "start_process: no command");
  const std::string& program = spec.argv[0];
  // Everything the child needs is made before fork: between fork and exec it may only make
  // async-signal-safe calls.
  std::vector<std::string> argv_words = spec.argv, env_words = child_env(spec);
  const std::vector<char*> argv = pointers(argv_words), envp = pointers(env_words);
  int log = -1, null = -1;
  if (!spec.log_path.empty()) {
    // A fresh file renamed over the name: an earlier log is replaced, a link not written through.
    const Temporary file = create_replacing(spec.log_path);
    check(file.fd >= 0, "cannot write '", spec.log_path, "': ", file.problem);
    log = file.fd;
    null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    const int err = errno;
    if (log >= 0) ::close(log);
    if (null >= 0) ::close(null);
    throw CannotRun("cannot start '" + program + "': pipe: " + std::strerror(err));
  }
  // The program starts with no signal blocked and SIGPIPE's default, whatever this process's
  // threads block or ignore (tetra serve waits for its signals in a thread of its own).
  sigset_t none;
  sigemptyset(&none);
  struct sigaction default_pipe {};
  default_pipe.sa_handler = SIG_DFL;
  std::fflush(nullptr);  // or the child could repeat what we buffered
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::sigaction(SIGPIPE, &default_pipe, nullptr);
    if (spec.own_group) ::setpgid(0, 0);
    if (log >= 0) {
      ::dup2(null, 0);
      ::dup2(log, 1);
      ::dup2(log, 2);
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    const int err = errno;
    [[maybe_unused]] const ssize_t n = ::write(pipe_fds[1], &err, sizeof err);
    ::_exit(exit_status::kCannotRun);
  }
  const int fork_errno = errno;
  ::close(pipe_fds[1]);
  if (log >= 0) ::close(log);
  if (null >= 0) ::close(null);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    throw CannotRun("cannot start '" + program + "': fork: " + std::strerror(fork_errno));
  }
  if (spec.own_group) ::setpgid(pid, pid);  // as the child does: whichever runs first
  int err = 0;
  ssize_t n;
  do n = ::read(pipe_fds[0], &err, sizeof err);
  while (n < 0 && errno == EINTR);
  ::close(pipe_fds[0]);
  if (n == ssize_t(sizeof err)) {
    wait_process(pid);
    throw CannotRun("cannot run '" + program + "': " + std::strerror(err));
  }
  return pid;
}

bool reaped(pid_t pid, int& status) {
  pid_t r;
  do r = ::waitpid(pid, &status, WNOHANG);
  while (r < 0 && errno == EINTR);
  return r == pid;
}

int wait_process(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace tetra
