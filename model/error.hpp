// One error type for everything a user can get wrong: bad flags, bad files, bad layouts.
// The program catches it at the top, prints "tetra: error: <what>" once (rank 0) and exits
// with its status: 2 (bad input) unless the error says otherwise (a locked checkpoint
// directory, checkpoint/lock.hpp).
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
