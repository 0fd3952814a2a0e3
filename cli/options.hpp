// The command line of `tetra` (the CLI contract of docs/design.md): the options of each subcommand
// and the one CLI11 app that parses them and prints their --help.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/generate.hpp"
#include "cli/tokenize.hpp"
#include "jobs/lab.hpp"
#include "jobs/launch.hpp"
#include "jobs/serve.hpp"
#include "jobs/sweep.hpp"
#include "plan/plan_report.hpp"
#include "plot/plot.hpp"
#include "train/config.hpp"

namespace CLI {
class App;
}

namespace tetra {

// `tetra ckpt inspect|verify|config DIR`.
struct CkptOptions {
  std::string action;  // "inspect", "verify" or "config"
  std::string dir;
};

// `tetra plan [train flags] [--preset NAME] [--gpu NAME] ...`: the model, the layout and
// the batch as tetra train takes them, and the machine.
struct PlanOptions {
  TrainConfig train;
  plan::Request request;      // the preset and the machine (--peak-tflops is train's)
  std::string compare, draw;  // a metrics file to check; an SVG file to draw the schedule to
  bool json = false;          // --json: the plan as one JSON object (plan/plan_json.hpp)
};

struct CommandLine {
  // "train", "plan", "launch", "ckpt", "plot", "generate", "tokenize", "sweep", "lab" or
  // "serve"; empty
  // when help
  // was asked for
  std::string command;
  std::string help;  // the --help text asked for, else empty
  // train and plan: --config FILE, a configuration file (cli/config_file.hpp) whose keys give
  // the flags the command line does not; train: --print-config, and then the effective
  // configuration as TOML, to print instead of training.
  std::string config_file;
  bool print_config = false;
  std::string printed_config;
  TrainConfig train;
  PlanOptions plan;
  LaunchOptions launch;
  CkptOptions ckpt;
  PlotOptions plot;
  GenerateOptions generate;
  TokenizeOptions tokenize;
  SweepOptions sweep;
  LabOptions lab;
  ServeOptions serve;

  // Where train's or plan's settings came from (TrainConfig::origin): how an error words the
  // settings it names (settings::worded). Empty for the other commands, whose flags are all
  // on the command line.
  const settings::Origin& origin() const {
    static const settings::Origin none;
    return command == "train" ? train.origin : command == "plan" ? plan.train.origin : none;
  }
};

// Parses tetra's arguments (argv without the program name), and for train and plan the
// --config file they name. Throws tetra::Error with a one-line message naming the flag (or
// the file and the key) for an unknown flag or key, a missing, repeated or malformed value, a
// value out of range, or settings that contradict each other (each worded as it was given).
CommandLine parse_command_line(std::vector<std::string> args);

// parse_command_line({"train", args...}).train, for callers that build flag lists.
TrainConfig parse_train_options(const std::vector<std::string>& args);

// tetra train's parser and argument builder, for the jobs (jobs/train_args.hpp).
TrainArgs train_args();

// tetra plan's parser, for tetra serve: a page's settings are read as its flags.
PlanArgs plan_args();

// tetra launch, sweep, lab and serve (args[0]) start MPI jobs and are not one: main runs them
// before MPI_Init. run_job_command parses the arguments and hands the options to jobs/; returns the
// exit status, after one "tetra: error:" line on stderr for a refusal.
bool starts_jobs(const std::vector<std::string>& args);
int run_job_command(const std::vector<std::string>& args);

// A command's exit status once its standard output is checked: output errors are errors, so a
// command that succeeded but whose output did not all reach standard output (a full disk,
// /dev/full) says so in one "tetra: error:" line and exits 2. A failed command's status stands.
int checked_stdout(int status);

// A configuration a checkpoint records (TrainConfig's JSON, layout as laid out; older names
// read too) as a --config file: the settings that differ from their defaults set, the rest
// commented out, the preset left out (its values are recorded). Trains the same run.
std::string recorded_config_toml(const json& recorded);

// The CLI11 app behind parse_command_line: subcommands train, plan, launch, ckpt (inspect,
// verify) and plot, whose options write into `into`. Tests walk it to check every flag's --help.
std::unique_ptr<CLI::App> make_app(CommandLine& into);

}  // namespace tetra
