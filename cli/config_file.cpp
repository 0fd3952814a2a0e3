#include "cli/config_file.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <sstream>

#include "train/config.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"
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

namespace {

// A value of the file as written: its kind, and its text (a string's without quotes or escapes,
// a number's or a boolean's as it stands).
struct Value {
  enum class Type { String, Number, Boolean, List, Table } type = Type::String;
  std::string text;
};

// One line of a configuration file: "[a.b]", "key = value" or nothing (blank, a comment).
// tetra's TOML is the part of TOML a configuration needs: tables, bare and dotted keys,
// strings (basic, with escapes, and literal), numbers, booleans; arrays and inline tables are
// read only to be refused. Throws tetra::Error with `where` ("FILE:LINE") for anything else.
class LineReader {
 public:
  LineReader(const std::string& line, std::string where) : s_(line), where_(std::move(where)) {}

  bool blank() {
    skip_space();
    return at_end_or_comment();
  }
  bool at_table() { return s_[i_] == '['; }

  std::vector<std::string> table() {
    ++i_;
    std::vector<std::string> path = dotted_key();
    expect(']', "']' after the table's name");
    finish();
    return path;
  }

  std::pair<std::vector<std::string>, Value> key_value() {
    std::vector<std::string> key = dotted_key();
    expect('=', "'=' after the key");
    skip_space();
    Value v = value();
    finish();
    return {key, v};
  }

 private:
  [[noreturn]] void refuse(const std::string& what) const { fail(where_, ": ", what); }

  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  bool at_end_or_comment() const { return i_ == s_.size() || s_[i_] == '#'; }
  void expect(char c, const char* what) {
    skip_space();
    if (i_ >= s_.size() || s_[i_] != c) refuse(std::string("expected ") + what);
    ++i_;
  }
  void finish() {
    skip_space();
    if (!at_end_or_comment()) refuse("unexpected '" + s_.substr(i_) + "' after the value");
  }

  std::vector<std::string> dotted_key() {
    std::vector<std::string> parts;
    for (;;) {
      skip_space();
      const size_t from = i_;
      while (i_ < s_.size() &&
             (std::isalnum((unsigned char)s_[i_]) || s_[i_] == '_' || s_[i_] == '-'))
        ++i_;
      if (i_ == from)
        refuse("expected a key (letters, digits, '_' and '-') at '" + s_.substr(i_) + "'");
      parts.push_back(s_.substr(from, i_ - from));
      skip_space();
      if (i_ >= s_.size() || s_[i_] != '.') return parts;
      ++i_;
    }
  }

  Value value() {
    if (i_ >= s_.size() || s_[i_] == '#') refuse("a key without a value");
    const char c = s_[i_];
    if (c == '[' || c == '{') {  // refused by the caller, which names the key
      const Value v{c == '[' ? Value::Type::List : Value::Type::Table, s_.substr(i_)};
      i_ = s_.size();
      return v;
    }
    if (c == '"' || c == '\'') {
      if (s_.compare(i_, 3, std::string(3, c)) == 0) refuse("multi-line strings are not read");
      return {Value::Type::String, c == '"' ? basic_string() : literal_string()};
    }
    const size_t from = i_;
    while (i_ < s_.size() && s_[i_] != ' ' && s_[i_] != '\t' && s_[i_] != '#') ++i_;
    const std::string word = s_.substr(from, i_ - from);
    if (word == "true" || word == "false") return {Value::Type::Boolean, word};
    // A number as TOML writes it (1_000 is 1000); what it must be, the setting's flag checks.
    static const std::regex number(
        R"([+-]?([0-9](_?[0-9])*)(\.[0-9](_?[0-9])*)?([eE][+-]?[0-9](_?[0-9])*)?|[+-]?(inf|nan)|0x[0-9A-Fa-f_]+|0o[0-7_]+|0b[01_]+)");
    if (!std::regex_match(word, number))
      refuse("'" + word + "' is not a value (a string is in quotes: \"" + word + "\")");
    std::string digits;
    for (char d : word)
      if (d != '_') digits += d;
    return {Value::Type::Number, digits};
  }

