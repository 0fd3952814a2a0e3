// What the flag walks (tests/e2e/test_flags_*.cpp) take from the CLI11 app that parses
// tetra's flags: each option's flag and a value other than its default.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace tetra::test {

// An option's flag, listed in --help or not (CLI11 names a hidden option "").
inline std::string flag_of(const CLI::Option& opt) {
  return opt.get_lnames().empty() ? opt.get_name() : "--" + opt.get_lnames().front();
}

// A value for `opt` other than its default, from what --help shows of it: a switch takes none,
// a choice (a|b|c) another choice, a number its double (1 for 0), anything else a word.
inline std::vector<std::string> other_value(const CLI::Option& opt) {
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

}  // namespace tetra::test
