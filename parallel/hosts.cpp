#include "parallel/hosts.hpp"

#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

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

}  // namespace tetra
