// Flags tetra train accepts, it honours (issue 38, class 5): every flag of tetra train's CLI11
// app, given a value other than its default on the tiny model for 2 steps, either changes what
// the run gives or is refused with one `tetra: error:` line. What is compared fits the flag: the
// start-up report (the layout, the model, the batch, the layers per rank), the step lines with
// their times taken out, the metrics' deterministic numbers (losses, bytes per group, peak
// memory, the bubble's formula), the files written, the export's bytes, the steps traced.
// Layout flags run on two ranks, where they take part; a flag that needs another (--keep needs
// --ckpt-dir) gets it in both runs. A flag added to tetra train is walked with other_value on
// the base run, so it fails here until it changes the run, is refused, or joins kNotShown.
#include <doctest/doctest.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../support/corpus.hpp"
#include "../support/flag_walk.hpp"
#include "../support/jsonl.hpp"
#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"
#include "../support/tokenizer_files.hpp"
#include "cli/options.hpp"

using namespace tetra::test;
using tetra::json;
namespace fs = std::filesystem;

namespace {

// Flags whose effect cannot show in a 2-step run on the CPU, why, and what checks them instead.
const std::map<std::string, std::string> kNotShown = {
    {"--timeout",
     "the watchdog's limit: a run whose collectives never block never meets it "
     "(test_input_files: a hang under --timeout 2 is caught)"},
    {"--ckpt-async",
     "the same checkpoints, written in the background (test_ckpt_async: each holds its step's "
     "state, a kill during the write leaves the one before)"},
    {"--comm",
     "on the CPU auto is MPI, so mpi changes nothing; nccl needs --device cuda (refused below), "
     "which tools/gpu_check.sh runs"},
};

// The parts of a run the cases compare.
enum class Part { Any, Status, Header, Steps, Metrics, Files, Export, Trace, Overlap };

struct Observed {
  int status = -1;
  std::string error;     // the `tetra: error:` lines
  std::string header;    // stdout before the first step line (all of it for a run without one)
  std::string steps;     // stdout from the first step line on, times taken out
  std::string metrics;   // m.jsonl's records less their times
  std::string files;     // the names written, and what each is
  std::string exported;  // e.safetensors' bytes (its hash)
  std::string traced;    // the steps t.json traced
  bool queued = false;   // some collective ran on the communication thread (t.json's lane)

  std::string part(Part p) const {
    switch (p) {
      case Part::Status:
        return std::to_string(status) + error + steps;
      case Part::Header:
        return header;
      case Part::Steps:
        return steps;
      case Part::Metrics:
        return metrics;
      case Part::Files:
        return files;
      case Part::Export:
        return exported;
      case Part::Trace:
        return traced;
      case Part::Overlap:
        return queued ? "queued" : "none";
      default:
        return std::to_string(status) + error + header + steps + metrics + files + exported +
               traced;
    }
  }
};

// A step or summary line without what the clock decides: a number with a unit of time or a
// share (5.1 ms, 0s, 12453 tok/s, 1.26%) is '#', the share of communication hidden (which a
// step may have or not), a straggler's note and the wait per rank are cut, spaces are one.
std::string untimed(std::string line) {
  if (const size_t s = line.find(" | straggler"); s != std::string::npos) line.resize(s);
  if (line.rfind("wait per rank", 0) == 0) return "wait per rank";
  static const std::regex hidden(R"( \(\+[^)]*hidden\))");
  static const std::regex timed(R"([0-9][0-9.e+-]*\s*(ms|s|tok/s|%)(?![A-Za-z]))");
  static const std::regex spaces(" +");
  line = std::regex_replace(line, hidden, "");
  return std::regex_replace(std::regex_replace(line, timed, "#$1"), spaces, " ");
}

Observed observe(const fs::path& dir, const Spawned& r) {
  Observed o;
  o.status = r.status;
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);)
    if (line.find("tetra: error:") != std::string::npos) o.error += line + "\n";
  std::istringstream out(r.out);
  bool stepping = false;
  for (std::string line; std::getline(out, line);) {
    stepping = stepping || line.rfind("step ", 0) == 0;
    (stepping ? o.steps : o.header) += (stepping ? untimed(line) : line) + "\n";
  }
  if (fs::exists(dir / "m.jsonl"))
    for (json j : jsonl_records((dir / "m.jsonl").string())) {
      for (const char* timed :
           {"step_ms", "compute_ms", "wait_ms", "tokens_per_s", "mfu", "hfu", "comm_share",
            "comm_exposed_ms", "comm_hidden_ms", "bubble", "straggler"})
        j.erase(timed);
      o.metrics += j.dump() + "\n";
    }
  std::istringstream tree(tree_listing(dir));
  for (std::string line; std::getline(tree, line);) {
    o.files += line.substr(0, line.find(": file ")) + "\n";
    if (line.rfind("e.safetensors", 0) == 0) o.exported += line + "\n";
  }
  if (fs::exists(dir / "t.json")) {
    std::set<std::string> steps;
    const json trace = parsed_json(slurp((dir / "t.json").string()));
    for (const json& e : trace["traceEvents"]) {
      if (e.value("cat", "") == "step") steps.insert(e.value("name", ""));
      // Whether any ran hidden is the clock's to say (on a loaded machine none may); whether
      // the queue ran them is the flag's.
      o.queued = o.queued || e.value("cat", "") == "comm queued";
    }
    for (const std::string& s : steps) o.traced += s + "\n";
  }
  return o;
}

