// Input errors must stop every rank together, with one message, never a hang: a rank that
// rejects its input while the others enter a collective would wait forever.
#pragma once
#include <mpi.h>

#include <functional>

#include "util/error.hpp"

namespace tetra {

// Runs f on every rank of comm (collective). If f throws tetra::Error (or any
// std::exception) on some rank, every rank throws AgreedError carrying the message and the
// exit status of the lowest such rank, or DivergedError when that rank's was one.
void agree(MPI_Comm comm, const std::function<void()>& f);

}  // namespace tetra
