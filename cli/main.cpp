// tetra: the command-line program. `tetra train [flags]` trains, `tetra plan` predicts a
// layout's memory, traffic and time (or checks them against a run), `tetra ckpt` inspects or
// verifies checkpoints, `tetra plot` draws SVG pictures of a run or a schedule, `tetra
// generate` continues a prompt, `tetra tokenize` shows a tokenizer's ids, `tetra launch`
// supervises a training command, `tetra sweep` runs every layout of N ranks and `tetra lab`
// teaches by predicting and measuring (cli/options.hpp parses them all, jobs/ runs the last
// three). Every error ends with one "tetra: error: ..." line from rank 0, each setting it names
// worded as the user gave it (settings::worded: --heads, or the --config file's model.heads),
// and its exit status (util/error.hpp's table) on every rank: 2 for bad input, 65 for a
// diverged run (a non-finite loss or gradient norm), 73 for a checkpoint directory that
// another job holds; a pre-empted run (SIGTERM, SIGUSR1) checkpoints and exits 75; SIGINT,
// SIGTERM or SIGHUP ends any other command with one line and 130.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/manifest.hpp"
#include "cli/generate.hpp"
#include "cli/options.hpp"
#include "cli/plan_command.hpp"
#include "parallel/agree.hpp"
#include "parallel/placement.hpp"
#include "parallel/watchdog.hpp"
#include "plot/plot.hpp"
#include "train/preempt.hpp"
#include "train/trainer.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"
#include "util/same_path.hpp"
#include "util/stop_signal.hpp"

