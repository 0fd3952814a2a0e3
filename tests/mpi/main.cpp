// doctest main for tests that run under mpirun: every rank runs every test case (they are
// collective); rank 0 makes the assertions and prints the report.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  int threads = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &threads);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  doctest::Context ctx(argc, argv);
  if (rank != 0) ctx.setOption("out", "/dev/null");
  int rc = ctx.run();
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
