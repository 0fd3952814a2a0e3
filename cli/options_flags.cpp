// Each subcommand's flags: names, value checks, defaults and --help text; tetra train's (and
// plan's and sweep's share of them) bound from the configuration's schema.
#include "cli/cli_flags.hpp"
#include "parallel/schedule.hpp"
#include "plan/machine.hpp"
#include "util/error.hpp"

namespace tetra::cli {

namespace {

using settings::Kind;

// A value's JSON, from the text its flag's validators passed on (canonical for an integer).
json from_text(Kind kind, const std::string& text) {
  switch (kind) {
    case Kind::Integer:
    case Kind::Unsigned:
      return std::stoll(text);
    case Kind::Number: {
      double x = 0;
      CLI::detail::lexical_cast(text, x);  // as CLI11 reads a double flag
      return x;
    }
    case Kind::List: {
      json names = json::array();
      for (const std::string& name : split_commas(text)) names.push_back(name);
      return names;
    }
    default:
      return text;
  }
}

// A value as its flag takes it ("" for an empty string), and as TOML (cli/config_file.hpp).
std::string arg_text(Kind kind, const json& v) {
  switch (kind) {
    case Kind::Integer:
      return std::to_string(v.get<int64_t>());
    case Kind::Unsigned:
      return toml_value(v.get<uint64_t>());
    case Kind::Number:
      return toml_value(v.get<double>());
    case Kind::Switch:
      return toml_value(v.get<bool>());
    case Kind::List: {
      std::string names;
      for (const json& name : v) names += (names.empty() ? "" : ",") + name.get<std::string>();
      return names;
    }
    default:
      return v.get<std::string>();
  }
}
std::string toml_text(Kind kind, const json& v) {
  return kind == Kind::Text || kind == Kind::Choice || kind == Kind::List
             ? toml_value(arg_text(kind, v))
             : arg_text(kind, v);
}

// --help's default: the field's value as CLI11 shows a default, "" marked as such.
std::string shown(Kind kind, const json& v) {
  switch (kind) {
    case Kind::Integer:
      return std::to_string(v.get<int64_t>());
    case Kind::Unsigned:
      return std::to_string(v.get<uint64_t>());
    case Kind::Number:
      return CLI::detail::to_string(v.get<double>());
    case Kind::Switch:
      return "off";
    default: {
      const std::string text = arg_text(kind, v);
      return text.empty() ? "\"\"" : text;
    }
  }
}

// A switch: given once, without a value, it turns the setting on.
template <typename S>
CLI::Option* add_key_switch(CLI::App& app, const std::string& flag, S& section,
                            const settings::Key<S>& k) {
  return app
      .add_flag_function(
          flag, [&section, &k](int64_t n) { k.set(section, n > 0); }, settings::worded(k.help))
      ->multi_option_policy(CLI::MultiOptionPolicy::Throw)
      ->disable_flag_override()
      ->default_str("off");
}

// The flag of key `k`, writing into `section` as its values are read.
template <typename S>
CLI::Option* add_key(CLI::App& app, S& section, const settings::Key<S>& k) {
  if (k.kind == Kind::Switch) return add_key_switch(app, k.flag(), section, k);
  CLI::Option* opt =
      app.add_option_function<std::string>(
             k.flag(),
             [&section, &k](const std::string& v) { k.set(section, from_text(k.kind, v)); },
             settings::worded(k.help))
          ->type_name(k.metavar)
          ->default_str(k.shown_default.empty() ? shown(k.kind, k.get(section)) : k.shown_default);
  if (k.kind == Kind::Integer) opt->transform(integer(k.min, k.max));
  // An unsigned field (the seed) takes any int64, a negative one wrapping around.
  if (k.kind == Kind::Unsigned) opt->transform(integer<int64_t>());
  if (k.kind == Kind::Number) opt->check(finite());
  if (k.kind == Kind::Choice) opt->check(one_of(k.choices));
  if (k.check)
    opt->check(CLI::Validator([check = k.check](std::string& s) { return check(s); }, ""));
  return opt;
}

}  // namespace

void add_train_options(CLI::App& app, TrainConfig& o, Settings* settings, TrainFlagsFor for_) {
  for_each_section(o, [&](auto& section, const auto& table) {
    app.option_defaults()->group(table.group);
    for (const auto& k : table.keys) {
      if (for_ == TrainFlagsFor::Sweep && !*k.swept) continue;
      CLI::Option* opt = add_key(app, section, k);
      const std::string key = table.name + "." + k.name;
      if (for_ == TrainFlagsFor::Plan && (table.name == "data" || table.name == "checkpoint" ||
                                          (table.name == "output" && key != "output.peak_tflops")))
        opt->group("");  // taken, not listed
      if (!settings) continue;
      const auto value = [&section, &k] { return k.get(section); };
      settings->push_back({opt, table.name, k.name,
                           [value, kind = k.kind] { return toml_text(kind, value()); }, k.kind});
    }
  });
}

std::vector<std::string> setting_args(const TrainConfig& c, const std::set<std::string>& keys) {
  std::vector<std::string> args;
  for_each_section(c, [&](const auto& section, const auto& table) {
    for (const auto& k : table.keys) {
      if (!keys.count(table.name + "." + k.name)) continue;
      const json v = k.get(section);
      if (k.kind == Kind::Switch) {
        if (v.get<bool>()) args.push_back(k.flag());
        continue;
      }
      // "--flag value", as people write it; "--flag=value" where the value could pass for a
      // flag or is empty.
      const std::string text = arg_text(k.kind, v);
      if (text.empty() || text[0] == '-') {
        args.push_back(k.flag() + "=" + text);
      } else {
        args.insert(args.end(), {k.flag(), text});
      }
    }
  });
  return args;
}

void add_generate_options(CLI::App& app, GenerateOptions& o) {
  add(app, "--init-from", o.init_from, "PATH",
      "the model: a directory tetra exported, or any "
      "Hugging Face Llama directory")
      ->required();
  add(app, "--prompt", o.prompt, "TEXT", "the text to continue")->required();
  add(app, "--tokens", o.tokens, "N", "new tokens to generate")->check(kAtLeast1);
  add(app, "--temperature", o.temperature, "T", "0: greedy; else sample from softmax(logits/T)")
      ->check(kNonNegative);
  add(app, "--top-k", o.top_k, "K", "sample among the K most likely tokens (0: all)")
      ->check(kNonNegative);
  add(app, "--seed", o.seed, "N", "seed of the sampling draws");
  add_choice(app, "--device", o.device, {"cpu", "cuda"}, "where to compute");
}

void add_tokenize_options(CLI::App& app, TokenizeOptions& o) {
  add(app, "--tokenizer", o.tokenizer, "FILE",
      "a tokenizer.json, a SentencePiece .model, or a model directory that holds one")
      ->required();
  add_switch(app, "--document", o.document,
             "encode the text as one JSONL document: the tokens put before a text, its special "
             "tokens as plain text, the end-of-text token");
  add_switch(app, "--decode", o.decode, "read token ids and write their text")
      ->excludes("--document");
}

void add_plan_options(CLI::App& app, PlanOptions& p) {
  plan::Request& o = p.request;
  app.option_defaults()->group("Plan");
  add_choice(app, "--gpu", o.gpu, plan::machine_names(),
             "the machine: peak, memory and links per GPU, GPUs per node");
  add(app, "--gpu-memory", o.memory_gb, "GB", "memory per GPU (0: the --gpu's)")
      ->check(kNonNegative);
  add(app, "--nvlink", o.nvlink_gbs, "GB/S", "bandwidth per GPU inside a node, per direction")
      ->check(kNonNegative);
  add(app, "--network", o.network_gbs, "GB/S", "bandwidth per GPU between nodes, per direction")
      ->check(kNonNegative);
  add(app, "--gpus-per-node", o.gpus_per_node, "N", "GPUs per node (0: the --gpu's)")
      ->check(kNonNegative);
  add(app, "--tokens", o.tokens, "D", "tokens to train on: 6ND, days and GPU-hours")
      ->check(kNonNegative);
  add(app, "--achieved-tflops", o.achieved_tflops, "X",
      "a rate per GPU to time D tokens at (e.g. a measured one)")
      ->check(kNonNegative);
  add(app, "--mfu", o.mfu, "PERCENT",
      "value one MFU point from here (0: the estimate for this schedule)")
      ->check(rule(CLI::Validator(
                       [](std::string& s) -> std::string {
                         double x = -1;  // below 99 itself: one MFU point above must stay < 100
                         return CLI::detail::lexical_cast(s, x) && x >= 0 && x < 99 ? "" : "no";
                       },
                       ""),
                   "must be a percentage below 99"));
  add(app, "--compare", p.compare, "METRICS",
      "check a run's --metrics file against the plan: bytes per group exactly, peak memory "
      "within 10%; exit 1 on a mismatch");
  add(app, "--draw", p.draw, "FILE.svg", "draw the pipeline schedule as SVG");
  add_switch(app, "--json", p.json,
             "print the plan as one JSON object (its keys: docs/design.md, \"The plan as JSON\")")
      ->excludes("--compare");
}

void add_plot_options(CLI::App& app, PlotOptions& o) {
  app.option_defaults()->group("What to draw (one of)");
  add(app, "--loss", o.loss, "METRICS", "the loss per step, with the entropy floor and ln(vocab)");
  add(app, "--trace", o.trace, "TRACE",
      "one traced step (tetra train --trace): a lane per rank, forward and backward boxes "
      "colored by micro-batch, communication and waiting");
  add(app, "--barrier", o.barrier, "METRICS",
      "one step's compute and wait per rank, the straggler marked");
  add_choice(app, "--schedule", o.schedule, kScheduleNames,
             "a pipeline schedule, from the simulator");
  app.option_defaults()->group("Options");
  add(app, "--out", o.out, "FILE", "the SVG file to write");
  add_switch(app, "--json", o.json,
             "--schedule: print the simulated schedule's events (what the SVG draws) as one JSON "
             "object instead");
  add(app, "--step", o.step, "N",
      "--trace: the step (-1: the first traced); --barrier: the step (-1: the last with a "
      "straggler, else the last)")
      ->check(rule(CLI::Range(int64_t(-1), std::numeric_limits<int64_t>::max()),
                   "must be -1 or a step"));
  add(app, "--pp", o.pp, "N", "--schedule: pipeline ranks")->check(kAtLeast1);
  add(app, "--vpp", o.vpp, "V", "--schedule: virtual stages per rank (interleaved)")
      ->check(kAtLeast1);
  add(app, "--micro-batches", o.micro_batches, "M", "--schedule: micro-batches (0: 2*PP)")
      ->check(kNonNegative);
}

}  // namespace tetra::cli