  std::string literal_string() {
    const size_t close = s_.find('\'', i_ + 1);
    if (close == std::string::npos) refuse("a string without its closing quote");
    std::string out = s_.substr(i_ + 1, close - i_ - 1);
    i_ = close + 1;
    return out;
  }

  std::string basic_string() {
    std::string out;
    for (++i_; i_ < s_.size(); ++i_) {
      const char c = s_[i_];
      if (c == '"') {
        ++i_;
        return out;
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (++i_ >= s_.size()) break;
      switch (s_[i_]) {
        case 'b':
          out += '\b';
          break;
        case 't':
          out += '\t';
          break;
        case 'n':
          out += '\n';
          break;
        case 'f':
          out += '\f';
          break;
        case 'r':
          out += '\r';
          break;
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case 'u':
        case 'U':
          out += code_point(s_[i_] == 'u' ? 4 : 8);
          break;
        default:
          refuse(std::string("unknown escape '\\") + s_[i_] + "' in a string");
      }
    }
    refuse("a string without its closing quote");
  }

  // \uXXXX or \UXXXXXXXX (i_ at the u) as UTF-8.
  std::string code_point(int digits) {
    const std::string hex = s_.substr(i_ + 1, size_t(digits));
    uint32_t cp = 0;
    const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), cp, 16);
    if (hex.size() != size_t(digits) || ec != std::errc() || end != hex.data() + hex.size() ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      refuse("a malformed \\u escape in a string");
    i_ += size_t(digits);
    std::string out;
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
    } else if (cp < 0x10000) {
      out += {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
    } else {
      out += {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)),
              char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
    }
    return out;
  }

  const std::string& s_;
  std::string where_;
  size_t i_ = 0;
};

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ".") + p;
  return out;
}

}  // namespace

std::vector<std::string> config_file_args(const std::string& file, const Settings& settings) {
  check(!file.empty(), "--config needs a file name (got '')");
  std::string text;
  const std::string problem = read_input_file(file, text, kMaxConfigBytes);
  check(problem.empty(), "--config ", file, ": ",
        problem == kNotFound ? "not a file that can be read" : problem);
  std::vector<std::string> args;
  std::set<std::string> seen;
  std::vector<std::string> table;  // the [table] the keys below belong to
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    LineReader read(line, file + ":" + std::to_string(number));
    if (read.blank()) continue;
    if (read.at_table()) {
      table = read.table();
      continue;
    }
    auto [path, value] = read.key_value();
    path.insert(path.begin(), table.begin(), table.end());
    const std::string key = joined(path);
    std::string name = path.back();  // the flag's spelling reads too: kv-heads is kv_heads
    std::replace(name.begin(), name.end(), '-', '_');
    // An older tetra's key reads as the setting's key now ([data] init_from is model's).
    const std::string now = path.size() == 2 ? current_key(path[0] + "." + name) : std::string();
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
    check(value.type != Value::Type::List, file, ": ", s->key(), " takes one value, not a list");
    check(value.type != Value::Type::Table, file, ": ", s->key(), " takes one value, not a table");
    using settings::Kind;
    const bool numeric =
        s->kind == Kind::Integer || s->kind == Kind::Unsigned || s->kind == Kind::Number;
    if (s->kind == Kind::Switch) {
      check(value.type == Value::Type::Boolean, file, ": ", s->key(), " takes true or false (got '",
            value.text, "')");
    } else if (numeric) {
      check(value.type == Value::Type::Number, file, ": ", s->key(), " takes ",
            s->kind == Kind::Number ? "a number" : "an integer", ", not ",
            value.type == Value::Type::String ? "the string \"" + value.text + "\""
                                              : "'" + value.text + "'");
    } else {
      check(value.type == Value::Type::String, file, ": ", s->key(),
            " takes a string, in quotes (got '", value.text, "')");
    }
    if (s->option->count() > 0) continue;  // the command line's
    if (s->kind != Kind::Switch) {
      args.push_back(s->flag() + "=" + value.text);
    } else if (value.text == "true") {
      args.push_back(s->flag());
    }
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
