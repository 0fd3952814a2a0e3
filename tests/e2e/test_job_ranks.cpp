// tetra sweep, lab and launch start their own jobs and are never ranks of one (issue 38,
// class 10): started by mpirun (or with a launcher's environment saying so: Open MPI's, PMIx's,
// PMI's) as several ranks, they refuse with one line, exit status 2, before anything is run or
// written; each rank used to run the whole command into one --out.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"

using namespace tetra::test;

namespace {

const std::string kCommands[] = {
    "sweep --ranks 1 --dry-run" + tiny_model_flags(),
    "sweep --ranks 1 --out runs" + tiny_model_flags({.steps = 1}),
    "lab --list",
    "lab 6nd --answer 1",
    "launch -- true",
    "serve --port 0",
};

}  // namespace

TEST_CASE("job ranks: started as several ranks, a command that starts jobs refuses, one line") {
  for (const std::string& command : kCommands) {
    CAPTURE(command);
    // Under mpirun: two ranks, one line between them, nothing written.
    expect_refusal(mpirun(2) + tetra_bin() + " " + command,
                   "was started as rank 0 of 2 (OMPI_COMM_WORLD_SIZE=2); it starts its own MPI "
                   "jobs and runs as one process: run it without mpirun or srun");
    // The other launchers' variables, as srun --mpi=pmix or pmi2 and MPICH's set them.
    const std::pair<std::string, std::string> envs[] = {
        {"PMIX_RANK=0 SLURM_STEP_NUM_TASKS=4", "rank 0 of 4 (SLURM_STEP_NUM_TASKS=4)"},
        {"PMI_RANK=0 PMI_SIZE=3", "rank 0 of 3 (PMI_SIZE=3)"},
    };
    for (const auto& [env, words] : envs)
      expect_refusal(env + " " + tetra_bin() + " " + command, words);
    // A rank other than 0 is refused without a word.
    const TempDir cwd;
    const Spawned r =
        spawn("cd " + cwd.path.string() + " && PMIX_RANK=3 " + tetra_bin() + " " + command);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.empty());
    CHECK(std::filesystem::is_empty(cwd.path));
  }
  // One rank of one is no MPI job of several: it runs.
  const Spawned one =
      spawn("OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 " + tetra_bin() + " lab --list");
  CHECK(one.status == 0);
}
