// Comm over NCCL, for tensors in one GPU's memory: one NCCL communicator per group (tp, cp,
// pp, dp, dp_cp), bootstrapped through the group's MPI communicator, which it keeps for host
// reductions and barriers. Work is queued on the backend's stream, behind the kernels that
// produced its input and ahead of those that read its output, and a call returns without
// waiting for the GPU (but the pipeline's blocking receive). The host waits for the queued
// calls where it next waits for the stream (the backend's download, synchronize and sums of
// squares, through backend/host_wait.hpp; a barrier; a host reduction), oldest first, polling
// NCCL's asynchronous errors while the watchdog sees it in the call the stream is in.
//
// NCCL has no message tags: a link's sends and receives match in posting order. The pipeline
// schedules guarantee that every link carries its messages in the order the receiver
// consumes them (parallel/schedule.hpp, SimResult::in_order), so tags are not needed.
// Sends are held back and posted together with this rank's next receive (or the next call
// of any NCCL communicator) inside one ncclGroupStart/End, so that two stages sending to each
// other at once cannot deadlock on NCCL's buffers.
#pragma once
#include <mpi.h>

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "parallel/comm.hpp"

namespace tetra {

// Whether this build has NCCL (found at configure time).
bool have_nccl();

// Collective over `comm`'s ranks, each on its own GPU (the backend's). Takes ownership of
// comm. Throws tetra::Error where the build has no NCCL.
std::unique_ptr<Comm> make_nccl_comm(MPI_Comm comm, const std::string& name, Backend& be);

}  // namespace tetra
