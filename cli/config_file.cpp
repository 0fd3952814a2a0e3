#include "cli/config_file.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "train/config.hpp"
#include "util/error.hpp"
#include "util/settings.hpp"

namespace tetra::cli {

std::string Setting::flag() const {
  return settings::flag_of(name);
}
std::string Setting::key() const {
  return section + "." + name;
}

std::string toml_value(const std::string& s) {
  // CLI11 reads a '#' anywhere on the line as the start of a comment, and takes what is
  // between the quotes as it is (no escapes): a value with a '#' or a line break, or with both
  // quote marks, has no spelling that reads back.
  const bool plain = s.find_first_of("#\n\r") == std::string::npos;
  if (plain && s.find_first_of("\"\\") == std::string::npos) return "\"" + s + "\"";
  if (plain && s.find('\'') == std::string::npos) return "'" + s + "'";  // TOML's literal string
  return "";
}

std::string toml_value(double x) {
  // The shortest digits are exact for a correctly rounded reader; CLI11 reads through a long
  // double, so they are checked, and 17 digits (always exact) taken when they do not read back.
  // Fixed-point between 1e-4 and 1e16, as people write them ("0.0003", not "3e-04").
  const double a = std::fabs(x);
  const auto format =
      a == 0 || (a >= 1e-4 && a < 1e16) ? std::chars_format::fixed : std::chars_format::scientific;
  char buf[400];
  std::string text(buf, std::to_chars(buf, buf + sizeof buf, x, format).ptr);
  double back = 0;
  if (!CLI::detail::lexical_cast(text, back) || std::memcmp(&back, &x, sizeof x) != 0) {
    std::snprintf(buf, sizeof buf, "%.17g", x);
    text = buf;
  }
  // A TOML float has a fraction or an exponent.
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

std::vector<std::string> config_file_args(const std::string& file, const Settings& settings) {
  std::error_code ec;
  check(std::filesystem::is_regular_file(file, ec), "--config ", file,
        ": not a file that can be read");
  std::ifstream in(file);
  check(in.good(), "--config ", file, ": cannot open it");
  std::vector<std::string> args;
  std::set<std::string> seen;
  for (const CLI::ConfigItem& item : CLI::ConfigTOML().from_config(in)) {
    // CLI11 marks where a table begins and ends with these names.
    if (item.name == "++" || item.name == "--") continue;
    std::string key;
    for (const std::string& p : item.parents) key += p + ".";
    key += item.name;
    std::string name = item.name;  // the flag's spelling reads too: kv-heads is kv_heads
    std::replace(name.begin(), name.end(), '-', '_');
    // An older tetra's key reads as the setting's key now ([data] init_from is model's).
    const std::string now =
        item.parents.size() == 1 ? current_key(item.parents[0] + "." + name) : std::string();
    const Setting* s = nullptr;
    std::string elsewhere;  // the key of a setting of that name in another section
    for (const Setting& t : settings) {
      if (t.key() == now) s = &t;
      if (t.name == name) elsewhere = t.key();
    }
    check(s != nullptr, file, ": unknown key '", key, "'",
          elsewhere.empty()
              ? " (the keys are tetra train's settings, by section: see --print-config)"
              : " (" + elsewhere.substr(elsewhere.find('.') + 1) + " is " + elsewhere + ")");
    // By the setting, not the spelling: kv-heads and kv_heads are one key.
    check(seen.insert(s->key()).second, file, ": ", s->key(), " is given more than once");
    check(item.inputs.size() == 1, file, ": ", key, " takes one value, not a list");
    if (s->option->count() > 0) continue;  // the command line's
    const std::string& value = item.inputs[0];
    if (!s->is_switch) {
      args.push_back(s->flag() + "=" + value);
      continue;
    }
    check(value == "true" || value == "false", file, ": ", key, " takes true or false (got '",
          value, "')");
    if (value == "true") args.push_back(s->flag());
  }
  return args;
}

std::string config_toml(const Settings& settings, const std::set<std::string>& given) {
  std::ostringstream out;
  out << "# tetra train's configuration (--print-config); tetra train --config FILE reads it\n"
         "# back, and flags given with it override its keys. A key set here counts as its flag\n"
         "# given; a commented-out key shows the value tetra takes by default or derives from\n"
         "# the other values, and is not read.\n";
  std::string section;
  for (const Setting& s : settings) {
    if (s.section != section) out << "\n[" << (section = s.section) << "]\n";
    const std::string value = s.toml();
    check(!value.empty(), "--print-config: the value of ", s.flag(),
          " cannot be written to TOML so that it reads back (it holds a '#', a line break or "
          "both quote marks)");
    out << (given.count(s.key()) ? "" : "# ") << s.name << " = " << value << "\n";
  }
  return out.str();
}

}  // namespace tetra::cli
