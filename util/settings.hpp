// The building blocks of tetra train's configuration schema: each section of TrainConfig
// declares its settings once, beside its struct, as a Table of Keys (name, kind, metavar,
// help, check), and everything that names a setting derives from those tables: the flags
// and their --help groups (cli/), the TOML of --config and --print-config, the JSON a
// checkpoint records, presets, the resume comparison and the arguments tools build.
//
// One naming rule: a key's name is its field's name (less a trailing '_', for a C++ keyword:
// `export_`), which is also its TOML key and JSON key, inside its section's table
// ("[model] kv_heads"); its flag is "--" and the name with '_' as '-' (--kv-heads).
// A setting's full key is "section.name" ("model.kv_heads"): what TrainConfig::given holds.
//
// A message (or a help text) names a setting by its key between backquotes, "`model.heads` must
// be positive", never by its flag: whoever prints it words each one as the user gave the
// setting (worded()): "--heads must be positive", or "run.toml: model.heads must be positive".
//
// No CLI11 here (util/ is the bottom layer): a value travels as JSON of its kind, and cli/
// turns flag text into it.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "util/json.hpp"

namespace tetra::settings {

// The kinds of value a setting holds, as its flag reads them and its JSON writes them.
enum class Kind {
  Integer,   // int or int64; JSON integer
  Unsigned,  // uint64 (the seed): its flag reads an int64, a negative one wrapping around
  Number,    // double; finite
  Switch,    // bool: a flag without a value, TOML true/false
  Text,      // std::string
  Choice,    // one of `choices`: a string field, or a bool field as {off, on} names
  List,      // std::set<std::string>, written comma-separated
};

// What a value must satisfy beyond its kind, as refusal words ("must be positive (got 0)"),
// empty when accepted. It sees the value's text as the flag reads it.
using Check = std::function<std::string(const std::string& text)>;
Check positive();
Check non_negative();
Check at_least_1();
// positive(), and at most `limit`, tetra's own for the setting: "1000000 is more than tetra's
// limit of 65536 blocks" (`unit`), refused before anything is sized by it.
Check positive_up_to(int64_t limit, std::string unit);
// A refusal `words` (" (got TEXT)" appended) unless ok(x) for the text read as a number.
Check number_rule(std::function<bool(double)> ok, std::string words);

// "min_lr" -> "--min-lr".
std::string flag_of(std::string name);

// What a resumed run may do with a setting's value (checkpoint/resume.hpp compares them).
enum class Resume {
  Fixed,       // must be the checkpoint's: the run being continued is made of it
  Changeable,  // may differ where --allow-change names it (to extend or fine-tune a run)
  Free,        // may differ: it does not enter the trained state, or a check of its own covers it
};

// What the tools do with a setting besides reading it. A section gives its keys' traits; a key
// may say otherwise.
struct Traits {
  Resume resume = Resume::Free;
  // tetra sweep passes it on to every run it starts; false where the sweep decides it (the
  // layout, the ZeRO stage) or it is one run's own (its files, its validation).
  bool swept = true;
};

// Where a run's given settings came from: the --config file, and the keys it gave (the
// command line gave the others, or they are defaults).
struct Origin {
  std::string file;
  std::set<std::string> keys;
};

// `text` with each setting it names ("`model.heads`") worded as `origin` says it was given: by
// its key ("model.heads") when the --config file gave it, and then "FILE: " before the whole
// text; by its flag ("--heads") when the command line gave it or it is a default.
std::string worded(const std::string& text, const Origin& origin = {});

// One setting of section S.
template <typename S>
struct Key {
  std::string name;  // field name = TOML key = JSON key
  Kind kind = Kind::Text;
  std::string metavar;  // --help's placeholder ("N"); a choice's is its values, "a|b"
  std::string help;
  Check check;                       // null: any value of its kind
  std::vector<std::string> choices;  // Kind::Choice
  int64_t min = 0, max = 0;          // Kind::Integer: the field type's range
  std::string shown_default;         // --help's default when it is not the field's ("lr/10")
  std::function<json(const S&)> get;
  std::function<void(S&, const json&)> set;  // from JSON of its kind
  // Its traits; unset: its section's (the Table fills them in, so a Table's keys have both).
  std::optional<Resume> resume;
  std::optional<bool> swept;

