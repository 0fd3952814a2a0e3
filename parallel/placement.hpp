// Where the launcher placed this process. Open MPI binds each rank of a job of one or two to a
// single core unless told otherwise (`--bind-to none`), so `mpirun -np 1` on a 2-core machine
// trains on one core, at half the speed of a direct run. That is worth a word at start-up.
#pragma once
#include <string>

namespace tetra {

// A warning (one line, without "tetra: warning: ") when mpirun bound this rank to fewer cores
// than its share of the machine (its cores / local_ranks) and no binding was asked for (no
// --bind-to, which mpirun passes on as OMPI_MCA_hwloc_base_binding_policy); "" otherwise,
// and for a process no launcher bound. `rank` names it in the words.
std::string binding_warning(int rank, int local_ranks);

}  // namespace tetra
