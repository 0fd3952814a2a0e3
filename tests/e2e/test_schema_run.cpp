// A checkpoint's recorded configuration, as `tetra ckpt config` prints it, trains the same
// run bit for bit through --config; a checkpoint with the names of a tetra before the schema
// still prints as the same configuration and resumes. (The schema itself:
// tests/unit/test_schema.cpp.)
#include <doctest/doctest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../support/checkpoint_helpers.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"

using namespace tetra::test;
using tetra::json;

namespace {

const std::string kRun =
    " --layers 2 --dim 32 --heads 2 --kv-heads 2 --ffn-dim 64 --seq-len 16 --global-batch 4"
    " --peak-tflops 1 --lr 0.002 --warmup 1 --seed 7 --vocab 300 --recompute full";

std::vector<std::string> losses(const std::string& metrics) {
  std::vector<std::string> out;
  std::istringstream in(slurp(metrics));
  const std::regex re(R"("loss":([-0-9.eE+]+))");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, re)) out.push_back(m[1]);
  }
  return out;
}

// The checkpoint's manifest as a tetra before the schema wrote it: the old names, recompute
// a bool, no model section in the configuration, the model record's rows as vocab.
void write_as_before(const std::string& manifest) {
  json m = json::parse(slurp(manifest));
  json& c = m["config"];
  c["output"]["export_path"] = c["output"]["export"];
  c["output"].erase("export");
  c["output"].erase("tensorboard");
  c["checkpoint"]["timeout"] = c["run"]["timeout"];
  c.erase("run");
  c["optimizer"]["recompute"] = c["optimizer"]["recompute"] == "full";
  c.erase("model");
  json& model = m["model"];
  model["data_vocab"] = model["vocab"];
  model["vocab"] = model["vocab_rows"];
  model.erase("vocab_rows");
  write_manifest(manifest, m);
}

}  // namespace

TEST_CASE("schema: a checkpoint's recorded configuration trains the same run through --config") {
  TempDir d;
  const std::string dir = d.path.string(), bin = tetra_bin();
  const Spawned first = spawn("cd " + dir + " && " + bin + " train" + kRun +
                              " --steps 3 --ckpt-dir ck --metrics a.jsonl --export a.safetensors");
  REQUIRE(first.status == 0);
  const Spawned printed = spawn("cd " + dir + " && " + bin + " ckpt config ck > run.toml");
  REQUIRE(printed.status == 0);
  const std::string toml = slurp(d / "run.toml");
  CAPTURE(toml);
  CHECK(lines_with(toml, "vocab = 300") == 1);
  CHECK(lines_with(toml, "recompute = \"full\"") == 1);
  CHECK(lines_with(toml, "export = \"a.safetensors\"") == 1);
  CHECK(lines_with(toml, "dp = 1") == 1);
  // The same run from the file alone, but for where it writes (flags override the file).
  const Spawned again = spawn("cd " + dir + " && " + bin +
                              " train --config run.toml --ckpt-dir ck2 --metrics b.jsonl "
                              "--export b.safetensors");
  REQUIRE(again.status == 0);
  CHECK(losses(d / "a.jsonl").size() == 3);
  CHECK(losses(d / "b.jsonl") == losses(d / "a.jsonl"));
  CHECK(slurp(d / "b.safetensors") == slurp(d / "a.safetensors"));

  // A checkpoint with the names of a tetra before the schema still resumes, and still prints
  // as the same configuration.
  write_as_before(dir + "/ck/step_00000003/manifest.json");
  const Spawned old = spawn("cd " + dir + " && " + bin + " ckpt config ck > old.toml");
  REQUIRE(old.status == 0);
  const std::string old_toml = slurp(d / "old.toml");
  CHECK(lines_with(old_toml, "vocab = 300") == 1);
  CHECK(lines_with(old_toml, "recompute = \"full\"") == 1);
  CHECK(lines_with(old_toml, "export = \"a.safetensors\"") == 1);
  const Spawned resumed = spawn("cd " + dir + " && " + bin + " train" + kRun +
                                " --steps 4 --allow-change steps --ckpt-dir ck --metrics c.jsonl");
  CAPTURE(resumed.err);
  CHECK(resumed.status == 0);
  CHECK(resumed.out.find("resumed from ") != std::string::npos);
  CHECK(losses(d / "c.jsonl").size() == 1);
}