  std::string flag() const { return flag_of(name); }
  Key&& shown(std::string text) && {
    shown_default = std::move(text);
    return std::move(*this);
  }
  Key&& on_resume(Resume r) && {
    resume = r;
    return std::move(*this);
  }
  Key&& sweep(bool passed_on) && {
    swept = passed_on;
    return std::move(*this);
  }
};

// A section: its TOML table and JSON object (`name`), its --help group, the traits of its keys
// that do not give their own, its keys in --help's order.
template <typename S>
struct Table {
  std::string name, group;
  std::vector<Key<S>> keys;
  Table(std::string name_, std::string group_, Traits section, std::vector<Key<S>> keys_)
      : name(std::move(name_)), group(std::move(group_)), keys(std::move(keys_)) {
    for (Key<S>& k : keys) {
      if (!k.resume) k.resume = section.resume;
      if (!k.swept) k.swept = section.swept;
    }
  }
};

// key(&S::field, "name", "METAVAR", "help", check): the kind from the field's type.
template <typename S, typename T>
Key<S> key(T S::*field, std::string name, std::string metavar, std::string help,
           Check check = nullptr) {
  Key<S> k;
  k.name = std::move(name);
  k.kind = Kind::Text;
  k.metavar = std::move(metavar);
  k.help = std::move(help);
  k.check = std::move(check);
  k.get = [field](const S& s) { return json(s.*field); };
  k.set = [field](S& s, const json& v) { s.*field = v.get<T>(); };
  if constexpr (std::is_same_v<T, bool>) {
    k.kind = Kind::Switch;
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    k.kind = Kind::Unsigned;
    k.set = [field](S& s, const json& v) {
      s.*field = v.is_number_unsigned() ? v.get<uint64_t>() : uint64_t(v.get<int64_t>());
    };
  } else if constexpr (std::is_integral_v<T>) {
    k.kind = Kind::Integer;
    k.min = std::numeric_limits<T>::min();
    k.max = std::numeric_limits<T>::max();
  } else if constexpr (std::is_floating_point_v<T>) {
    k.kind = Kind::Number;
  } else if constexpr (std::is_same_v<T, std::set<std::string>>) {
    k.kind = Kind::List;
  } else {
    static_assert(std::is_same_v<T, std::string>, "a setting is a number, bool, string or set");
  }
  return k;
}

// A string field that takes one of `values`.
template <typename S>
Key<S> choice(std::string S::*field, std::string name, std::vector<std::string> values,
              std::string help) {
  Key<S> k = key(field, std::move(name), "", std::move(help));
  k.kind = Kind::Choice;
  for (const std::string& v : values) k.metavar += (k.metavar.empty() ? "" : "|") + v;
  k.choices = std::move(values);
  return k;
}

// A bool field named by two words, {off, on} ({"none", "full"}); JSON true or false (as an
// older record has it) reads too.
template <typename S>
Key<S> choice(bool S::*field, std::string name, std::vector<std::string> values, std::string help) {
  Key<S> k;
  k.name = std::move(name);
  k.kind = Kind::Choice;
  k.metavar = values.at(0) + "|" + values.at(1);
  k.help = std::move(help);
  k.choices = values;
  k.get = [field, values](const S& s) { return json(values[s.*field ? 1 : 0]); };
  k.set = [field, values](S& s, const json& v) {
    s.*field = v.is_boolean() ? v.get<bool>() : v.get<std::string>() == values[1];
  };
  return k;
}

// The section's settings as a JSON object {name: value}, every key.
template <typename S>
json to_json(const Table<S>& t, const S& s) {
  json out = json::object();
  for (const Key<S>& k : t.keys) out[k.name] = k.get(s);
  return out;
}

// The members of `v` that are keys of `t` into `s`; others are ignored (a newer tetra's).
template <typename S>
void from_json(const Table<S>& t, const json& v, S& s) {
  for (const Key<S>& k : t.keys)
    if (v.is_object() && v.contains(k.name)) k.set(s, v.at(k.name));
}

// `src`'s values into `dst` for the keys of `t` that `keep` does not hold ("section.name").
template <typename S>
void overlay(const Table<S>& t, S& dst, const S& src, const std::set<std::string>& keep) {
  for (const Key<S>& k : t.keys)
    if (!keep.count(t.name + "." + k.name)) k.set(dst, k.get(src));
}

}  // namespace tetra::settings
