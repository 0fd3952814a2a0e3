// Flags a command accepts, it honours (issue 38, class 5): walking each flag of tetra plan,
// tetra sweep, generate, tokenize, plot, lab and launch (from the CLI11 app that parses them), each
// given a value other than its default either changes the command's output or is refused.
// tetra sweep --preset plans, enumerates and measures the preset's model (it used the default
// one), tetra plan --init-from plans the init model (it ignored the flag, even for a path that
// does not exist), generate refuses --top-k and --seed at temperature 0 (greedy: no draw for
// them to change), lab --list refuses what would choose or run a lesson, train refuses
// --keep, --trace-steps, --eval-batches, --export-dtype, --data-field, --skip-bad-lines,
// --schedule, --vpp, --pp-balance, --sp, --resume never, --allow-change and the llama3 RoPE
// settings without what they set (a checkpoint directory, a trace, validation data, an export,
// JSONL documents, a pipeline, a TP group, a checkpoint to resume, llama3 RoPE), and sweep, lab
// and serve pass a run only the layout flags of its layout. tetra train's walk:
// test_flags_train.cpp.
#include <doctest/doctest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "../support/corpus.hpp"
#include "../support/flag_walk.hpp"
#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"
#include "cli/options.hpp"
#include "cli/plan_command.hpp"
#include "data/token_cache.hpp"
#include "data/tokenizer.hpp"
#include "jobs/lab_build.hpp"
#include "jobs/layout_run.hpp"
#include "jobs/serve_api.hpp"
#include "plan/layouts.hpp"

using namespace tetra::test;

namespace {

// tetra plan's output for `args`, or "refused: WHY". The plan is of 4 ranks (TP 2 x DP 2), so
// that the links and the nodes take part in it.
std::string plan_text(std::vector<std::string> args, bool four_ranks = true) {
  if (four_ranks) args.insert(args.begin(), {"--tp", "2", "--dp", "2"});
  args.insert(args.begin(), "plan");
  try {
    return tetra::plan_output(tetra::parse_command_line(args).plan, false).text;
  } catch (const tetra::Error& e) {
    return std::string("refused: ") + e.what();
  }
}

// Walks every flag of the subcommand at `path` ({"generate"}, {"ckpt", "verify"}) but --help,
// positionals and `skip` (the base's own, each checked by its caller): given its
// other_value, each is refused (exit 2, one line) or changes what `run` gives for the base.
// `run(args)` runs the base with args and gives its output (stdout, the files it wrote).
// Returns how many flags it walked.
int walk_flags(const std::vector<std::string>& path, const std::set<std::string>& skip,
               const std::function<Spawned(const std::string& args)>& run) {
  tetra::CommandLine into;
  const std::unique_ptr<CLI::App> app = tetra::make_app(into);
  CLI::App* sub = app.get();
  for (const std::string& name : path) sub = sub->get_subcommand(name);
  const Spawned base = run("");
  CAPTURE(base.err);
  REQUIRE(base.status == 0);
  int walked = 0;
  for (const CLI::Option* opt : sub->get_options()) {
    const std::string flag = flag_of(*opt);
    if (flag == "--help" || opt->get_lnames().empty() || skip.count(flag)) continue;
    std::string args;
    for (const std::string& a : other_value(*opt)) args += " " + a;
    CAPTURE(args);
    const Spawned r = run(args);
    CAPTURE(r.err);
    if (r.status == 2)
      CHECK(count(r.err, "tetra: error:") == 1);
    else
      CHECK((r.status == 0 && r.out != base.out));
    ++walked;
  }
  return walked;
}

// `command` run in `dir` (empty before each run): its stdout, then every file it left there.
Spawned output_in(const TempDir& dir, const std::string& command) {
  std::filesystem::remove_all(dir.path);
  std::filesystem::create_directories(dir.path);
  Spawned r = spawn("cd " + dir.path.string() + " && " + command);
  r.out += tree_listing(dir.path);
  return r;
}

}  // namespace

