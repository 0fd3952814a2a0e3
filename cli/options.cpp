#include "cli/options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "cli/cli_flags.hpp"
#include "plan/machine.hpp"
#include "util/error.hpp"

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
std::vector<const CLI::App*> chain(const CLI::App& app) {
  std::vector<const CLI::App*> apps = {&app};
  while (!apps.back()->get_subcommands().empty())
    apps.push_back(apps.back()->get_subcommands().front());
  return apps;
}

std::string path_of(const std::vector<const CLI::App*>& apps) {
  std::string path;
  for (const CLI::App* a : apps) path += (path.empty() ? "" : " ") + a->get_name();
  return path;
}

// The first argument no (sub)command took, innermost command first (an unknown flag stays
// with the subcommand it follows, a stray word may go up to its parent); empty if none.
std::string leftover(const std::vector<const CLI::App*>& apps) {
  for (auto a = apps.rbegin(); a != apps.rend(); ++a)
    if (!(*a)->remaining().empty()) return (*a)->remaining().front();
  return {};
}

std::string unexpected(const std::vector<const CLI::App*>& apps, const std::string& arg) {
  const bool wants_command = apps.back()->get_require_subcommand_min() > 0;
  const std::string kind = arg.rfind('-', 0) == 0 ? "unknown flag"
                           : wants_command        ? "unknown command"
                                                  : "unexpected argument";
  return kind + " '" + arg + "' (see " + path_of(apps) + " --help)";
}

// Whether CLI11's message is about option `opt`: it starts with the option's name, with or
// without its dashes ("--dim: ...", "sp was given ..."). The rest of the message follows.
bool about(const std::string& what, const CLI::Option& opt, std::string& rest) {
  for (const std::string& name : {opt.get_name(), opt.get_name().substr(2)}) {
    if (what.rfind(name + ": ", 0) == 0)
      rest = what.substr(name.size() + 2);
    else if (what.rfind(name + " ", 0) == 0)
      rest = what.substr(name.size() + 1);
    else
      continue;
    return true;
  }
  return false;
}

// CLI11's error in tetra's words, naming the flag: "--dim takes an integer (got 'x')",
// "--dim needs a value (D)", "--dim is given more than once".
std::string reworded(const CLI::App& app, const CLI::ParseError& e) {
  const std::string what = e.what();
  const std::vector<const CLI::App*> apps = chain(app);
  for (const CLI::App* a : apps) {
    for (const CLI::Option* opt :
         a->get_options([](const CLI::Option* o) { return !o->get_positional(); })) {
      const std::string name = opt->get_name();
      std::string rest;
      if (!about(what, *opt, rest)) continue;
      if (dynamic_cast<const CLI::ValidationError*>(&e)) return name + " " + rest;
      if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
        if (opt->count() > 1) return name + " is given more than once";
        if (opt->get_expected_max() == 0) return name + " takes no value";
        return name + " needs a value (" + opt->get_type_name() + ")";
      }
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
        return path_of(apps) + " needs " + opt->get_name();
  }
  return path_of(apps) + ": " + what;
}

// The preset's model, except the fields whose flags were given.
void apply_preset(const std::string& name, TrainConfig& o) {
  const plan::Preset p = plan::preset_named(name);
  const auto set = [&](const char* flag, auto& field, auto value) {
    if (!o.given.count(flag)) field = value;
  };
  set("--layers", o.model.layers, p.model.layers);
  set("--dim", o.model.dim, p.model.dim);
  set("--heads", o.model.heads, p.model.heads);
  set("--kv-heads", o.model.kv_heads, p.model.kv_heads);
  set("--ffn-dim", o.model.ffn_dim, p.model.ffn_dim);
  set("--seq-len", o.model.seq_len, p.model.seq_len);
  set("--rope-theta", o.model.rope_theta, p.model.rope_theta);
  set("--vocab", o.model.data_vocab, p.data_vocab);
}

}  // namespace

