// Flags a command accepts, it honours (issue 38, class 5): walking each flag of tetra plan
// and tetra sweep (from the CLI11 app that parses them), each given a value other than its
// default either changes the command's output or is refused. tetra sweep --preset plans,
// enumerates and measures the preset's model (it used the default one), and tetra plan
// --init-from plans the init model (it ignored the flag, even for a path that does not exist).
#include <doctest/doctest.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"
#include "cli/options.hpp"
#include "cli/plan_command.hpp"

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
