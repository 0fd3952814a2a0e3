// One error type for everything a user can get wrong: bad flags, bad files, bad layouts.
// The program catches it at the top, prints "tetra: error: <what>" once (rank 0) and exits 2.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tetra {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
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