namespace {

// Before anything that relies on MPI's picture of the machines (the watchdog's shared memory,
// the GPU choice): each host's node-local ranks must be unique. A pre-emption signal from here
// on is honoured at the first step boundary.
int train(const tetra::TrainConfig& opt) {
  const tetra::Hosts hosts = tetra::gather_hosts(MPI_COMM_WORLD);
  tetra::agree(MPI_COMM_WORLD, [&] {
    const std::string problem = tetra::node_rank_problem(hosts);
    tetra::check(problem.empty(), problem);
  });
  const tetra::PreemptSignals signals;
  tetra::watchdog::start(MPI_COMM_WORLD, opt.run.timeout);
  tetra::Trainer trainer(opt, MPI_COMM_WORLD);
  return trainer.run();
}

// tetra ckpt inspect|verify|config DIR. DIR is one checkpoint (step_..., or any directory with a
// manifest) or a checkpoint directory, meaning its newest complete checkpoint.
void ckpt_command(const tetra::CkptOptions& opt, int rank) {
  std::string dir = opt.dir;
  // Either is a directory: a missing path or a FIFO is said as such.
  const std::string not_dir = tetra::input_dir_problem(dir);
  tetra::check(not_dir.empty(), "'", dir,
               "' is not a checkpoint or a checkpoint directory: ", not_dir);
  // A step_N directory is one checkpoint even when its manifest is gone: say so.
  const std::filesystem::path leaf = std::filesystem::path(dir).lexically_normal();
  const bool one = std::filesystem::exists(dir + "/manifest.json") ||
                   tetra::ckpt::parse_step_dir_name(
                       (leaf.filename().empty() ? leaf.parent_path() : leaf).filename().string());
  if (!one) {
    std::vector<std::string> warnings;
    const std::string newest = tetra::ckpt::find_latest(dir, &warnings);
    for (const std::string& w : warnings)
      if (rank == 0) std::fprintf(stderr, "tetra: warning: %s\n", w.c_str());
    if (newest.empty()) {  // none of the line `latest` names; another line's may verify
      const std::vector<std::string> others = tetra::ckpt::verifying_checkpoints(dir);
      tetra::check(!others.empty(), "no complete checkpoint that verifies in '", dir, "'");
      tetra::fail("no checkpoint of the line being trained in '", dir, "' verifies; ", others[0],
                  " verifies but is another line's (name it to ", opt.action, " it)");
    }
    dir = newest;
  }
  if (opt.action == "verify") {
    const std::string problem = tetra::ckpt::verify(dir);
    tetra::check(problem.empty(), problem);
    if (rank == 0) std::printf("%s: ok\n", dir.c_str());
  } else if (opt.action == "config") {
    // The manifest alone (checked against its checksum): the shards are not needed.
    const tetra::ckpt::RunState s = tetra::ckpt::read_manifest(dir).state;
    tetra::json recorded = s.config;
    recorded["layout"] = s.layout;
    // A checkpoint older than the schema records the model's shape only (model_to_json), whose
    // keys are the model settings' names.
    if (!recorded.contains("model")) recorded["model"] = s.model;
    const std::string toml = tetra::recorded_config_toml(recorded);
    if (rank == 0) std::printf("%s", toml.c_str());
  } else if (rank == 0) {
    std::printf("%s", tetra::ckpt::Reader(dir).describe().c_str());
  }
}

// tetra plan: the report (--json: its object), or with --compare the plan beside a run's metrics
// (exit 1 when they disagree). Rank 0 prints and draws; the plan needs no other rank.
int plan_command(const tetra::PlanOptions& opt, int rank) {
  tetra::PlanOutput out;
  tetra::agree(MPI_COMM_WORLD, [&] {
    // The picture may not replace what the plan reads.
    for (const auto& [flag, input] :
         {std::pair{"--compare", &opt.compare}, {"--config", &opt.train.origin.file}}) {
      const std::string clash = tetra::same_file_problem("--draw", opt.draw, flag, *input);
      tetra::check(clash.empty(), clash);
    }
    out = tetra::plan_output(opt, rank == 0);
  });
  if (rank == 0) std::printf("%s", tetra::settings::worded(out.text, opt.train.origin).c_str());
  return out.status;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (tetra::starts_jobs(args)) return tetra::run_job_command(args);
  // srun without PMIx: MPI_Init would fail on every task with pages of text.
  if (const std::string problem = tetra::srun_problem(); !problem.empty()) {
    const char* task = std::getenv("SLURM_PROCID");  // one task speaks
    if (task == nullptr || std::atoi(task) == 0)
      std::fprintf(stderr, "tetra: error: %s\n", problem.c_str());
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // A signal ends a command at once, with one line and status 130 (util/stop_signal.hpp);
  // tetra train replaces this with its own handlers, which checkpoint first.
  const tetra::StopOnSignal stop(rank == 0);
  int rc = 0;
  tetra::CommandLine cli;
  try {
    // Every rank parses the same arguments; a refusal is agreed so that rank 0 alone says it.
    tetra::agree(MPI_COMM_WORLD, [&] { cli = tetra::parse_command_line(args); });
    if (!cli.help.empty()) {
      if (rank == 0) std::printf("%s", cli.help.c_str());
    } else if (cli.print_config) {
      if (rank == 0) std::printf("%s", cli.printed_config.c_str());
    } else if (cli.command == "train") {
      rc = train(cli.train);
    } else if (cli.command == "plan") {
      rc = plan_command(cli.plan, rank);
    } else if (cli.command == "ckpt") {
      tetra::agree(MPI_COMM_WORLD, [&] { ckpt_command(cli.ckpt, rank); });
    } else if (cli.command == "plot") {
      tetra::agree(MPI_COMM_WORLD, [&] {
        if (rank == 0) tetra::plot_command(cli.plot);
      });
    } else if (cli.command == "tokenize") {  // one rank reads and writes; the others wait
      tetra::agree(MPI_COMM_WORLD, [&] {
        if (rank == 0) tetra::tokenize_command(cli.tokenize);
      });
    } else if (cli.command == "generate") {  // one rank is enough; the others wait
      std::string text;
      tetra::agree(MPI_COMM_WORLD, [&] {
        if (rank == 0) text = tetra::generate_text(cli.generate);
      });
      // By length: a generated token may be a NUL byte, where a C string would end.
      if (rank == 0) {
        const std::string out = cli.generate.prompt + text + "\n";
        std::fwrite(out.data(), 1, out.size(), stdout);
      }
    }
  } catch (const tetra::AgreedError& e) {  // every rank has it: rank 0 reports
    const std::string msg = tetra::settings::worded(e.what(), cli.origin());
    if (rank == 0) std::fprintf(stderr, "tetra: error: %s\n", msg.c_str());
    rc = e.status;
  } catch (const std::exception& e) {  // this rank's alone: report it and stop the job
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    std::string msg = tetra::settings::worded(tetra::error_text(e), cli.origin());
    if (world > 1) msg = "rank " + std::to_string(rank) + ": " + msg;
    std::fprintf(stderr, "tetra: error: %s\n", msg.c_str());
    std::fflush(stderr);
    rc = tetra::exit_status_of(e);
    if (world > 1) MPI_Abort(MPI_COMM_WORLD, rc);
  }
  rc = tetra::checked_stdout(rc);
  MPI_Finalize();
  return rc;
}