std::unique_ptr<CLI::App> make_app(CommandLine& into) {
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
  add_train_options(*train, into.train);

  CLI::App* plan = app->add_subcommand(
      "plan", "predict a layout's memory, traffic and time, or check them against a run");
  configure(*plan);
  plan->footer(
      "tetra plan [train flags] [--preset NAME] [--gpu NAME]: parameters, FLOPs, the rank\n"
      "grid, memory per rank, bytes per group and their time, the bubble, step time and MFU.\n"
      "The layout is TP x CP x PP x DP (--dp defaults to 1). Example:\n"
      "  tetra plan --preset llama3-405b --dtype bf16 --tp 8 --pp 16 --dp 128 \\\n"
      "             --global-batch 2048 --micro-batch 1 --tokens 15.6e12");
  add_train_options(*plan, into.plan.train);
  add_plan_options(*plan, into.plan);

  CLI::App* launch = app->add_subcommand(
      "launch", "supervise a training command: rerun it with --resume auto after a failure");
  configure(*launch);
  launch->footer(
      "tetra launch [--restarts N] [--quiet] -- COMMAND ARGS...\n"
      "Runs COMMAND; when it fails, reruns it with --resume auto. Attempt k sees\n"
      "TETRA_RESTART=k. Step times come from the command's --metrics file (a temporary one\n"
      "is added when it has none); the summary gives lost steps and goodput.\n"
      "Example: tetra launch --restarts 3 -- mpirun -np 16 build/tetra train ...");
  add_launch_options(*launch, into.launch);

  CLI::App* generate =
      app->add_subcommand("generate", "continue a prompt with a model (one rank, with a KV cache)");
  configure(*generate);
  add_generate_options(*generate, into.generate);

  CLI::App* ckpt =
      app->add_subcommand("ckpt", "inspect DIR | verify DIR: describe or check a checkpoint");
  configure(*ckpt);
  ckpt->require_subcommand(1);
  const std::pair<const char*, const char*> actions[] = {
      {"inspect", "describe a checkpoint: step, model, layout, shards"},
      {"verify", "check a checkpoint's files against its manifest"}};
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
  return app;
}

CommandLine parse_command_line(std::vector<std::string> args) {
  CommandLine cli;
  // What follows launch's first "--" is the command to supervise, not tetra's to read.
  bool separated = false;
  if (!args.empty() && args[0] == "launch") {
    const auto dash = std::find(args.begin(), args.end(), "--");
    separated = dash != args.end();
    if (separated) {
      cli.launch.command.assign(dash + 1, args.end());
      args.erase(dash, args.end());
    }
  }
  const std::unique_ptr<CLI::App> app = make_app(cli);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    app->parse(args);
  } catch (const CLI::CallForHelp&) {
    cli.help = app->help();
    return cli;
  } catch (const CLI::ParseError& e) {
    fail(reworded(*app, e));
  }
  const std::vector<const CLI::App*> apps = chain(*app);
  if (const std::string arg = leftover(apps); !arg.empty()) fail(unexpected(apps, arg));
  cli.command = apps[1]->get_name();
  if (cli.command == "train" || cli.command == "plan") {
    TrainConfig& o = cli.command == "train" ? cli.train : cli.plan.train;
    for (const CLI::Option* opt : apps[1]->get_options())
      if (opt->count() > 0) o.given.insert(opt->get_name());
    if (cli.command == "plan") {
      if (!cli.plan.request.preset.empty()) apply_preset(cli.plan.request.preset, o);
      if (o.layout.dp == 0) o.layout.dp = 1;
      cli.plan.request.peak_tflops = o.output.peak_tflops;
    }
    resolve(o);
  } else if (cli.command == "launch") {
    check(separated, "tetra launch needs '--' before the command (see tetra launch --help)");
    check(!cli.launch.command.empty(), "no command after '--' (see tetra launch --help)");
  } else if (cli.command == "ckpt") {
    cli.ckpt.action = apps[2]->get_name();
  } else if (cli.command == "plot") {
    const PlotOptions& o = cli.plot;
    const auto given = [&](const char* flag) { return apps[1]->count(flag) > 0; };
    const int inputs =
        given("--loss") + given("--trace") + given("--barrier") + given("--schedule");
    check(inputs == 1, "tetra plot needs exactly one of --loss, --trace, --barrier or --schedule",
          inputs ? " (got " + std::to_string(inputs) + ")" : "", " (see tetra plot --help)");
    check(!o.out.empty(), "tetra plot needs --out FILE");
    for (const char* flag : {"--pp", "--vpp", "--micro-batches"})
      check(o.schedule.empty() ? !given(flag) : true, flag, " goes with --schedule");
    check(!given("--step") || !o.trace.empty() || !o.barrier.empty(),
          "--step goes with --trace or --barrier");
  }
  return cli;
}

TrainConfig parse_train_options(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"train"};
  all.insert(all.end(), args.begin(), args.end());
  return parse_command_line(all).train;
}

}  // namespace tetra