TEST_CASE("flags honoured: every flag of tetra plan changes its output or is refused") {
  tetra::CommandLine into;
  const std::unique_ptr<CLI::App> app = tetra::make_app(into);
  const std::string base = plan_text({});
  REQUIRE(base.find("refused") != 0);
  int walked = 0;
  for (const CLI::Option* opt : app->get_subcommand("plan")->get_options()) {
    const std::string flag = flag_of(*opt);
    if (flag == "--help" || flag == "--config" || flag == "--draw" || flag == "--tp" ||
        flag == "--dp")
      continue;  // below, and the baseline's own
    const std::vector<std::string> args = other_value(*opt);
    CAPTURE(flag);
    CAPTURE(args);
    const std::string text = plan_text(args);
    CHECK(text != base);
    ++walked;
  }
  CHECK(walked > 60);
  CHECK(plan_text({"--dp", "2"}, false) != base);
  CHECK(plan_text({"--tp", "2"}, false) != base);
  // --achieved-tflops and --mfu price D tokens: with --tokens they change the output.
  const std::string priced = plan_text({"--tokens", "1e12"});
  CHECK(plan_text({"--tokens", "1e12", "--achieved-tflops", "100"}) != priced);
  CHECK(plan_text({"--tokens", "1e12", "--mfu", "30"}) != priced);
  // --draw's output is its picture; --config's, its keys.
  TempDir d;
  const std::string svg = d / "s.svg";
  tetra::plan_output(tetra::parse_command_line({"plan", "--pp", "2", "--draw", svg}).plan, true);
  CHECK(std::filesystem::file_size(svg) > 0);
  std::ofstream(d / "c.toml") << "[model]\nlayers = 4\n";
  CHECK(plan_text({"--config", d / "c.toml"}) != base);
}

TEST_CASE(
    "flags honoured: tetra plan --init-from plans the init model, and refuses a missing one") {
  TempDir d;
  const std::string m = d / "m";
  REQUIRE(
      spawn(tetra_bin() + " train" + tiny_model_flags({.layers = 3, .steps = 1}) + " --export " + m)
          .status == 0);
  // The init model's shape, as the flags for it give it (less the line of flags that change
  // nothing).
  const auto report = [](const std::string& text) {
    return text.substr(0, text.find("given, and no part"));
  };
  const std::string init = plan_text({"--init-from", m});
  CHECK(report(init) ==
        report(plan_text({"--layers", "3", "--dim", "32", "--heads", "4", "--kv-heads", "2",
                          "--ffn-dim", "64", "--vocab", "256"})));
  CHECK(init != plan_text({}));
  expect_refusal(tetra_bin() + " plan --init-from " + (d / "missing"), d / "missing");
  // The flags' own shape, where it disagrees, is refused as tetra train refuses it.
  CHECK(plan_text({"--init-from", m, "--layers", "2"}).find("layers` 2 disagrees with the init") !=
        std::string::npos);
}

TEST_CASE("flags honoured: every flag of tetra sweep changes its dry run or is refused") {
  const std::string sweep = tetra_bin() + " sweep --dry-run --ranks 2";
  const Spawned base = spawn(sweep);
  REQUIRE(base.status == 0);
  tetra::CommandLine into;
  const std::unique_ptr<CLI::App> app = tetra::make_app(into);
  int walked = 0;
  for (const CLI::Option* opt : app->get_subcommand("sweep")->get_options()) {
    const std::string flag = flag_of(*opt);
    if (flag == "--help" || flag == "--dry-run" || flag == "--ranks") continue;
    std::string args;
    for (const std::string& a : other_value(*opt)) args += " " + a;
    CAPTURE(args);
    const Spawned r = spawn(sweep + args);
    CAPTURE(r.err);
    CHECK((r.status == 2 || r.out != base.out));
    if (r.status == 2) CHECK(count(r.err, "tetra: error:") == 1);
    ++walked;
  }
  CHECK(walked > 30);
}

TEST_CASE("flags honoured: tetra sweep --preset plans and runs the preset's model") {
  const Spawned r = spawn(tetra_bin() + " sweep --dry-run --ranks 1 --preset bench");
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("layers 8, dim 512, heads 8 (kv 4, head_dim 64), ffn 1536") !=
        std::string::npos);
  CHECK(r.out.find("6 steps per run") != std::string::npos);
  CHECK(r.out.find("tetra train --preset bench") != std::string::npos);
}

// One exported model (bytes), trained for the cases below.
struct ExportedModel {
  TempDir d;
  std::string m = d / "m";
  ExportedModel() {
    REQUIRE(
        spawn(tetra_bin() + " train" + tiny_model_flags({.steps = 1}) + " --export " + m).status ==
        0);
  }
};

TEST_CASE("flags honoured: every flag of tetra generate changes its text or is refused") {
  const ExportedModel model;
  const std::string generate =
      tetra_bin() + " generate --init-from " + model.m + " --prompt the --tokens 8";
  const auto run = [&](const std::string& args) { return spawn(generate + args); };
  CHECK(walk_flags({"generate"}, {"--init-from", "--prompt", "--tokens"}, run) == 4);
  // The base's own.
  const std::string base = run("").out;
  CHECK(spawn(tetra_bin() + " generate --init-from " + model.m + " --prompt a --tokens 8").out !=
        base);
  CHECK(spawn(tetra_bin() + " generate --init-from " + model.m + " --prompt the --tokens 9").out !=
        base);
  // Sampling: there the seed and the top k change the draws.
  const Spawned sampled = run(" --temperature 1");
  REQUIRE(sampled.status == 0);
  CHECK(run(" --temperature 1 --seed 7").out != sampled.out);
  CHECK(run(" --temperature 1 --top-k 1").out != sampled.out);
  for (const std::string flag : {"--seed", "--top-k"})
    expect_refusal(generate + " " + flag + " 3", flag + " goes with --temperature above 0");
}