// One flag's case: the base run with `with` (and without `drop`), and the same with `args`.
struct Case {
  std::string args;          // the flag and its value
  Part part;                 // what must change
  std::string with = "";     // settings both runs take (those the flag needs)
  int ranks = 1;             // 2 for a flag of the layout
  std::string prepare = "";  // a shell line run in the empty directory before each run
  std::string drop = "";     // a base flag left out of both runs
  std::string refused = "";  // instead: refused, with these words
};

// The runs: the tiny model for 2 steps, its metrics and its export, in an empty directory.
class Runs {
 public:
  const TempDir in, work;  // inputs; the directory each run writes into
  const std::string base =
      tiny_model_flags({.steps = 2}) + "--metrics m.jsonl --export e.safetensors";
  int spawned = 0;

  // The base flags (less `drop` and those `args` gives), then `args`.
  std::string flags(const Case& c, bool walked) const {
    std::string defaults = base;
    if (!c.drop.empty()) {
      const size_t at = defaults.find(c.drop);
      REQUIRE(at != std::string::npos);
      defaults.erase(at, c.drop.size());
    }
    return with_defaults(defaults, c.with + (walked ? " " + c.args : ""));
  }

  const Observed& run(const Case& c, bool walked) {
    const std::string command =
        (c.ranks > 1 ? mpirun(c.ranks) : "") + tetra_bin() + " train " + flags(c, walked);
    const std::string key = c.prepare + " && " + command;
    if (const auto it = seen_.find(key); it != seen_.end()) return it->second;
    fs::remove_all(work.path);
    fs::create_directories(work.path);
    if (!c.prepare.empty())
      REQUIRE(spawn("cd " + work.path.string() + " && " + c.prepare).status == 0);
    ++spawned;
    const Spawned r = spawn("cd " + work.path.string() + " && " + command, 60);
    return seen_[key] = observe(work.path, r);
  }

 private:
  std::map<std::string, Observed> seen_;
};

}  // namespace

