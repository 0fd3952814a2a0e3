// Input errors must stop every rank together, with one message, never a hang: a rank that
// rejects its input while the others enter a collective would wait forever.
#pragma once
#include <mpi.h>

#include <functional>

#include "model/error.hpp"

namespace tetra {

// An error every rank of the communicator holds, with the same message: one rank (0)
// reports it and every rank exits. Any other Error is one rank's alone, and that rank must
// take the job down (MPI_Abort) or the others wait for it forever.
struct AgreedError : Error {
  using Error::Error;
};

// Numbers that are not finite (a diverged step's loss, a model's weights or logits): not bad
// input but bad numbers; the program exits 65, which tetra launch does not restart (resuming
// is bit-exact, so a rerun would diverge again).
struct DivergedError : AgreedError {
  using AgreedError::AgreedError;
};

// Runs f on every rank of comm (collective). If f throws tetra::Error (or any
// std::exception) on some rank, every rank throws AgreedError carrying the message of the
// lowest such rank, or DivergedError when that rank's was one.
void agree(MPI_Comm comm, const std::function<void()>& f);

}  // namespace tetra
