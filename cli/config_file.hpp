// tetra train's configuration as a TOML file: `--config FILE` reads one, `--print-config`
// writes the effective configuration as one, and `tetra ckpt config DIR` writes the one a
// checkpoint records.
//
//   [layout]          a table per section of TrainConfig (train/config.hpp), in --help's order
//   tp = 2            a key per setting, its name as the schema has it (util/settings.hpp):
//   # cp = 1          kv_heads, min_lr; the flag's spelling (kv-heads) reads too. A switch
//                     is true or false; commented out: not given, shown for reference
//
// A key in the file counts as given (TrainConfig::given), as its flag on the command line
// would, and a flag given on the command line overrides the file's key. --print-config
// writes the keys of the settings given (on the command line or in a --config file) and
// comments out the rest (defaults, and values tetra derives from the others: --min-lr from
// --lr, the interleaved schedule from --vpp), so that reading the file back gives the same
// values and the same given settings: the same run, and no check that only given settings
// face (--init-from's shapes, a --min-lr that follows --lr on resume) comes out differently.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "util/settings.hpp"

namespace CLI {
class Option;
}

namespace tetra::cli {

// One setting of tetra train, as its flag and as a key of the configuration file.
struct Setting {
  CLI::Option* option;
  std::string section;                // the TOML table: "layout"
  std::string name;                   // the key in it: "kv_heads"
  std::function<std::string()> toml;  // the field's value as TOML ("" when it cannot be written)
  settings::Kind kind = settings::Kind::Text;
  std::string flag() const;  // "--kv-heads"
  std::string key() const;   // "model.kv_heads"
};
using Settings = std::vector<Setting>;

// Values as TOML that CLI11's reader gives back as the string the flag reads to the same value.
std::string toml_value(const std::string& s);  // quoted; "" when no quoting reads back (a '#')
std::string toml_value(double x);              // the shortest digits that read back bit for bit
inline std::string toml_value(bool b) {
  return b ? "true" : "false";
}
template <typename T>
requires std::is_integral_v<T> std::string toml_value(T x) {
  // The seed is unsigned; its flag reads an int64 and wraps a negative one around.
  return std::to_string(static_cast<std::make_signed_t<T>>(x));
}

// The arguments that give the values of `file`'s keys to their flags ("--flag=value"; "--flag"
// for a switch set to true, nothing for one set to false), except the keys whose flag the
// command line gave (its option has a count): those the command line overrides.
// Throws tetra::Error naming the file and the key (or the line) for a file that cannot be
// read or is larger than kMaxConfigBytes, a line that is not TOML tetra reads, a table or a key
// given twice, a key that names no flag of its section, a list or a table as a value, or a value
// of the wrong type: a string for a number, a number for a string, a switch neither true nor
// false. The value's own checks are its flag's.
inline constexpr int64_t kMaxConfigBytes = 1 << 20;
std::vector<std::string> config_file_args(const std::string& file, const Settings& settings);

// The configuration as TOML (see above): the settings whose keys are in `given` set, the
// others commented out. Throws tetra::Error for a value that cannot be written so that it
// reads back.
std::string config_toml(const Settings& settings, const std::set<std::string>& given);

}  // namespace tetra::cli