TEST_CASE("flags honoured: every flag of tetra train changes its run or is refused") {
  Runs runs;
  const std::string in = runs.in.path.string();
  // The inputs: text, JSONL documents (a "body" beside each "text"), documents with bad lines,
  // a tokenizer.json, a --config file, an exported model and a checkpoint of step 1.
  corpus_dir(runs.in);
  {
    std::ofstream docs(runs.in / "docs.jsonl"), bad(runs.in / "bad.jsonl");
    for (int i = 0; i < 200; ++i) {
      const std::string text = "the cat sees the bird " + std::to_string(i);
      docs << json{{"text", text}, {"body", "a dog follows " + std::to_string(i * 7)}}.dump()
           << "\n";
      bad << json{{"text", text}}.dump() << "\n" << (i == 3 ? kBadJsonl : "");
    }
    json tokenizer = byte_level(kTheMerges);
    tokenizer["added_tokens"] = {added(260, "<|endoftext|>", true)};
    std::ofstream(runs.in / "tok.json") << tokenizer.dump();
    std::ofstream(runs.in / "c.toml") << "[optimizer]\nlr = 0.001\n";
  }
  REQUIRE(spawn(tetra_bin() + " train" + tiny_model_flags({.steps = 1}) + "--export " + in +
                "/model --ckpt-dir " + in + "/ck0")
              .status == 0);
  const std::string corpus = " --data " + in + "/corpus.txt", ck0 = "cp -r " + in + "/ck0 ck";

  // The flags that need more than other_value on the base run.
  const std::multimap<std::string, Case> cases = {
      // The preset's steps and lr show where the base gives no --steps.
      {"--preset", {"--preset bench", Part::Steps, "", 1, "", "--steps 2 "}},
      // The layout, on two ranks (the base: DP 2); on one, what needs more is refused.
      {"--tp", {"--tp 2", Part::Metrics, "", 2}},
      {"--cp", {"--cp 2", Part::Metrics, "", 2}},
      {"--pp", {"--pp 2", Part::Metrics, "", 2}},
      // Its one accepted value is world / (TP * CP * PP), which 0 takes: it states the layout.
      {"--dp", {"--dp 2", Part::Any, "", 1, "", "", "must equal the number of ranks (1)"}},
      {"--sp", {"--sp", Part::Any, "", 1, "", "", "--sp needs --tp above 1"}},
      {"--sp", {"--sp", Part::Metrics, "--tp 2", 2}},
      {"--vpp", {"--vpp 2", Part::Any, "", 1, "", "", "--vpp needs --pp above 1"}},
      {"--vpp", {"--vpp 2", Part::Metrics, "--pp 2 --layers 4", 2}},
      {"--schedule",
       {"--schedule zb-h1", Part::Any, "", 1, "", "", "--schedule needs --pp above 1"}},
      {"--schedule", {"--schedule zb-h1", Part::Metrics, "--pp 2", 2}},
      {"--pp-balance",
       {"--pp-balance ends", Part::Any, "", 1, "", "", "--pp-balance needs --pp above 1"}},
      {"--pp-balance", {"--pp-balance ends", Part::Header, "--pp 2 --vpp 2 --layers 6", 2}},
      {"--zero", {"--zero 3", Part::Metrics, "", 2}},
      {"--overlap", {"--overlap off", Part::Overlap, "--trace t.json", 2}},
      // Llama 3's RoPE scaling: its settings need --rope-type llama3.
      {"--rope-factor",
       {"--rope-factor 16", Part::Any, "", 1, "", "", "--rope-factor needs --rope-type llama3"}},
      {"--rope-factor", {"--rope-factor 16", Part::Metrics, "--rope-type llama3"}},
      {"--rope-low-freq-factor",
       {"--rope-low-freq-factor 2", Part::Any, "", 1, "", "",
        "--rope-low-freq-factor needs --rope-type llama3"}},
      {"--rope-low-freq-factor", {"--rope-low-freq-factor 2", Part::Metrics, "--rope-type llama3"}},
      {"--rope-high-freq-factor",
       {"--rope-high-freq-factor 8", Part::Any, "", 1, "", "",
        "--rope-high-freq-factor needs --rope-type llama3"}},
      {"--rope-high-freq-factor",
       {"--rope-high-freq-factor 8", Part::Metrics, "--rope-type llama3"}},
      {"--rope-original-context",
       {"--rope-original-context 16384", Part::Any, "", 1, "", "",
        "--rope-original-context needs --rope-type llama3"}},
      {"--rope-original-context",
       {"--rope-original-context 16384", Part::Metrics, "--rope-type llama3"}},
      {"--doc-mask", {"--doc-mask", Part::Steps, " --data " + in + "/docs.jsonl"}},
      {"--init-from", {"--init-from " + in + "/model", Part::Steps}},
      {"--steps", {"--steps 3", Part::Steps}},
      // The cosine's floor, which a run without warmup reaches at its last step.
      {"--min-lr", {"--min-lr 0", Part::Steps, "--warmup 0"}},
      {"--data", {corpus, Part::Steps}},
      {"--data-field", {"--data-field body", Part::Steps, " --data " + in + "/docs.jsonl"}},
      {"--skip-bad-lines", {"--skip-bad-lines", Part::Status, " --data " + in + "/bad.jsonl"}},
      {"--val-data", {"--val-data " + in + "/corpus.txt", Part::Steps}},
      {"--val-split", {"--val-split 0.25", Part::Steps}},
      {"--eval-every", {"--eval-every 1", Part::Steps, "--val-split 0.25"}},
      {"--eval-batches", {"--eval-batches 1", Part::Steps, "--val-split 0.25"}},
      {"--tokenizer", {"--tokenizer " + in + "/tok.json", Part::Steps, corpus}},
      {"--comm", {"--comm nccl", Part::Any, "", 1, "", "", "--comm nccl needs --device cuda"}},
      {"--ckpt-every", {"--ckpt-every 1", Part::Files, "--ckpt-dir ck"}},
      {"--keep", {"--keep 1", Part::Files, "--ckpt-dir ck --ckpt-every 1"}},
      {"--resume", {"--resume never", Part::Any, "", 1, "", "", "--resume never needs --ckpt-dir"}},
      {"--resume", {"--resume never", Part::Steps, "--ckpt-dir ck --allow-change steps", 1, ck0}},
      {"--resume", {"--resume ck/step_00000001 --allow-change steps", Part::Steps, "", 1, ck0}},
      {"--allow-change",
       {"--allow-change steps", Part::Any, "", 1, "", "", "--allow-change needs a checkpoint"}},
      {"--allow-change", {"--allow-change steps", Part::Status, "--ckpt-dir ck", 1, ck0}},
      {"--inject-failure", {"--inject-failure 0@1", Part::Status}},
      {"--trace-steps", {"--trace-steps 1", Part::Trace, "--trace t.json --steps 3"}},
      {"--peak-tflops", {"--peak-tflops 2", Part::Header}},
      {"--config", {"--config " + in + "/c.toml", Part::Steps}},
  };

  tetra::CommandLine into;
  const std::unique_ptr<CLI::App> app = tetra::make_app(into);
  std::set<std::string> flags;
  int walked = 0;
  for (const CLI::Option* opt : app->get_subcommand("train")->get_options()) {
    const std::string flag = flag_of(*opt);
    if (flag == "--help") continue;
    flags.insert(flag);
    std::vector<Case> mine;
    for (auto [it, end] = cases.equal_range(flag); it != end; ++it) mine.push_back(it->second);
    if (mine.empty() && !kNotShown.count(flag)) {
      std::string args;
      for (const std::string& a : other_value(*opt)) args += " " + a;
      mine.push_back({args, Part::Any});
    }
    for (const Case& c : mine) {
      CAPTURE(c.args);
      CAPTURE(c.with);
      CAPTURE(c.ranks);
      const Observed base = runs.run(c, false);
      const Observed got = runs.run(c, true);
      CAPTURE(got.error);
      if (!c.refused.empty()) {
        CHECK(got.status == 2);
        CHECK(count(got.error, "tetra: error:") == 1);
        CHECK(got.error.find(c.refused) != std::string::npos);
      } else if (c.part == Part::Any) {  // other_value: refused, or any part changed
        if (got.status == 2) {
          CHECK(count(got.error, "tetra: error:") == 1);
        } else {
          CHECK(base.status == 0);
          CHECK(got.status == 0);
          CHECK(got.part(Part::Any) != base.part(Part::Any));
        }
      } else {
        CAPTURE(base.error);
        if (c.part != Part::Status) {
          CHECK(base.status == 0);
          CHECK(got.status == 0);
        }
        CHECK(got.part(c.part) != base.part(c.part));
      }
    }
    ++walked;
  }
  CHECK(walked > 60);
  // Every case and every line of the table is a flag of tetra train's.
  for (const auto& [flag, c] : cases) CHECK_MESSAGE(flags.count(flag), flag);
  for (const auto& [flag, why] : kNotShown) CHECK_MESSAGE(flags.count(flag), flag);
  // The base runs give the same parts each time: what differs is the flag's.
  const Observed again = runs.run({"", Part::Any, "--overlap on", 2}, false);
  CHECK(again.part(Part::Any) == runs.run({"", Part::Any, "", 2}, false).part(Part::Any));
  MESSAGE(runs.spawned, " runs of tetra train");
}
