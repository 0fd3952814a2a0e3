// Where the ranks run, as MPI reports it: each rank's host name and its rank among the
// ranks MPI counts as sharing its machine (the node-local rank: it picks the GPU, sizes the
// threads and joins the watchdog's shared memory). And the checks that MPI connected the
// ranks as the launcher meant: node-local ranks unique per host (hosts that share a name,
// as containers may, confuse Open MPI), and a job of several tasks that became one MPI
// world each (srun without PMIx).
#pragma once
#include <mpi.h>

#include <string>
#include <vector>

namespace tetra {

struct Hosts {
  std::vector<std::string> name;  // by world rank
  std::vector<int> local_rank;    // by world rank
  // "h2 (ranks 2, 3)" for each host that holds one of `ranks`, joined by ", ".
  std::string describe(const std::vector<int>& ranks) const;
  // Whether the ranks run on more than one host.
  bool spans_hosts(const std::vector<int>& ranks) const;
};

// Collective over world.
Hosts gather_hosts(MPI_Comm world);

// "" when every host's node-local ranks are 0 … n−1 once each; else what is wrong, in one
// line.
std::string node_rank_problem(const Hosts& hosts);

// "" unless this process is a world of one inside a Slurm job step of several tasks (srun
// without --mpi=pmix: every task starts MPI on its own); then the refusal.
std::string singleton_problem(int world_size);

}  // namespace tetra
