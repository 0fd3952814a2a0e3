#include "cli/options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <type_traits>
#include <utility>

#include "cli/apply_preset.hpp"
#include "cli/cli_flags.hpp"
#include "parallel/placement.hpp"
#include "util/error.hpp"
#include "util/output_file.hpp"

namespace tetra {

using namespace cli;

namespace {

// CLI11's help layout, but a switch shows its default too ("--sp [off]"), so that every
// flag in --help carries its default.
class Formatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (opt->get_expected_max() != 0 || opt->get_default_str().empty())
      return CLI::Formatter::make_option_opts(opt);
    return " [" + opt->get_default_str() + "]";
  }
};

// Settings every (sub)command shares. Extras are allowed so that tetra, not CLI11, words the
// error for an unknown flag (see leftover()); options refuse a second value.
void configure(CLI::App& app) {
  app.allow_extras();
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::Throw);
}

// The subcommands given, outermost first: {tetra, train} or {tetra, ckpt, verify}.
std::vector<CLI::App*> chain(CLI::App& app) {
  std::vector<CLI::App*> apps = {&app};
  while (!apps.back()->get_subcommands().empty())
    apps.push_back(apps.back()->get_subcommands().front());
  return apps;
}

std::string path_of(const std::vector<CLI::App*>& apps) {
  std::string path;
  for (const CLI::App* a : apps) path += (path.empty() ? "" : " ") + a->get_name();
  return path;
}

// The first argument no (sub)command took, innermost command first (an unknown flag stays
// with the subcommand it follows, a stray word may go up to its parent); empty if none.
std::string leftover(const std::vector<CLI::App*>& apps) {
  for (auto a = apps.rbegin(); a != apps.rend(); ++a)
    if (!(*a)->remaining().empty()) return (*a)->remaining().front();
  return {};
}

std::string unexpected(const std::vector<CLI::App*>& apps, const std::string& arg) {
  const bool wants_command = apps.back()->get_require_subcommand_min() > 0;
  const std::string kind = arg.rfind('-', 0) == 0 ? "unknown flag"
                           : wants_command        ? "unknown command"
                                                  : "unexpected argument";
  return kind + " '" + arg + "' (see " + path_of(apps) + " --help)";
}

// The option whose values failed their checks. Once the arguments are read, CLI11 checks
// and reduces the values of each option given, in the order the options were defined,
// outermost command first, marking each one done: the first given and not done failed.
CLI::Option* unfinished(const std::vector<CLI::App*>& apps) {
  for (CLI::App* a : apps)
    for (CLI::Option* opt : a->get_options())
      if (opt->count() > 0 && !opt->get_callback_run()) return opt;
  return nullptr;
}

// What opt's validators (tetra's, cli_flags.hpp) say of the first of its values they refuse,
// run in their order as CLI11 runs them: "must be at least 1 (got 0)"; empty if none.
std::string refusal(CLI::Option& opt) {
  for (std::string value : opt.results()) {
    for (int i = 0;; ++i) {
      CLI::Validator* v = nullptr;
      try {
        v = opt.get_validator(i);
      } catch (const CLI::OptionNotFound&) {
        break;
      }
      if (std::string words = (*v)(value); !words.empty()) return words;
    }
  }
  return {};
}

// An option's flag, listed in --help or not (CLI11 names an option kept out of --help "").
std::string flag_name(const CLI::Option& opt) {
  return opt.get_lnames().empty() ? opt.get_name() : "--" + opt.get_lnames().front();
}

