// Flags a command accepts, it honours (issue 38, class 5): walking each flag of tetra plan,
// tetra sweep, generate, tokenize, plot, lab and launch (from the CLI11 app that parses them), each
// given a value other than its default either changes the command's output or is refused.
// tetra sweep --preset plans, enumerates and measures the preset's model (it used the default
// one), tetra plan --init-from plans the init model (it ignored the flag, even for a path that
// does not exist), generate refuses --top-k and --seed at temperature 0 (greedy: no draw for
// them to change), lab --list refuses what would choose or run a lesson, train refuses
// --keep, --trace-steps, --eval-batches, --export-dtype, --data-field and --skip-bad-lines
// without what they set (a checkpoint directory, a trace, validation data, an export, JSONL
// documents). tetra train's walk is not here yet.
#include <doctest/doctest.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../support/corpus.hpp"
#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"
#include "cli/options.hpp"
#include "cli/plan_command.hpp"
#include "data/token_cache.hpp"
#include "data/tokenizer.hpp"

using namespace tetra::test;

namespace {

// An option's flag, listed in plan's --help or not (CLI11 names a hidden option "").
std::string flag_of(const CLI::Option& opt) {
  return opt.get_lnames().empty() ? opt.get_name() : "--" + opt.get_lnames().front();
}

// A value for `opt` other than its default, from what --help shows of it: a switch takes none,
// a choice (a|b|c) another choice, a number its double (1 for 0), anything else a word.
std::vector<std::string> other_value(const CLI::Option& opt) {
  const std::string flag = flag_of(opt), shown = opt.get_default_str();
  if (opt.get_expected_max() == 0) return {flag};
  const std::string metavar = opt.get_type_name();
  if (metavar.find('|') != std::string::npos) {  // a choice none of the defaults shown
    std::vector<std::string> choices;
    std::istringstream words(metavar);
    for (std::string c; std::getline(words, c, '|');) choices.push_back(c);
    for (auto c = choices.rbegin(); c != choices.rend(); ++c)
      if (("|" + shown + "|").find("|" + *c + "|") == std::string::npos) return {flag, *c};
  }
  char* end = nullptr;
  const double x = std::strtod(shown.c_str(), &end);
  if (!shown.empty() && *end == '\0') {
    if (x == 0) return {flag, "1"};
    const bool whole = shown.find_first_of(".eE") == std::string::npos;
    return {flag, whole ? std::to_string(int64_t(x) * 2) : std::to_string(x * 2)};
  }
  return {flag, "word"};
}

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
  };
  for (const auto& [flags, why] : cases) expect_refusal(train + flags, why);
}
