// The unit tests run in one process; MPI is started once so that code which asks for a
// communicator gets a world of one rank.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  int threads = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &threads);
  doctest::Context ctx(argc, argv);
  int rc = ctx.run();
  MPI_Finalize();
  return rc;
}