// CLI11's error in tetra's words, from its type and the options' state rather than its text:
// "--dim takes an integer (got 'x')", "--dim needs a value (D)", "--dim is given more than
// once". `args` are the arguments as CLI11 was given them (last first) and `rest` those it
// had not read yet; `subject` names an option (its flag, or the file and key its value came
// from).
std::string reworded(CLI::App& app, const CLI::ParseError& e, const std::vector<std::string>& args,
                     const std::vector<std::string>& rest,
                     const std::function<std::string(const CLI::Option&)>& subject) {
  const std::vector<CLI::App*> apps = chain(app);
  const bool invalid = dynamic_cast<const CLI::ValidationError*>(&e) != nullptr;
  const bool mismatch = dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr;
  if (invalid || mismatch) {
    if (CLI::Option* opt = unfinished(apps)) {
      if (opt->count() > 1) return subject(*opt) + " is given more than once";
      if (const std::string words = invalid ? refusal(*opt) : ""; !words.empty())
        return subject(*opt) + " " + words;
    }
    // A mismatch while reading: CLI11 takes the arguments off the back of `rest`, and the
    // last one it took is a flag it found no value for, or a switch given a value.
    if (mismatch && rest.size() < args.size()) {
      const std::string& arg = args[rest.size()];
      const std::string name = arg.substr(0, arg.find('='));
      for (auto a = apps.rbegin(); a != apps.rend(); ++a)
        if (const CLI::Option* opt = (*a)->get_option_no_throw(name))
          return opt->get_expected_max() == 0
                     ? name + " takes no value"
                     : name + " needs a value (" + opt->get_type_name() + ")";
    }
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e)) {
    if (const std::string arg = leftover(apps); !arg.empty()) return unexpected(apps, arg);
    const CLI::App& last = *apps.back();
    if (last.get_require_subcommand_min() > 0) {
      if (apps.size() == 1) return "no command given (see tetra --help)";
      std::string names;
      for (const CLI::App* sub : last.get_subcommands([](const CLI::App*) { return true; }))
        names += (names.empty() ? "" : " or ") + sub->get_name();
      return path_of(apps) + " needs a command: " + names;
    }
    for (const CLI::Option* opt : last.get_options())
      if (opt->get_positional() && opt->count() == 0)
        return path_of(apps) + " needs " + flag_name(*opt);
  }
  return path_of(apps) + ": " + e.what();
}

// The flags of train and plan, as keys of a configuration file.
struct TrainSettings {
  Settings train, plan;
};

// --config FILE (train and plan) and --print-config (train).
void add_config_options(CLI::App& app, CommandLine& into, bool print) {
  app.option_defaults()->group("Configuration");
  add(app, "--config", into.config_file, "FILE.toml",
      "take the flags not given here from a TOML file, a key per flag in its section (as "
      "--print-config writes it)");
  if (print)
    add_switch(app, "--print-config", into.print_config,
               "write the effective configuration as TOML (for --config) and exit");
}

