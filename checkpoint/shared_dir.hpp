// Whether every rank sees the checkpoint directory that rank 0 sees. Each rank writes its
// own shard into --ckpt-dir, so on several hosts it must be one shared file system, mounted
// at the same path everywhere; a directory local to each host would fail only at the first
// save, after --ckpt-every steps were spent.
#pragma once
#include <mpi.h>

#include <string>

#include "parallel/placement.hpp"

namespace tetra::ckpt {

// Collective over world; dir exists on rank 0. Rank 0 writes a probe file of a fresh name
// into dir, every rank looks for it (for up to kProbeSeconds: a network file system may show
// a new file late), and rank 0 removes it. Throws the same tetra::Error on every rank, naming
// the hosts that do not see it, when some rank does not.
void check_shared_dir(MPI_Comm world, const std::string& dir, const Hosts& hosts);

inline constexpr double kProbeSeconds = 3;

}  // namespace tetra::ckpt
