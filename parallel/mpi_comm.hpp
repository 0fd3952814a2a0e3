// Comm over an MPI communicator, on host memory; a communicator of one rank gives the group
// of one (self_comm.hpp), whose calls never reach MPI.
#pragma once
#include <mpi.h>

#include "parallel/comm.hpp"

namespace tetra {

// Takes ownership of comm (frees it unless it is MPI_COMM_WORLD or MPI_COMM_SELF).
std::unique_ptr<Comm> make_mpi_comm(MPI_Comm comm, const std::string& name);

}  // namespace tetra