std::unique_ptr<CLI::App> build_app(CommandLine& into, TrainSettings* settings) {
  auto app = std::make_unique<CLI::App>(
      "tetra trains Llama-style transformers on N ranks laid out as TP x CP x PP x DP.", "tetra");
  auto formatter = std::make_shared<Formatter>();
  formatter->column_width(42);
  app->formatter(formatter);
  configure(*app);
  app->require_subcommand(1);

  CLI::App* train =
      app->add_subcommand("train", "train a model on N ranks laid out as TP x CP x PP x DP");
  configure(*train);
  train->footer(
      "[mpirun -np N] tetra train [OPTIONS]: the ranks are laid out as TP x CP x PP x DP\n"
      "(rank = tp + TP*(cp + CP*(pp + PP*dp))); the product must equal N.");
  add_train_options(*train, into.train, settings ? &settings->train : nullptr);
  add_config_options(*train, into, true);

  CLI::App* plan = app->add_subcommand(
      "plan", "predict a layout's memory, traffic and time, or check them against a run");
  configure(*plan);
  plan->footer(
      "tetra plan [train flags] [--preset NAME] [--gpu NAME]: parameters, FLOPs, the rank\n"
      "grid, memory per rank, bytes per group and their time, the bubble, step time and MFU.\n"
      "The layout is TP x CP x PP x DP (--dp defaults to 1). A preset is a whole run; a flag\n"
      "given beside it replaces that part. Examples:\n"
      "  tetra plan --preset llama3-405b             (Llama 3 405B on 16,384 H100s)\n"
      "  tetra plan --preset llama3-405b --dp 64     (the same on 8,192)");
  add_train_options(*plan, into.plan.train, settings ? &settings->plan : nullptr,
                    TrainFlagsFor::Plan);
  add_plan_options(*plan, into.plan);
  add_config_options(*plan, into, false);

  CLI::App* launch = app->add_subcommand(
      "launch", "supervise a training command: rerun it with --resume auto after a failure");
  configure(*launch);
  launch->footer(
      "tetra launch [--restarts N] [--quiet] -- COMMAND ARGS...\n"
      "Runs COMMAND; when it fails, reruns it with --resume auto. Attempt k sees\n"
      "TETRA_RESTART=k. Step times come from the command's metrics file (its --metrics, or\n"
      "its --config file's; a temporary one is added when it has none); the summary gives\n"
      "lost steps and goodput.\n"
      "Example: tetra launch --restarts 3 -- mpirun -np 16 build/tetra train ...");
  add_launch_options(*launch, into.launch);

  CLI::App* generate =
      app->add_subcommand("generate", "continue a prompt with a model (one rank, with a KV cache)");
  configure(*generate);
  add_generate_options(*generate, into.generate);

  CLI::App* tokenize = app->add_subcommand(
      "tokenize", "the ids of standard input's text under a tokenizer, or the text of ids");
  configure(*tokenize);
  tokenize->footer(
      "tetra tokenize --tokenizer tokenizer.json < text.txt       (ids, as a text file's)\n"
      "tetra tokenize --tokenizer DIR --document < doc.txt         (ids, as one document's)\n"
      "echo 15496 995 | tetra tokenize --tokenizer tokenizer.json --decode");
  add_tokenize_options(*tokenize, into.tokenize);

  CLI::App* ckpt = app->add_subcommand("ckpt",
                                       "inspect DIR | verify DIR | config DIR: describe, check or "
                                       "print the configuration of a checkpoint");
  configure(*ckpt);
  ckpt->require_subcommand(1);
  const std::pair<const char*, const char*> actions[] = {
      {"inspect", "describe a checkpoint: step, model, layout, shards"},
      {"verify", "check a checkpoint's files against its manifest"},
      {"config", "print the configuration a checkpoint records, as a --config file (TOML)"}};
  for (const auto& [name, help] : actions) {
    CLI::App* action = ckpt->add_subcommand(name, help);
    configure(*action);
    action
        ->add_option("DIR", into.ckpt.dir,
                     "a checkpoint (step_...) or a checkpoint directory, meaning its newest "
                     "complete checkpoint")
        ->type_name("")
        ->required();
  }

  CLI::App* plot = app->add_subcommand("plot",
                                       "draw a run's loss, a traced step, the barrier "
                                       "of a step or a pipeline schedule as SVG");
  configure(*plot);
  plot->footer(
      "tetra plot --loss run.jsonl --out loss.svg\n"
      "tetra plot --trace trace.json [--step N] --out step.svg\n"
      "tetra plot --barrier run.jsonl [--step N] --out barrier.svg\n"
      "tetra plot --schedule interleaved --pp 4 --vpp 2 --micro-batches 8 --out sched.svg");
  add_plot_options(*plot, into.plot);

  CLI::App* sweep = app->add_subcommand(
      "sweep", "run every layout of N ranks, check each against one rank, rank them by speed");
  configure(*sweep);
  add_sweep_options(*sweep, into.sweep);

  CLI::App* lab = app->add_subcommand(
      "lab", "lessons in 4D parallelism: predict a number, run the layout, compare");
  configure(*lab);
  add_lab_options(*lab, into.lab);

  CLI::App* serve = app->add_subcommand(
      "serve", "a local web page: the planner as a calculator, runs of its layout, the lessons");
  configure(*serve);
  add_serve_options(*serve, into.serve);
  return app;
}

}  // namespace

std::unique_ptr<CLI::App> make_app(CommandLine& into) {
  return build_app(into, nullptr);
}

namespace {

// One command line parsed into `cli` by an app of its own, which it returns with the settings
// of train and plan. `args` in command order; `file_args`, appended to them, came from the
// --config file `file`, and a refusal of one of their values names the file and the key.
std::unique_ptr<CLI::App> parse_into(CommandLine& cli, TrainSettings& settings,
                                     const std::vector<std::string>& args,
                                     const std::vector<std::string>& file_args = {},
                                     const std::string& file = "") {
  std::unique_ptr<CLI::App> app = build_app(cli, &settings);
  std::vector<std::string> all(args);
  all.insert(all.end(), file_args.begin(), file_args.end());
  std::reverse(all.begin(), all.end());  // CLI11 takes them last first
  std::vector<std::string> rest = all;
  try {
    app->parse(rest);
  } catch (const CLI::CallForHelp&) {
    cli.help = app->help();
  } catch (const CLI::ParseError& e) {
    std::set<std::string> from_file;
    for (const std::string& a : file_args) from_file.insert(a.substr(0, a.find('=')));
    const auto subject = [&](const CLI::Option& opt) {
      if (!from_file.count(flag_name(opt))) return flag_name(opt);
      for (const Setting& s : cli.command == "plan" ? settings.plan : settings.train)
        if (s.option == &opt) return file + ": " + s.key();
      return flag_name(opt);
    };
    fail(reworded(*app, e, all, rest, subject));
  }
  return app;
}

}  // namespace

