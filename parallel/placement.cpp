#include "parallel/placement.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace tetra {

std::string Hosts::describe(const std::vector<int>& ranks) const {
  std::map<std::string, std::vector<int>> by_host;
  std::vector<std::string> order;
  for (int r : ranks) {
    if (!by_host.count(name[r])) order.push_back(name[r]);
    by_host[name[r]].push_back(r);
  }
  std::ostringstream os;
  for (size_t h = 0; h < order.size(); ++h) {
    const std::vector<int>& rs = by_host[order[h]];
    os << (h ? ", " : "") << order[h] << " (rank" << (rs.size() > 1 ? "s " : " ");
    for (size_t i = 0; i < rs.size() && i < 8; ++i) os << (i ? ", " : "") << rs[i];
    if (rs.size() > 8) os << ", ... " << rs.size() << " in all";
    os << ")";
  }
  return os.str();
}

std::string Hosts::spanning_group(int size) const {
  for (size_t first = 0; first + size_t(size) <= name.size(); first += size_t(size)) {
    std::vector<int> group;
    std::set<std::string> seen;
    for (int r = int(first); r < int(first) + size; ++r) {
      group.push_back(r);
      seen.insert(name[r]);
    }
    if (seen.size() > 1) return describe(group);
  }
  return "";
}

Hosts gather_hosts(MPI_Comm world) {
  int size = 1;
  MPI_Comm_size(world, &size);
  char me[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(me, &len);
  std::vector<char> all(size_t(size) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(me, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                world);
  MPI_Comm node;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  Hosts h;
  h.local_rank.resize(size);
  MPI_Allgather(&local, 1, MPI_INT, h.local_rank.data(), 1, MPI_INT, world);
  for (int r = 0; r < size; ++r) h.name.emplace_back(&all[size_t(r) * MPI_MAX_PROCESSOR_NAME]);
  return h;
}

std::string node_rank_problem(const Hosts& hosts) {
  std::map<std::string, std::map<int, std::vector<int>>> seen;  // host -> local rank -> ranks
  for (size_t r = 0; r < hosts.name.size(); ++r)
    seen[hosts.name[r]][hosts.local_rank[r]].push_back(int(r));
  for (const auto& [host, locals] : seen) {
    for (const auto& [local, ranks] : locals) {
      if (ranks.size() < 2) continue;
      std::ostringstream os;
      os << "ranks " << ranks[0] << " and " << ranks[1] << " both have node-local rank " << local
         << " on host '" << host
         << "': several machines share that host name (containers?), so MPI's view of which "
            "ranks share a machine is wrong and a GPU or shared memory would be shared by "
            "mistake; give every host its own name";
      return os.str();
    }
  }
  return "";
}

std::string srun_problem() {
  // srun sets it in every task of a job step; a batch script, which may start one rank
  // itself, has SLURM_NTASKS but not this.
  const char* tasks = std::getenv("SLURM_STEP_NUM_TASKS");
  const int n = tasks ? std::atoi(tasks) : 0;
  if (n <= 1 || std::getenv("PMIX_RANK") != nullptr) return "";
#ifndef OPEN_MPI
  if (std::getenv("PMI_RANK") != nullptr) return "";  // PMI-2, which MPICH also speaks
#endif
  return "srun started " + std::to_string(n) +
         " tasks without PMIx, so MPI cannot connect them into one job (each would be a "
         "world of one rank); run srun --mpi=pmix, or set MpiDefault=pmix in slurm.conf";
}

LauncherRank launcher_rank() {
  const auto number = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? std::max(0, std::atoi(v)) : -1;
  };
  const std::pair<const char*, const char*> pairs[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMIX_RANK", "SLURM_STEP_NUM_TASKS"},
      {"PMI_RANK", "PMI_SIZE"},
      {"PMI_RANK", "SLURM_STEP_NUM_TASKS"}};
  LauncherRank out;
  for (const auto& [rank, size] : pairs) {
    const int r = number(rank), n = number(size);
    if (r < 0) continue;
    out.rank = r;
    // A rank above 0 says there are others even where the size is not told.
    if (std::max(n, r + 1) > out.size) {
      out.size = std::max(n, r + 1);
      out.source = n > r ? std::string(size) + "=" + std::to_string(n)
                         : std::string(rank) + "=" + std::to_string(r);
    }
  }
  return out;
}

NodeRank node_rank(MPI_Comm world) {
  MPI_Comm node;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  NodeRank n;
  MPI_Comm_rank(node, &n.rank);
  MPI_Comm_size(node, &n.size);
  MPI_Comm_free(&node);
  return n;
}

int ranks_sharing_my_cores(MPI_Comm world) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) CPU_ZERO(&set);
  MPI_Comm node;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int n = 1;
  MPI_Comm_size(node, &n);
  std::vector<cpu_set_t> all(n);
  MPI_Allgather(&set, sizeof set, MPI_BYTE, all.data(), sizeof set, MPI_BYTE, node);
  MPI_Comm_free(&node);
  int same = 0;
  for (const cpu_set_t& s : all) same += CPU_EQUAL(&s, &set) ? 1 : 0;
  return std::max(1, same);
}

int threads_per_rank(int sharing, bool warn) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int all = std::max(1, int(std::thread::hardware_concurrency()));
  const int mine = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : all;
  int threads = std::max(1, mine / std::max(1, sharing));
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) threads = n;
  }
  if (warn && threads > mine)
    std::fprintf(stderr, "tetra: warning: %d threads per rank, but a rank may run on %d core%s\n",
                 threads, mine, mine > 1 ? "s" : "");
  return threads;
}

std::string binding_warning(int rank, int local_ranks) {
  // Open MPI sets the first for a rank it bound, the second for a binding asked for.
  if (std::getenv("OMPI_MCA_orte_bound_at_launch") == nullptr ||
      std::getenv("OMPI_MCA_hwloc_base_binding_policy") != nullptr)
    return "";
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return "";
  const int mine = CPU_COUNT(&set), all = int(std::thread::hardware_concurrency());
  const int share = std::max(1, all / std::max(1, local_ranks));
  if (mine >= share) return "";
  return "mpirun bound rank " + std::to_string(rank) + " to " + std::to_string(mine) + " core" +
         (mine > 1 ? "s" : "") + ", though its share of this machine's " + std::to_string(all) +
         " is " + std::to_string(share) +
         " (Open MPI binds each rank of one or two to a core unless told otherwise): it trains "
         "at a fraction of the speed; pass --bind-to none to mpirun (or --bind-to with the "
         "binding you mean)";
}

}  // namespace tetra
