// tetra's error types. Error is everything a user can get wrong: bad flags, bad files, bad
// layouts. The program catches it at the top, prints "tetra: error: <what>" once (rank 0) and
// exits with its status (cli/main.cpp): 2, bad input, unless the error says otherwise (73 for
// a checkpoint directory another job holds, checkpoint/lock.hpp).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tetra {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
  Error(const std::string& what, int exit_status) : std::runtime_error(what), status(exit_status) {}
  int status = 2;  // the program's exit status when this error ends it
};

// An error every rank of a communicator holds, with the same message (parallel/agree.hpp
// makes them): one rank (0) reports it and every rank exits. Any other Error is one rank's
// alone, and that rank must take the job down (MPI_Abort) or the others wait for it forever.
struct AgreedError : Error {
  using Error::Error;
};

// Numbers that are not finite: a step whose loss or gradient norm is not (training stopped
// before that step's update, so no checkpoint holds its weights; every rank sees the same
// totals, so every rank throws it), or a model's weights or logits in tetra generate (agree()
// carries it to every rank). The program exits 65, which tetra launch does not restart
// (resuming is bit-exact, so a rerun would diverge again).
struct DivergedError : AgreedError {
  using AgreedError::AgreedError;
};

// fail("heads (", h, ") must divide dim (", d, ")") throws Error with the pieces joined.
template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  throw Error(os.str());
}

template <typename... Args>
void check(bool ok, Args&&... args) {
  if (!ok) fail(std::forward<Args>(args)...);
}

}  // namespace tetra