namespace {

// The parse of parse_command_line once the command is known: the --config file read and the
// command line parsed again with its keys, the given settings and their origin, presets and
// resolve() for train and plan; each other command's checks.
void finish(CommandLine& cli, TrainSettings& settings, std::unique_ptr<CLI::App>& app,
            const std::vector<std::string>& args, bool separated) {
  const std::vector<CLI::App*> apps = chain(*app);
  if (cli.command == "train" || cli.command == "plan") {
    std::set<std::string> file_flags;      // the flags given by the --config file's keys
    if (apps[1]->count("--config") > 0) {  // --config "" too: refused
      // The file's keys for the flags the command line left out, read again with it.
      const std::string file = cli.config_file;
      const std::vector<std::string> file_args =
          config_file_args(file, cli.command == "plan" ? settings.plan : settings.train);
      for (const std::string& a : file_args) file_flags.insert(a.substr(0, a.find('=')));
      cli = CommandLine();
      settings = TrainSettings();
      cli.command = apps[1]->get_name();
      app = parse_into(cli, settings, args, file_args, file);
    }
    TrainConfig& o = cli.command == "train" ? cli.train : cli.plan.train;
    const Settings& flags = cli.command == "train" ? settings.train : settings.plan;
    for (const Setting& s : flags) {
      if (s.option->count() == 0) continue;
      o.given.insert(s.key());
      if (file_flags.count(s.flag())) o.origin.keys.insert(s.key());
    }
    // The file is an input too, which no output may replace (train/outputs.hpp).
    o.origin.file = cli.config_file;
    // tetra plan's own flags (the machine, the tokens, the rate), which a preset fills in
    // where they are not given: "plan.gpu".
    if (cli.command == "plan")
      for (const CLI::Option* opt : chain(*app)[1]->get_options()) {
        std::string name = flag_name(*opt).substr(2);
        std::replace(name.begin(), name.end(), '-', '_');
        if (opt->count() > 0 && flag_name(*opt) != "--config" &&
            std::none_of(flags.begin(), flags.end(),
                         [&](const Setting& s) { return s.option == opt; }))
          o.given.insert("plan." + name);
      }
    if (!o.run.preset.empty()) apply_preset(o, cli.command == "plan" ? &cli.plan.request : nullptr);
    if (cli.command == "plan") {
      if (o.layout.dp == 0) o.layout.dp = 1;
      cli.plan.request.peak_tflops = o.output.peak_tflops;
      // Both price D tokens: without them they would change nothing.
      for (const char* flag : {"--achieved-tflops", "--mfu"})
        check(chain(*app)[1]->count(flag) == 0 || cli.plan.request.tokens > 0, flag,
              " goes with --tokens D (the time and the cost of D tokens)");
    }
    resolve(o);
    if (cli.print_config) cli.printed_config = config_toml(flags, o.given);
  } else if (cli.command == "launch") {
    check(separated, "tetra launch needs '--' before the command (see tetra launch --help)");
    check(!cli.launch.command.empty(), "no command after '--' (see tetra launch --help)");
  } else if (cli.command == "sweep") {
    finish_sweep_options(*apps[1], cli.sweep);
  } else if (cli.command == "lab") {
    finish_lab_options(*apps[1], cli.lab);
  } else if (cli.command == "serve") {
    check_job_options(cli.serve.job);
  } else if (cli.command == "generate") {
    // At temperature 0 each token is the most likely one: no draw for these to change.
    for (const char* flag : {"--top-k", "--seed"})
      check(cli.generate.temperature > 0 || apps[1]->count(flag) == 0, flag,
            " goes with --temperature above 0 (sampling); at 0 each token is the most likely one");
  } else if (cli.command == "ckpt") {
    cli.ckpt.action = apps[2]->get_name();
  } else if (cli.command == "plot") {
    const PlotOptions& o = cli.plot;
    const auto given = [&](const char* flag) { return apps[1]->count(flag) > 0; };
    const int inputs =
        given("--loss") + given("--trace") + given("--barrier") + given("--schedule");
    check(inputs == 1, "tetra plot needs exactly one of --loss, --trace, --barrier or --schedule",
          inputs ? " (got " + std::to_string(inputs) + ")" : "", " (see tetra plot --help)");
    check(!o.json || !o.schedule.empty(), "--json goes with --schedule");
    check(!o.out.empty() || o.json, "tetra plot needs --out FILE");
    for (const char* flag : {"--pp", "--vpp", "--micro-batches"})
      check(o.schedule.empty() ? !given(flag) : true, flag, " goes with --schedule");
    // zb-v's two chunks per rank, as `layout.vpp` takes them in a run (train/config.hpp).
    if (o.schedule == "zb-v" && !given("--vpp")) cli.plot.vpp = 2;
    check(!given("--step") || !o.trace.empty() || !o.barrier.empty(),
          "--step goes with --trace or --barrier");
  }
}

}  // namespace

