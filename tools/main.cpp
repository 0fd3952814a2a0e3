// tetra: the command-line program. `tetra train [flags]` trains; every input error ends
// with one "tetra: error: ..." line from rank 0 and exit status 2 on every rank.
#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "model/error.hpp"
#include "parallel/agree.hpp"
#include "parallel/watchdog.hpp"
#include "tools/lib/launch.hpp"
#include "tools/lib/options.hpp"
#include "tools/lib/trainer.hpp"

namespace {

const char* kUsage =
    "usage: tetra <command> [flags]\n\n"
    "commands:\n"
    "  train    train a model (tetra train --help lists the flags)\n"
    "  ckpt     inspect DIR | verify DIR: describe or check a checkpoint directory\n"
    "  launch   supervise a training command: rerun it with --resume auto after a failure\n"
    "           (tetra launch [--restarts N] -- mpirun -np 16 build/tetra train ...)\n";

int train(const std::vector<std::string>& args, int rank) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      if (rank == 0) std::printf("%s", tetra::train_help().c_str());
      return 0;
    }
  }
  tetra::TrainOptions opt;
  tetra::agree(MPI_COMM_WORLD, [&] { opt = tetra::parse_train_options(args); });
  tetra::watchdog::start(MPI_COMM_WORLD, opt.timeout);
  tetra::Trainer trainer(opt, MPI_COMM_WORLD);
  trainer.run();
  return 0;
}

// tetra ckpt inspect|verify DIR. DIR is one checkpoint (step_...) or a checkpoint
// directory, meaning its newest complete checkpoint.
int ckpt_command(const std::vector<std::string>& args, int rank) {
  tetra::check(args.size() == 2 && (args[0] == "inspect" || args[0] == "verify"),
               "usage: tetra ckpt inspect|verify DIR");
  std::string dir = args[1];
  if (!std::filesystem::exists(dir + "/manifest.json")) {
    std::vector<std::string> warnings;
    const std::string newest = tetra::ckpt::find_latest(dir, &warnings);
    for (const std::string& w : warnings)
      if (rank == 0) std::fprintf(stderr, "tetra: warning: %s\n", w.c_str());
    tetra::check(!newest.empty(), "no complete checkpoint that verifies in '", dir, "'");
    dir = newest;
  }
  if (args[0] == "verify") {
    const std::string problem = tetra::ckpt::verify(dir);
    tetra::check(problem.empty(), problem);
    if (rank == 0) std::printf("%s: ok\n", dir.c_str());
  } else if (rank == 0) {
    std::printf("%s", tetra::ckpt::Reader(dir).describe().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The supervisor starts MPI jobs; it is not one.
  if (argc > 1 && std::string(argv[1]) == "launch")
    return tetra::run_launch(std::vector<std::string>(argv + 2, argv + argc));
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = 0;
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    const std::vector<std::string> args(argv + std::min(argc, 2), argv + argc);
    if (cmd == "train") {
      rc = train(args, rank);
    } else if (cmd == "ckpt") {
      tetra::agree(MPI_COMM_WORLD, [&] { rc = ckpt_command(args, rank); });
    } else if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      if (rank == 0) std::printf("%s", kUsage);
    } else {
      tetra::agree(MPI_COMM_WORLD, [&] {
        tetra::fail(cmd.empty() ? "no command given" : "unknown command '" + cmd + "'", "\n",
                    kUsage);
      });
    }
  } catch (const tetra::AgreedError& e) {  // every rank has it: rank 0 reports
    if (rank == 0) std::fprintf(stderr, "tetra: error: %s\n", e.what());
    rc = 2;
  } catch (const std::exception& e) {  // this rank's alone: report it and stop the job
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    std::string msg = dynamic_cast<const tetra::Error*>(&e) != nullptr
                          ? e.what()
                          : std::string("internal error: ") + e.what();
    if (world > 1) msg = "rank " + std::to_string(rank) + ": " + msg;
    std::fprintf(stderr, "tetra: error: %s\n", msg.c_str());
    std::fflush(stderr);
    if (world > 1) MPI_Abort(MPI_COMM_WORLD, 2);
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
