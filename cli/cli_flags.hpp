// How tetra declares its flags with CLI11 (cli/options.cpp parses them): validators
// that word refusals the way tetra always has ("--flag takes ...", "--flag must be ..."), the
// helpers that add a flag with its default shown in --help, and each subcommand's flag set
// (options_flags.cpp).
#pragma once
#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cli/config_file.hpp"
#include "cli/options.hpp"

namespace tetra::cli {

// Value checks, as CLI11 validators that word a refusal the way tetra always has; the parse
// (cli/options.cpp) puts the option's name (or a config file's key) before the words:
// "--keep must be at least 1 (got 0)".

// Whole numbers in base 10 from min to max. The value goes on spelled canonically: CLI11's
// own conversion would read "010" as octal and "0x10" as hexadecimal.
inline CLI::Validator integer(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& s) -> std::string {
        int64_t x{};
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
        if (ec == std::errc::result_out_of_range || (ec == std::errc() && (x < min || x > max)))
          return "takes an integer (got '" + s + "', out of range)";
        if (ec != std::errc() || end != s.data() + s.size())
          return "takes an integer (got '" + s + "')";
        s = std::to_string(x);
        return {};
      },
      "");
}
template <typename T>
inline CLI::Validator integer() {
  return integer(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
}

// Finite numbers, read as CLI11 then reads them.
inline CLI::Validator finite() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        double x = 0;
        if (!s.empty() && CLI::detail::lexical_cast(s, x) && std::isfinite(x)) return {};
        return "takes a finite number (got '" + s + "')";
      },
      "");
}

// What `v` (a CLI11 range) accepts; a refusal reads "must be positive (got 0)".
inline CLI::Validator rule(const CLI::Validator& v, const std::string& words) {
  return CLI::Validator(
      [v, words](std::string& s) -> std::string {
        return v(std::as_const(s)).empty() ? std::string() : words + " (got " + s + ")";
      },
      "");
}

// One of `values` (CLI::IsMember); a refusal lists them: "takes none or full (got 'x')".
inline CLI::Validator one_of(const std::vector<std::string>& values) {
  std::string list;
  for (size_t i = 0; i < values.size(); ++i)
    list += (i == 0 ? "" : i + 1 < values.size() ? ", " : " or ") + values[i];
  return CLI::Validator(
      [member = CLI::IsMember(values), list](std::string& s) -> std::string {
        return member(std::as_const(s)).empty() ? std::string()
                                                : "takes " + list + " (got '" + s + "')";
      },
      "");
}

// "a,b,,c" -> {"a", "b", "", "c"}.
inline std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= s.size();) {
    const size_t comma = std::min(s.find(',', at), s.size());
    out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

const CLI::Validator kPositive = rule(CLI::PositiveNumber, "must be positive");
const CLI::Validator kNonNegative = rule(CLI::NonNegativeNumber, "must not be negative");
const CLI::Validator kAtLeast1 =
    rule(CLI::Range(1.0, std::numeric_limits<double>::max()), "must be at least 1");

// Adds `--name METAVAR` writing into `field`, its value checked against the field's type and
// its default read off the field for --help ("" for an empty string: the option is off).
template <typename T>
CLI::Option* add(CLI::App& app, const std::string& name, T& field, const std::string& metavar,
                 const std::string& help) {
  CLI::Option* opt = app.add_option(name, field, help)->type_name(metavar)->capture_default_str();
  if constexpr (std::is_floating_point_v<T>) {
    opt->check(finite());
  } else if constexpr (std::is_integral_v<T>) {
    // An unsigned field (the seed) takes any int64, a negative one wrapping around.
    opt->transform(integer<std::make_signed_t<T>>());
  }
  if (opt->get_default_str().empty()) opt->default_str("\"\"");
  return opt;
}

// Adds `--name a|b|c` taking one of `values`.
inline CLI::Option* add_choice(CLI::App& app, const std::string& name, std::string& field,
                               const std::vector<std::string>& values, const std::string& help) {
  std::string metavar;
  for (const std::string& v : values) metavar += (metavar.empty() ? "" : "|") + v;
  return add(app, name, field, metavar, help)->check(one_of(values));
}

// Adds a switch: given once, without a value, it turns `field` on.
inline CLI::Option* add_switch(CLI::App& app, const std::string& name, bool& field,
                               const std::string& help) {
  return app.add_flag(name, field, help)
      ->multi_option_policy(CLI::MultiOptionPolicy::Throw)
      ->disable_flag_override()
      ->default_str("off");
}

// Each subcommand's flags, writing into its options. Tetra train's come from the schema
// (util/settings.hpp, train/config.hpp): a help group per section, a flag per key (its help's
// settings worded as flags); settings: where each is recorded with its option (for --config,
// --print-config and given), or null. For: tetra train's all; tetra sweep's only the keys a
// sweep passes on to its runs; tetra plan's all, with those the plan does not read (the data,
// checkpoints and outputs but --peak-tflops) left out of its --help though taken, so that a
// training command line planned as it is still parses.
enum class TrainFlagsFor { Train, Sweep, Plan };
void add_train_options(CLI::App& app, TrainConfig& o, Settings* settings = nullptr,
                       TrainFlagsFor for_ = TrainFlagsFor::Train);
// The arguments that give the settings of `keys` ("model.heads") their values in `c`:
// "--flag value" ("--flag=value" for a value that starts with '-' or is empty), "--flag" for a
// switch that is on, nothing for one that is off; in the schema's order. What tools pass to
// the tetra train runs they start.
std::vector<std::string> setting_args(const TrainConfig& c, const std::set<std::string>& keys);
void add_generate_options(CLI::App& app, GenerateOptions& o);
void add_tokenize_options(CLI::App& app, TokenizeOptions& o);
void add_plan_options(CLI::App& app, PlanOptions& o);
void add_plot_options(CLI::App& app, PlotOptions& o);
// The commands that start jobs (cli/jobs_flags.cpp). After parsing, finish_* fills what
// follows from the flags and checks them against each other (throws tetra::Error).
void add_job_options(CLI::App& app, JobOptions& o);  // --launcher and --run-timeout
void add_launch_options(CLI::App& app, LaunchOptions& o);
void add_lab_options(CLI::App& app, LabOptions& o);
void finish_lab_options(const CLI::App& app, LabOptions& o);
void add_sweep_options(CLI::App& app, SweepOptions& o);
void add_serve_options(CLI::App& app, ServeOptions& o);
void finish_sweep_options(const CLI::App& app, SweepOptions& o);

}  // namespace tetra::cli
