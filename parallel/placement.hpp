// Where the ranks run: each rank's host and its rank among the ranks MPI counts as sharing its
// machine (the node-local rank: it picks the GPU, sizes the threads and joins the watchdog's
// shared memory), the cores each may run on and the threads that makes, and the checks that
// MPI connected and placed the ranks as the launcher meant: node-local ranks unique per host
// (hosts that share a name, as containers may, confuse Open MPI), tasks that srun started
// without PMIx (which MPI cannot connect into one job), and a rank that mpirun bound to fewer
// cores than its share (Open MPI binds each rank of a job of one or two to a single core
// unless told otherwise, so `mpirun -np 1` on a 2-core machine trains at half speed).
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

// This process's place in an MPI job as its launcher tells it in the environment, before
// MPI_Init: Open MPI's OMPI_COMM_WORLD_RANK/SIZE, PMIx's PMIX_RANK (with Slurm's
// SLURM_STEP_NUM_TASKS for the size), PMI's PMI_RANK/PMI_SIZE (MPICH, Slurm's PMI-2).
// {0, 1, ""} when none says so; `source` names the variable that gave the size.
struct LauncherRank {
  int rank = 0, size = 1;
  std::string source;
};
LauncherRank launcher_rank();

// The rank of this process among the ranks of its machine, and their number. Collective.
struct NodeRank {
  int rank = 0, size = 1;
};
NodeRank node_rank(MPI_Comm world);

// The ranks of this machine whose affinity is the same set of cores as this rank's (this one
// included). Collective over world.
int ranks_sharing_my_cores(MPI_Comm world);

// Threads per rank: OMP_NUM_THREADS when set, else the cores this rank may run on (its
// affinity) divided among the `sharing` ranks of the machine that may run on the same cores.
// mpirun binds a rank to one core when it starts at most two, and to a socket or nothing
// otherwise; srun may give several ranks one mask; ranks that all see every core share them.
// More threads than cores only time-slice: `warn` says so on stderr.
int threads_per_rank(int sharing, bool warn);

// A warning (one line, without "tetra: warning: ") when mpirun bound this rank to fewer cores
// than its share of the machine (its cores / local_ranks) and no binding was asked for (no
// --bind-to, which mpirun passes on as OMPI_MCA_hwloc_base_binding_policy); "" otherwise,
// and for a process no launcher bound. `rank` names it in the words.
std::string binding_warning(int rank, int local_ranks);

}  // namespace tetra
