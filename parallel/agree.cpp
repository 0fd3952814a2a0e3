#include "parallel/agree.hpp"

#include <climits>
#include <string>

#include "util/error.hpp"

namespace tetra {

void agree(MPI_Comm comm, const std::function<void()>& f) {
  std::string msg;
  bool failed = false;
  int status = 2;
  try {
    f();
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
  int head[2] = {int(msg.size()), status};
  MPI_Bcast(head, 2, MPI_INT, first, comm);
  msg.resize(head[0]);
  MPI_Bcast(msg.data(), head[0], MPI_CHAR, first, comm);
  throw AgreedError(msg, head[1]);
}

}  // namespace tetra