TEST_CASE("flags honoured: every flag of tetra tokenize changes its output or is refused") {
  if (!tetra::data::have_sentencepiece()) {
    MESSAGE("skipped: this build has no SentencePiece");
    return;
  }
  const TempDir d;
  const tetra::data::TokenizerModel model =
      tetra::data::tokenizer_model("bpe:300", corpus_dir(d) + "/corpus.txt");
  tetra::data::save_tokenizer_model(model);
  const std::string tokenize =
      "printf \"the cat sees the bird\" | " + tetra_bin() + " tokenize --tokenizer " + model.path;
  const auto run = [&](const std::string& args) { return spawn(tokenize + args); };
  CHECK(walk_flags({"tokenize"}, {"--tokenizer"}, run) == 2);
}

TEST_CASE("flags honoured: every flag of tetra plot changes its picture or is refused") {
  const TempDir d, work;
  const std::string run_jsonl = d / "run.jsonl", trace = d / "trace.json";
  REQUIRE(spawn(tetra_bin() + " train" + tiny_model_flags({.steps = 3}) + " --metrics " +
                run_jsonl + " --trace " + trace)
              .status == 0);
  const std::string plot = tetra_bin() + " plot --out s.svg ";
  const std::pair<std::string, std::string> bases[] = {
      {"--schedule", "--schedule 1f1b --pp 2"},
      {"--loss", "--loss " + run_jsonl},
      {"--barrier", "--barrier " + run_jsonl},
      {"--trace", "--trace " + trace},
  };
  for (const auto& [flag, base] : bases) {
    CAPTURE(base);
    const auto run = [&](const std::string& args) { return output_in(work, plot + base + args); };
    std::set<std::string> own = {flag, "--out"};
    if (flag == "--schedule") own.insert("--pp");
    CHECK(walk_flags({"plot"}, own, run) == 10 - int(own.size()));
  }
  // The base's own: another schedule, another PP, another output file, another step.
  const auto schedule = [&](const std::string& args) {
    return output_in(work, plot + "--schedule " + args).out;
  };
  CHECK(schedule("gpipe --pp 2") != schedule("1f1b --pp 2"));
  CHECK(schedule("1f1b --pp 3") != schedule("1f1b --pp 2"));
  CHECK(output_in(work, tetra_bin() + " plot --out t.svg --schedule 1f1b --pp 2").out !=
        schedule("1f1b --pp 2"));
  const std::string barrier = plot + "--barrier " + run_jsonl;
  CHECK(output_in(work, barrier + " --step 0").out != output_in(work, barrier).out);
}

TEST_CASE("flags honoured: tetra ckpt takes a checkpoint and no flag; tetra lab --list's flags") {
  // ckpt inspect|verify|config take DIR alone: a flag added later joins the walks here.
  tetra::CommandLine into;
  const std::unique_ptr<CLI::App> app = tetra::make_app(into);
  for (const char* action : {"inspect", "verify", "config"}) {
    CAPTURE(action);
    std::vector<std::string> names;
    for (const CLI::Option* opt :
         app->get_subcommand("ckpt")->get_subcommand(action)->get_options())
      names.push_back(flag_of(*opt));
    CHECK(names == std::vector<std::string>{"--help", "DIR"});
  }
  const std::string lab = tetra_bin() + " lab --list --lang en";
  const auto run = [&](const std::string& args) { return spawn(lab + args); };
  CHECK(walk_flags({"lab"}, {"--list", "--lang"}, run) == 7);
  CHECK(run("").out != spawn(tetra_bin() + " lab --list --lang zh").out);
  expect_refusal(lab + " dp", "--list takes no LESSON");
}

TEST_CASE("flags honoured: every flag of tetra launch changes what it says or is refused") {
  const TempDir d;
  std::ofstream(d / "fail.sh") << "#!/bin/sh\necho attempt\nexit 1\n";
  // A command that fails every time: the restarts and the notes between them show.
  const auto run = [&](const std::string& args) {
    Spawned r = spawn(tetra_bin() + " launch" + args + " -- sh " + (d / "fail.sh"));
    if (r.status == 1) r.status = 0;  // the command's failure, as asked
    r.out += r.err;
    return r;
  };
  CHECK(walk_flags({"launch"}, {}, run) == 2);
}

