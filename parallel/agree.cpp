#include "parallel/agree.hpp"

#include <climits>
#include <string>

#include "util/error.hpp"

namespace tetra {

void agree(MPI_Comm comm, const std::function<void()>& f) {
  std::string msg;
  bool failed = false;
  int diverged = 0;
  try {
    f();
  } catch (const DivergedError& e) {
    msg = e.what();
    failed = true;
    diverged = 1;
  } catch (const Error& e) {
    msg = e.what();
    failed = true;
  } catch (const std::exception& e) {
    msg = std::string("internal error: ") + e.what();
    failed = true;
  }
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int first = failed ? rank : INT_MAX;
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == INT_MAX) return;
  int len = int(msg.size());
  MPI_Bcast(&len, 1, MPI_INT, first, comm);
  msg.resize(len);
  MPI_Bcast(msg.data(), len, MPI_CHAR, first, comm);
  MPI_Bcast(&diverged, 1, MPI_INT, first, comm);
  if (diverged) throw DivergedError(msg);
  throw AgreedError(msg);
}

}  // namespace tetra
