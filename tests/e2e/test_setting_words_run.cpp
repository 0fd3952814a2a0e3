// The same refusal from the command line and from a --config file, each in the words the user
// gave it in: a setting the command line gave (or a default) by its flag, one the file gave by
// its key after the file's name. Refusals of a value's type or range come from the parse; these
// come from the layers below cli/ (the model's shape, the batch over the layout) and from
// resolve(). And what makes that hold for every message: no string of those layers names a
// setting's flag, and each key they name is a setting's. (settings::worded itself:
// tests/unit/test_setting_words.cpp.)
#include <doctest/doctest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "train/config.hpp"

using namespace tetra::test;

namespace {

// Every setting's key ("model.heads") with its flag ("--heads").
std::map<std::string, std::string> schema_flags() {
  std::map<std::string, std::string> out;
  tetra::TrainConfig c;
  tetra::for_each_section(c, [&](const auto&, const auto& table) {
    for (const auto& k : table.keys) out[table.name + "." + k.name] = k.flag();
  });
  return out;
}

// The string literals of a C++ source, comments left out; raw strings are skipped whole (a
// pattern, never a message), as are character literals and digit separators (1'000).
std::vector<std::string> string_literals(const std::string& src) {
  std::vector<std::string> out;
  for (size_t i = 0; i < src.size(); ++i) {
    if (src.compare(i, 2, "//") == 0) {
      i = src.find('\n', i);
    } else if (src.compare(i, 2, "/*") == 0) {
      i = src.find("*/", i + 2);
      if (i != std::string::npos) ++i;
    } else if (src.compare(i, 2, "R\"") == 0) {  // R"delim( ... )delim"
      const size_t open = src.find('(', i + 2);
      if (open == std::string::npos) break;
      const std::string end = ")" + src.substr(i + 2, open - i - 2) + "\"";
      i = src.find(end, open);
      if (i != std::string::npos) i += end.size() - 1;
    } else if (src[i] == '\'' &&
               (i == 0 || !std::isalnum(static_cast<unsigned char>(src[i - 1])))) {
      for (++i; i < src.size() && src[i] != '\''; ++i)
        if (src[i] == '\\') ++i;
    } else if (src[i] == '"') {
      std::string lit;
      for (++i; i < src.size() && src[i] != '"'; ++i) {
        if (src[i] == '\\') lit += src[i++];
        lit += src[i];
      }
      out.push_back(lit);
    }
    if (i == std::string::npos) break;
  }
  return out;
}

// A tiny model's flags but its heads (tiny_model_flags gives them), which the cases give in
// the form they test.
const std::string kTiny =
    " --layers 2 --dim 32 --ffn-dim 64 --seq-len 16 --global-batch 4 --steps 2 --peak-tflops 1";

// The one "tetra: error:" line of a refused tetra command (exit status 2).
std::string refusal(const std::string& args) {
  const Spawned r = spawn(tetra_bin() + " " + args);
  CAPTURE(args);
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(count(r.err, "tetra: error: ") == 1);
  return r.err;
}

}  // namespace

TEST_CASE("setting words: a refusal names each setting as the user gave it") {
  TempDir d;
  const std::string file = d / "run.toml";
  std::ofstream(file) << "[model]\nheads = 4\nkv_heads = 3\n";
  // The model's shape (model/, when the run is built).
  CHECK(refusal("train" + kTiny + " --heads 4 --kv-heads 3") ==
        "tetra: error: --heads 4 is not divisible by --kv-heads 3\n");
  CHECK(refusal("train" + kTiny + " --config " + file) ==
        "tetra: error: " + file + ": model.heads 4 is not divisible by model.kv_heads 3\n");
  // The command line's flag overrides the file's key, and is named as a flag.
  CHECK(refusal("train" + kTiny + " --config " + file + " --kv-heads 3") ==
        "tetra: error: " + file + ": model.heads 4 is not divisible by --kv-heads 3\n");
  // tetra plan words them alike.
  CHECK(refusal("plan" + kTiny + " --config " + file) ==
        "tetra: error: " + file + ": model.heads 4 is not divisible by model.kv_heads 3\n");

  // The batch over the layout (parallel/).
  std::ofstream(file) << "[batch]\nglobal_batch = 6\nmicro_batch = 4\n";
  const std::string tiny = " --layers 2 --dim 32 --ffn-dim 64 --seq-len 16 --steps 1";
  CHECK(refusal("train" + tiny + " --global-batch 6 --micro-batch 4") ==
        "tetra: error: --global-batch 6 is not divisible by DP * micro-batch = 1 * 4\n");
  CHECK(refusal("train" + tiny + " --config " + file) ==
        "tetra: error: " + file +
            ": batch.global_batch 6 is not divisible by DP * micro-batch = 1 * 4\n");

  // What the settings imply of each other (resolve(), while parsing).
  std::ofstream(file) << "[checkpoint]\nckpt_every = 2\n";
  CHECK(refusal("train --ckpt-every 2") == "tetra: error: --ckpt-every needs --ckpt-dir\n");
  CHECK(refusal("train --config " + file) ==
        "tetra: error: " + file + ": checkpoint.ckpt_every needs --ckpt-dir\n");
}

TEST_CASE("setting words: the layers below cli/ name settings by key, never by flag") {
  // The flags of settings, and the keys: a literal in these layers may name a key only.
  const std::map<std::string, std::string> keys = schema_flags();
  std::set<std::string> flags;
  for (const auto& [key, flag] : keys) flags.insert(flag);
  const std::regex flag_like("--([a-z][a-z0-9-]*)"), key_like("`([^`]*)`");
  int files = 0, named = 0;
  for (const char* layer : {"backend", "model", "parallel", "transformer", "optim", "data",
                            "checkpoint", "plan", "train"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             std::string(TETRA_SOURCE_DIR) + "/" + layer)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".cu" && ext != ".cuh") continue;
      ++files;
      for (const std::string& lit : string_literals(slurp(entry.path().string()))) {
        CAPTURE(entry.path().string());
        CAPTURE(lit);
        for (std::sregex_iterator m(lit.begin(), lit.end(), flag_like), end; m != end; ++m)
          CHECK(flags.count((*m)[0].str()) == 0);
        for (std::sregex_iterator m(lit.begin(), lit.end(), key_like), end; m != end; ++m) {
          CHECK(keys.count((*m)[1].str()) == 1);
          ++named;
        }
      }
    }
  }
  CHECK(files > 100);
  CHECK(named > 60);
}
