#include "parallel/agree.hpp"

#include <climits>
#include <string>

#include "util/error.hpp"

namespace tetra {

void agree(MPI_Comm comm, const std::function<void()>& f) {
  std::string msg;
  bool failed = false;
  int status = 2, diverged = 0;
  try {
    f();
  } catch (const DivergedError& e) {
    msg = e.what();
    failed = true;
    diverged = 1;
  } catch (const Error& e) {
    msg = e.what();
    status = e.status;
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
  int head[3] = {int(msg.size()), status, diverged};
  MPI_Bcast(head, 3, MPI_INT, first, comm);
  msg.resize(head[0]);
  MPI_Bcast(msg.data(), head[0], MPI_CHAR, first, comm);
  if (head[2]) throw DivergedError(msg);
  throw AgreedError(msg, head[1]);
}

}  // namespace tetra
