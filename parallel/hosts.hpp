// Where the ranks run, as MPI reports it: each rank's host name and its rank among the
// ranks MPI counts as sharing its machine (the node-local rank: it picks the GPU, sizes the
// threads and joins the watchdog's shared memory). And the checks that MPI connected the
// ranks as the launcher meant: node-local ranks unique per host (hosts that share a name,
// as containers may, confuse Open MPI), and tasks that srun started without PMIx, which MPI
// cannot connect into one job.
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
  // The first group of `size` consecutive ranks (a TP group: TP varies fastest in the rank)
  // whose ranks run on more than one host, described; "" when there is none.
  std::string spanning_group(int size) const;
};

// Collective over world.
Hosts gather_hosts(MPI_Comm world);

// "" when every host's node-local ranks are 0 … n−1 once each; else what is wrong, in one
// line.
std::string node_rank_problem(const Hosts& hosts);

// "" unless srun started this process as one of several tasks without a process-management
// interface that MPI can use (PMIx for Open MPI: srun --mpi=none or pmi2); then the refusal.
// Read from the environment, before MPI_Init, which would fail there with pages of text.
std::string srun_problem();

}  // namespace tetra