CommandLine parse_command_line(std::vector<std::string> args) {
  // What follows launch's first "--" is the command to supervise, not tetra's to read.
  std::vector<std::string> supervised;
  bool separated = false;
  if (!args.empty() && args[0] == "launch") {
    const auto dash = std::find(args.begin(), args.end(), "--");
    separated = dash != args.end();
    if (separated) {
      supervised.assign(dash + 1, args.end());
      args.erase(dash, args.end());
    }
  }
  CommandLine cli;
  TrainSettings settings;
  std::unique_ptr<CLI::App> app = parse_into(cli, settings, args);
  if (!cli.help.empty()) return cli;
  std::vector<CLI::App*> apps = chain(*app);
  if (const std::string arg = leftover(apps); !arg.empty()) fail(unexpected(apps, arg));
  cli.command = apps[1]->get_name();
  cli.launch.command = supervised;
  try {
    finish(cli, settings, app, args, separated);
  } catch (const Error& e) {
    // What the settings imply and how they agree (presets, resolve(), the jobs' checks), in
    // the user's words.
    throw Error(settings::worded(e.what(), cli.origin()), e.status);
  }
  return cli;
}

std::string recorded_config_toml(const json& recorded) {
  CommandLine cli;
  TrainSettings settings;
  const std::unique_ptr<CLI::App> app = build_app(cli, &settings);
  TrainConfig& c = cli.train;
  from_json(recorded, c);
  // A preset's values are in the record already: applied again, it would replace those that
  // equal a default.
  c.run.preset.clear();
  const json defaults = TrainConfig();
  const json values = c;
  std::set<std::string> chosen;
  for (const Setting& s : settings.train)
    if (values[s.section][s.name] != defaults[s.section][s.name]) chosen.insert(s.key());
  return config_toml(settings.train, chosen);
}

TrainConfig parse_train_options(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"train"};
  all.insert(all.end(), args.begin(), args.end());
  return parse_command_line(all).train;
}

TrainArgs train_args() {
  return {parse_train_options, cli::setting_args};
}

PlanArgs plan_args() {
  return {[](const std::vector<std::string>& args) {
    std::vector<std::string> all = {"plan"};
    all.insert(all.end(), args.begin(), args.end());
    CommandLine cli = parse_command_line(all);
    return PlanArgs::Parsed{cli.plan.train, cli.plan.request};
  }};
}

bool starts_jobs(const std::vector<std::string>& args) {
  return !args.empty() &&
         (args[0] == "launch" || args[0] == "sweep" || args[0] == "lab" || args[0] == "serve");
}

int run_job_command(const std::vector<std::string>& args) {
  try {
    check_not_a_rank("tetra " + args[0]);
    const CommandLine cli = parse_command_line(args);
    if (!cli.help.empty()) {
      std::printf("%s", cli.help.c_str());
      return checked_stdout(exit_status::kOk);
    }
    if (cli.command == "launch") return checked_stdout(run_launch(cli.launch, train_args()));
    if (cli.command == "sweep") return checked_stdout(run_sweep(cli.sweep, train_args()));
    if (cli.command == "serve")
      return checked_stdout(run_serve(cli.serve, train_args(), plan_args()));
    return checked_stdout(run_lab(cli.lab, train_args()));
  } catch (const std::exception& e) {
    // The jobs' own flags are all on the command line. Started as several ranks (refused):
    // one of them speaks.
    std::fflush(stdout);
    if (launcher_rank().rank == 0)
      std::fprintf(stderr, "tetra: error: %s\n", settings::worded(error_text(e)).c_str());
    return exit_status_of(e);
  }
}

int checked_stdout(int status) {
  if (status != exit_status::kOk) return status;  // its error said already
  const std::string problem = stdout_problem();
  if (problem.empty()) return status;
  std::fprintf(stderr, "tetra: error: %s\n", problem.c_str());
  return exit_status::kInput;
}

}  // namespace tetra
