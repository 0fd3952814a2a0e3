// The communicator of a group of one rank: every collective is the identity, so an all-reduce,
// a broadcast and a barrier do nothing and a reduce-scatter or all-gather is a copy by the
// backend that owns the memory (nothing when in and out are the same memory). Nothing is
// counted or timed: a group of one sends no bytes. Under --comm mpi and auto every group of
// one gets it (make_mpi_comm hands it out for a communicator of one rank); only --comm nccl
// gives a group of one an NCCL communicator, so that one GPU can exercise NCCL.
#pragma once
#include <memory>
#include <string>

#include "parallel/comm.hpp"

namespace tetra {

std::unique_ptr<Comm> make_self_comm(const std::string& name);

}  // namespace tetra
