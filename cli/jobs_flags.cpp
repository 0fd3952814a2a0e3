// The flags of the commands that start jobs (jobs/): tetra launch's, tetra lab's, tetra serve's,
// and tetra sweep's (tetra train's that a sweep passes on to its runs, as their tables say: not
// the layout and the ZeRO stage, which the sweep decides, nor one run's own checkpoints,
// outputs and validation; plus the lists to cross, the machine and how to run).
#include <algorithm>

#include "cli/apply_preset.hpp"
#include "cli/cli_flags.hpp"
#include "jobs/job.hpp"
#include "jobs/lab.hpp"
#include "jobs/lab_exercise.hpp"
#include "jobs/lab_lessons.hpp"
#include "jobs/launch.hpp"
#include "jobs/serve.hpp"
#include "jobs/sweep.hpp"
#include "parallel/schedule.hpp"
#include "plan/machine.hpp"
#include "plan/setup.hpp"
#include "util/error.hpp"

namespace tetra::cli {

namespace {

// A validator of a comma-separated list whose items `ok` accepts; `what` words the refusal.
CLI::Validator list_of(bool (*ok)(const std::string&), const std::string& what) {
  return CLI::Validator(
      [ok, what](std::string& s) -> std::string {
        for (const std::string& item : split_commas(s))
          if (!ok(item)) return "takes a comma-separated list of " + what + " (got '" + s + "')";
        return "";
      },
      "");
}

bool is_zero(const std::string& s) {
  return s == "1" || s == "2" || s == "3";
}
bool is_schedule(const std::string& s) {
  return std::count(kScheduleNames.begin(), kScheduleNames.end(), s) > 0;
}
bool is_vpp(const std::string& s) {
  return !s.empty() && s.size() < 4 && s.find_first_not_of("0123456789") == std::string::npos &&
         std::stoi(s) >= 1;
}

}  // namespace

void add_job_options(CLI::App& app, JobOptions& o) {
  add(app, "--launcher", o.launcher, "CMD",
      "how to start N ranks, {n} standing for N (e.g. 'srun -n {n}')");
  add(app, "--run-timeout", o.run_timeout, "SECONDS",
      "stop a run after this long and report it timed out (0: never)")
      ->check(kNonNegative);
}

void add_launch_options(CLI::App& app, LaunchOptions& o) {
  add(app, "--restarts", o.restarts, "N", "reruns allowed after failures")->check(kNonNegative);
  add_switch(app, "--quiet", o.quiet,
             "no notes on stderr between attempts (the summary is still printed)");
}

void add_lab_options(CLI::App& app, LabOptions& o) {
  app.add_option("LESSON", o.lesson, "a lesson's name or number (default: every lesson in order)")
      ->type_name("");
  app.add_option("--answer", o.answers,
                 "answer the lesson's question with X instead of asking (for scripts and tests); "
                 "given twice, the second is the second try after a wrong first")
      ->type_name("X")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->default_str("\"\"");
  add_choice(app, "--lang", o.lang, {"en", "zh"},
             "the lessons' language (default: zh where LC_ALL, LC_MESSAGES or LANG starts with "
             "zh, else en)")
      ->default_str("locale");
  add_switch(app, "--list", o.list, "list the lessons");
  add(app, "--out", o.out, "DIR",
      "keep every run's log and metrics here (default: a temporary directory, removed)");
  std::string names;
  for (const lab::Exercise& e : lab::exercises()) names += (names.empty() ? "" : ", ") + e.name;
  add(app, "--exercise", o.exercise, "NAME",
      "copy tetra's sources into --dir with one function a lesson teaches emptied, for you to "
      "write: " +
          names);
  add_switch(app, "--check", o.check,
             "build the exercise's copy in --dir and grade it against one rank");
  add(app, "--dir", o.dir, "DIR", "where the exercise's copy is");
  add_job_options(app, o.job);
  app.footer(
      "tetra lab [LESSON] [--answer X [--answer Y]] [--lang en|zh]: each lesson explains one\n"
      "idea of 4D parallelism with its formula and asks you to predict a number; a wrong answer\n"
      "is diagnosed (or gets a hint) and tried once more. Then it runs the layout on this\n"
      "machine's cores and shows your answer beside the formula's and the measured one, the\n"
      "working and the code that does it. Examples:\n"
      "  tetra lab --list\n"
      "  tetra lab dp\n"
      "  tetra lab pp --answer 25% --answer 20%\n"
      "  tetra lab 6nd --lang zh\n"
      "  tetra lab --exercise tp_column_backward --dir ex; tetra lab --check --dir ex");
}

void finish_lab_options(const CLI::App& app, LabOptions& o) {
  check_job_options(o.job);
  const bool exercise = app.count("--exercise") > 0;
  check(!(exercise && o.check),
        "--exercise makes an exercise's copy and --check grades it: one "
        "at a time");
  check(exercise || o.check || app.count("--dir") == 0, "--dir needs --exercise NAME or --check");
  if (exercise || o.check) {
    check(o.lesson.empty() && app.count("--answer") == 0 && !o.list && app.count("--out") == 0,
          exercise ? "--exercise" : "--check", " takes no LESSON, --answer, --list or --out");
    if (exercise) lab::find_exercise(o.exercise);
    check(!o.dir.empty(), "--dir is empty");
    return;
  }
  // The list runs nothing: what would choose or run a lesson changes nothing there.
  for (const char* what : {"LESSON", "--answer", "--out", "--launcher", "--run-timeout"})
    check(!o.list || app.count(what) == 0, "--list takes no ", what,
          ": it lists the lessons and runs none");
  if (!o.lesson.empty()) lab::find_lesson(lab::lessons(train_args()), o.lesson);
  if (app.count("--answer") == 0) return;
  check(!o.lesson.empty(), "--answer needs a LESSON: one lesson's question to answer");
  check(o.answers.size() <= 2, "--answer is given at most twice: a first try and a second");
  for (const std::string& a : o.answers) {
    double value = 0;
    check(parse_answer(a, value), "--answer takes a number (got '", a, "')");
  }
}

void add_serve_options(CLI::App& app, ServeOptions& o) {
  add(app, "--port", o.port, "N", "the port to listen on (0: any free one, printed)")
      ->check(rule(CLI::Range(0, 65535), "must be from 0 to 65535"));
  add(app, "--host", o.host, "ADDR",
      "the address to listen on, as the browser names it (requests naming another are "
      "refused)");
  add(app, "--max-ranks", o.max_ranks, "N", "the most ranks a run from the page may take")
      ->check(kAtLeast1);
  add(app, "--max-steps", o.max_steps, "N", "the most steps a run from the page may take")
      ->check(kAtLeast1);
  add_job_options(app, o.job);
  app.footer(
      "tetra serve [--port N] [--host ADDR]: prints its address with a token; open it in a\n"
      "browser. The planner as a calculator (every number tetra plan's), a button that trains\n"
      "the layout on this machine's CPU ranks and sets the measurement beside the plan, and\n"
      "tetra lab's lessons. Listens on 127.0.0.1 unless told; a run needs the token.\n"
      "Example: tetra serve --port 0");
}

void add_sweep_options(CLI::App& app, SweepOptions& o) {
  o.train.optimizer.steps = 5;  // a sweep's runs are short; --help shows this default
  add_train_options(app, o.train, nullptr, TrainFlagsFor::Sweep);
  for (const CLI::Option* opt : app.get_options()) o.train_flags.push_back(opt->get_name());
  app.get_option("--steps")->description(
      "steps of every run (the first warms up and is not timed)");

  app.option_defaults()->group("Layouts");
  add(app, "--ranks", o.ranks, "N", "ranks: every TP x CP x PP x DP = N that tetra accepts")
      ->check(rule(
          CLI::Range(int64_t(1), plan::kMaxPlanRanks),
          "must be from 1 to " + std::to_string(plan::kMaxPlanRanks) + ", the ranks tetra plans"))
      ->required();
  add(app, "--zero", o.zero, "LIST", "ZeRO stages to try, comma-separated (1,2,3)")
      ->check(list_of(is_zero, "1, 2 and 3"));
  add(app, "--schedule", o.schedules, "LIST",
      "pipeline schedules to try where PP > 1, comma-separated (gpipe,1f1b,interleaved,zb-h1)")
      ->check(list_of(is_schedule, "gpipe, 1f1b, interleaved and zb-h1"));
  add(app, "--vpp", o.vpp, "LIST", "virtual stages per rank to try under interleaved (1,2,...)")
      ->check(list_of(is_vpp, "whole numbers from 1"));
  add_choice(app, "--sp", o.sp, {"off", "on", "both"},
             "sequence parallelism where TP > 1: off, on, or both");

  app.option_defaults()->group("Machine");
  add_choice(app, "--gpu", o.machine.gpu, plan::machine_names(),
             "what fits and the plan's step time are for (default: cpu, or h100 under --device "
             "cuda)")
      ->default_str("cpu|h100");
  add(app, "--gpu-memory", o.machine.memory_gb, "GB", "memory per GPU (0: the --gpu's)")
      ->check(kNonNegative);
  add(app, "--nvlink", o.machine.nvlink_gbs, "GB/S", "bandwidth per GPU inside a node")
      ->check(kNonNegative);
  add(app, "--network", o.machine.network_gbs, "GB/S", "bandwidth per GPU between nodes")
      ->check(kNonNegative);
  add(app, "--gpus-per-node", o.machine.gpus_per_node, "N", "GPUs per node (0: the --gpu's)")
      ->check(kNonNegative);

  app.option_defaults()->group("Sweep");
  add(app, "--out", o.out, "DIR",
      "write sweep.jsonl, sweep.svg and each run's log and metrics (runs/) here");
  add_switch(app, "--dry-run", o.dry_run, "list the layouts and the plan's numbers; run nothing");
  add_job_options(app, o.job);
  app.footer(
      "tetra sweep --ranks N [train's model, batch and device flags] --out DIR\n"
      "Runs one rank, then every valid layout of N ranks for --steps steps, and ranks them by\n"
      "measured tokens/s: whether each matches one rank's losses, its MFU, communication and\n"
      "bubble, its bytes and peak memory beside tetra plan's. Example:\n"
      "  tetra sweep --ranks 8 --zero 1,3 --schedule 1f1b,interleaved --vpp 2 --sp both \\\n"
      "              --steps 5 --out sweep8");
}

void finish_sweep_options(const CLI::App& app, SweepOptions& o) {
  TrainConfig& t = o.train;
  for_each_section(t, [&](const auto&, const auto& table) {
    for (const auto& k : table.keys)
      if (std::count(o.train_flags.begin(), o.train_flags.end(), k.flag()) &&
          app.count(k.flag()) > 0)
        t.given.insert(table.name + "." + k.name);
  });
  // The sweep plans and measures the preset's model and batch, as each run trains them.
  if (!t.run.preset.empty()) apply_preset(t, nullptr);
  resolve(t);
  std::set<std::string> passed = t.given;
  passed.erase("optimizer.steps");
  o.pass = setting_args(t, passed);
  o.choices = {};
  o.choices.zero.clear();
  for (const std::string& z : split_commas(o.zero)) o.choices.zero.push_back(std::stoi(z));
  o.choices.schedules = split_commas(o.schedules);
  check(app.count("--vpp") == 0 ||
            std::count(o.choices.schedules.begin(), o.choices.schedules.end(), "interleaved") > 0,
        "--vpp goes with --schedule interleaved (V is the interleaved schedule's)");
  o.choices.vpp.clear();
  for (const std::string& v : split_commas(o.vpp)) o.choices.vpp.push_back(std::stoi(v));
  o.choices.sp = o.sp == "both" ? std::vector<bool>{false, true} : std::vector<bool>{o.sp == "on"};
  if (app.count("--gpu") == 0) o.machine.gpu = t.device.device == "cuda" ? "h100" : "cpu";
  o.machine.peak_tflops = t.output.peak_tflops;
  check_job_options(o.job);
  check(o.dry_run || !o.out.empty(), "tetra sweep needs --out DIR (or --dry-run)");
}

}  // namespace tetra::cli
