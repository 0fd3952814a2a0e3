// tetra: the command-line program. `tetra train [flags]` trains; every input error ends
// with one "tetra: error: ..." line from rank 0 and exit status 2 on every rank.
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "model/error.hpp"
#include "tools/lib/options.hpp"
#include "tools/lib/trainer.hpp"

namespace {

const char* kUsage =
    "usage: tetra <command> [flags]\n\n"
    "commands:\n"
    "  train    train a model (tetra train --help lists the flags)\n";

int train(const std::vector<std::string>& args, int rank) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      if (rank == 0) std::printf("%s", tetra::train_help().c_str());
      return 0;
    }
  }
  tetra::Trainer trainer(tetra::parse_train_options(args), MPI_COMM_WORLD);
  trainer.run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = 0;
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    const std::vector<std::string> args(argv + std::min(argc, 2), argv + argc);
    if (cmd == "train") {
      rc = train(args, rank);
    } else if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      if (rank == 0) std::printf("%s", kUsage);
    } else {
      tetra::fail(cmd.empty() ? "no command given" : "unknown command '" + cmd + "'", "\n", kUsage);
    }
  } catch (const tetra::Error& e) {
    if (rank == 0) std::fprintf(stderr, "tetra: error: %s\n", e.what());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