TEST_CASE("flags honoured: tetra train refuses settings of what the run does not do") {
  const std::string train = tetra_bin() + " train" + tiny_model_flags({.steps = 2});
  const std::pair<std::string, std::string> cases[] = {
      {"--keep 5", "--keep needs --ckpt-dir"},
      {"--ckpt-every 1", "--ckpt-every needs --ckpt-dir"},
      {"--trace-steps 3", "--trace-steps needs --trace"},
      {"--eval-batches 8", "--eval-batches needs --val-data or --val-split"},
      {"--eval-every 1", "--eval-every needs --val-data or --val-split"},
      {"--export-dtype bf16", "--export-dtype needs --export"},
      {"--data-field body", "--data-field needs JSONL documents in --data or --val-data"},
      {"--skip-bad-lines", "--skip-bad-lines needs JSONL documents in --data or --val-data"},
      // A pipeline of one stage, a TP group of one rank, a run with no checkpoints.
      {"--schedule gpipe", "--schedule needs --pp above 1"},
      {"--vpp 2", "--vpp needs --pp above 1"},
      {"--pp-balance ends", "--pp-balance needs --pp above 1"},
      {"--sp", "--sp needs --tp above 1"},
      {"--resume never", "--resume never needs --ckpt-dir"},
      {"--allow-change steps", "--allow-change needs a checkpoint to resume"},
      {"--rope-original-context 64", "--rope-original-context needs --rope-type llama3"},
  };
  for (const auto& [flags, why] : cases) expect_refusal(train + flags, why);
  // The same settings from a --config file, worded as its keys.
  const TempDir d;
  std::ofstream(d / "c.toml") << "[layout]\nsp = true\n";
  expect_refusal(train + "--config " + (d / "c.toml"), "c.toml: layout.sp needs --tp above 1");
}

TEST_CASE("flags honoured: sweep, lab and serve pass a run only the layout flags of its layout") {
  // Every layout of a sweep over TP, CP, PP and DP with and without SP, two schedules and two
  // virtual stages: its command line parses, as tetra train would, to its own layout.
  const tetra::TrainArgs train = tetra::train_args();
  tetra::SweepOptions o =
      tetra::parse_command_line({"sweep", "--ranks", "4", "--layers", "4", "--global-batch", "8",
                                 "--sp", "both", "--schedule", "gpipe,interleaved", "--vpp", "1,2",
                                 "--dry-run"})
          .sweep;
  const tetra::plan::Layouts all =
      tetra::plan::enumerate_layouts(4, o.train.run_spec(), o.train.model, o.choices);
  int pp1 = 0, tp1 = 0;
  for (const tetra::plan::Setup& s : all.valid) {
    const tetra::LayoutConfig& l = s.spec.layout;
    std::vector<std::string> cmd = tetra::train_command(o, train, s.spec, 4, "m.jsonl");
    cmd.erase(cmd.begin(), std::find(cmd.begin(), cmd.end(), "train") + 1);
    CAPTURE(tetra::plan::layout_id(s.spec));
    tetra::TrainConfig got;
    REQUIRE_NOTHROW(got = train.parse(cmd));
    CHECK(tetra::settings::to_json(tetra::kLayoutKeys, got.layout) ==
          tetra::settings::to_json(tetra::kLayoutKeys, l));
    pp1 += l.pp == 1;
    tp1 += l.tp == 1;
  }
  CHECK(pp1 > 0);
  CHECK(tp1 > 0);
  // A lesson's configuration whose layout has no part for its schedule or SP: left out.
  tetra::TrainConfig c = tetra::lab::tiny(2, 32, 4, 2, 64, 16, 4, 1);
  c.layout.schedule = "gpipe";
  c.layout.sp = true;
  const tetra::lab::Setup lesson = tetra::lab::setup(train, c, 1);
  CHECK(lesson.keys.count("layout.schedule") == 0);
  CHECK(lesson.keys.count("layout.sp") == 0);
  CHECK(lesson.keys.count("model.layers") == 1);
  // tetra serve's form, which sets every field: those of a layout without them left out, the
  // others passed on.
  const auto form = [](int tp, int pp) {
    return tetra::json{{"layout",
                        {{"tp", tp},
                         {"pp", pp},
                         {"sp", true},
                         {"schedule", "gpipe"},
                         {"vpp", 1},
                         {"pp_balance", "even"}}}};
  };
  const auto joined = [](const std::vector<std::string>& args) {
    std::string out;
    for (const std::string& a : args) out += a + " ";
    return out;
  };
  CHECK(joined(tetra::serve::plan_arguments(form(1, 1))) == "--tp=1 --pp=1 ");
  CHECK(joined(tetra::serve::plan_arguments(form(2, 2))) ==
        "--tp=2 --pp=2 --sp --vpp=1 --schedule=gpipe --pp-balance=even ");
}
