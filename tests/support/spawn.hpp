// Running the real `tetra` binary from a test, in a clean environment: this test process
// is an MPI singleton, and the variables it leaves behind would make a nested mpirun fail.
#pragma once
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "test_util.hpp"
#include "util/clock.hpp"

namespace tetra::test {

struct Spawned {
  int status = -1;  // exit status; -1 if killed by a signal
  std::string out, err;
  double seconds = 0;
};

// DEFAULTS ("--flag value" pairs) less the flags ARGS give, then ARGS: tetra refuses a flag
// given twice, so a test's own value must replace the default rather than follow it.
inline std::string with_defaults(const std::string& defaults, const std::string& args) {
  std::istringstream words(args);
  std::string given = " ";
  for (std::string w; words >> w;) given += w.substr(0, w.find('=')) + " ";
  std::istringstream pairs(defaults);
  std::string out;
  for (std::string flag, value; pairs >> flag >> value;)
    if (given.find(" " + flag + " ") == std::string::npos) out += flag + " " + value + " ";
  return out + args;
}

// The tetra binary (this build's, or $TETRA_TEST_BINARY to run the tests against another
// build: a new test must fail on the build before its fix) and mpirun with as many ranks as
// asked, oversubscribing the cores.
inline std::string tetra_bin() {
  const char* other = std::getenv("TETRA_TEST_BINARY");
  return other != nullptr && *other != '\0' ? other : TETRA_BINARY;
}
inline std::string mpirun(int ranks) {
  return "mpirun --oversubscribe -np " + std::to_string(ranks) + " ";
}

// Runs a shell command with a time limit; captures stdout and stderr.
inline Spawned spawn(const std::string& command, int timeout_s = 120) {
  const TempDir dir;
  const std::string out = dir / "stdout", err = dir / "stderr";
  const std::string cmd =
      "env -i PATH=\"$PATH\" HOME=\"$HOME\" OMPI_ALLOW_RUN_AS_ROOT=1 "
      "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 timeout " +
      std::to_string(timeout_s) + " sh -c '" + command + "' >" + out + " 2>" + err;
  const tetra::Clock::time_point t0 = tetra::Clock::now();
  const int raw = std::system(cmd.c_str());
  Spawned s;
  s.seconds = tetra::seconds_since(t0);
  s.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  s.out = slurp(out);
  s.err = slurp(err);
  return s;
}

}  // namespace tetra::test
