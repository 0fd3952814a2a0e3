#include "parallel/placement.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace tetra {

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
