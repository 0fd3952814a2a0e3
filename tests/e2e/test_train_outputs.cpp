// tetra train's outputs (--metrics, --trace, --export, --tensorboard) are checked before the
// run changes anything, and against each other and the inputs. A refusal leaves the directory
// it ran in exactly as it was (tests/support/refusal.hpp): no checkpoint directory made, no
// `latest` moved to none or to --resume's checkpoint (so the next plain resume still continues
// the newest), no token cache written. An output may not be an input (the --data text, the
// --config file, --init-from, the checkpoint directory's lock and latest, a checkpoint in it,
// --resume's checkpoint) nor another output, by any spelling: a hard link, a link in the path.
// plot --out and plan --draw may not replace what they read either. A run refused for its
// settings (a model setting, a layout that does not divide) leaves no token cache beside its
// data: neither bpe:N's model nor the tokens. Runs the real `tetra` binary.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../support/corpus.hpp"
#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"

using namespace tetra::test;
namespace fs = std::filesystem;

namespace {

std::string train(const std::string& flags) {
  return tetra_bin() + " train" + tiny_model_flags({.steps = 2}) + flags;
}

// A directory with a checkpoint directory `ck` whose latest names step 1, a text corpus, a
// --config file and an exported model directory; every output flag's bad value beside them: a
// regular file where --tensorboard wants a directory, a directory where --metrics wants a file, a
// missing directory for --trace, a directory of the user's for --export.
struct Workspace {
  TempDir d;
  Workspace() {
    std::string text;
    for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog. ";
    std::ofstream(d / "corpus.txt") << text;
    std::ofstream(d / "run.toml") << "[optimizer]\nlr = 0.001\n";
    const Spawned made = spawn("cd " + d.path.string() + " && " + tetra_bin() + " train" +
                               tiny_model_flags({.steps = 1}) + "--ckpt-dir ck --export model");
    REQUIRE(made.status == 0);
    REQUIRE(slurp(d / "ck/latest") == "step_00000001\n");
    std::ofstream(d / "tb.txt") << "not a directory\n";
    fs::create_directory(d / "a_dir");
    fs::create_directory(d / "users");
    std::ofstream(d / "users/notes.txt") << "the user's\n";
  }
};

// flag's value that is refused alone, and the words of its refusal.
struct Bad {
  std::string flags, why;
};
const Bad kBad[] = {
    {"--tensorboard tb.txt", "cannot write --tensorboard 'tb.txt': it is not a directory"},
    {"--metrics a_dir", "cannot write --metrics file 'a_dir': it is a directory"},
    {"--trace missing/t.json", "cannot write --trace file 'missing/t.json': its directory"},
    {"--export users", "cannot write --export directory 'users'"},
};

}  // namespace

TEST_CASE("train outputs: a refusal for any output changes nothing, whatever --resume says") {
  const Workspace w;
  for (const Bad& bad : kBad) {
    CAPTURE(bad.flags);
    for (const char* resume : {"--ckpt-dir ck", "--ckpt-dir ck --resume never",
                               "--ckpt-dir ck --resume ck/step_00000001", "--ckpt-dir new_ck",
                               "--ckpt-dir new_ck --resume ck/step_00000001"})
      expect_refusal_in(w.d.path, train(std::string(resume) + " " + bad.flags), bad.why);
    // Text data under a tokenizer: the refusal comes before the token cache is written.
    expect_refusal_in(w.d.path, train("--data corpus.txt --tokenizer bpe:300 " + bad.flags),
                      bad.why);
  }
  CHECK(slurp(w.d / "ck/latest") == "step_00000001\n");
  CHECK(!fs::exists(w.d / "new_ck"));
}

TEST_CASE("train outputs: checks after the outputs' come before the checkpoint directory too") {
  const Workspace w;
  // A --resume that does not verify, and a communicator this build has not: refused with a
  // new --ckpt-dir not made, and with the old one's latest where it was.
  std::ofstream(w.d / "broken") << "x";
  for (const char* dir : {"new_ck", "ck"}) {
    expect_refusal_in(w.d.path, train(std::string("--ckpt-dir ") + dir + " --resume broken"),
                      "--resume broken");
    expect_refusal_in(w.d.path,
                      train(std::string("--ckpt-dir ") + dir + " --resume never --comm nccl"),
                      "--comm nccl");
  }
}

TEST_CASE("train outputs: no output is an input or another output, by any spelling") {
  const Workspace w;
  fs::create_hard_link(w.d / "corpus.txt", w.d / "alias.txt");
  fs::create_directory_symlink(".", w.d / "here");
  fs::create_directory(w.d / "exp");
  const std::string data = " --data corpus.txt ";
  const std::pair<std::string, std::string> cases[] = {
      {data + "--metrics corpus.txt", "--metrics 'corpus.txt' is --data 'corpus.txt'"},
      {data + "--trace alias.txt", "--trace 'alias.txt' is --data 'corpus.txt'"},
      {data + "--metrics here/corpus.txt", "--metrics 'here/corpus.txt' is --data 'corpus.txt'"},
      {"--config run.toml --trace run.toml", "--trace 'run.toml' is --config 'run.toml'"},
      {"--init-from model --export model", "--export 'model' is --init-from 'model'"},
      {"--init-from model --export model/model.safetensors",
       "--export 'model/model.safetensors' is --init-from's 'model/model.safetensors'"},
      {"--init-from model/model.safetensors --trace model/model.safetensors",
       "--trace 'model/model.safetensors' is --init-from 'model/model.safetensors'"},
      {"--ckpt-dir ck --metrics ck/latest", "--metrics 'ck/latest' is --ckpt-dir's latest"},
      {"--ckpt-dir ck --trace ck/lock", "--trace 'ck/lock' is --ckpt-dir's lock 'ck/lock'"},
      {"--ckpt-dir ck --metrics ck/step_00000001/manifest.json",
       "--metrics 'ck/step_00000001/manifest.json' lies inside the checkpoint "
       "'ck/step_00000001'"},
      {"--resume ck/step_00000001 --export ck/step_00000001/x.safetensors",
       "lies inside --resume 'ck/step_00000001'"},
      {"--metrics m.json --trace m.json", "--trace 'm.json' is --metrics 'm.json'"},
      {"--export exp --metrics exp/m.jsonl", "--metrics 'exp/m.jsonl' lies inside --export 'exp'"},
  };
  for (const auto& [flags, why] : cases) expect_refusal_in(w.d.path, train(flags), why);
  CHECK(slurp(w.d / "ck/latest") == "step_00000001\n");
}

TEST_CASE("outputs against inputs: plot --out and plan --draw may not replace what they read") {
  const TempDir d;
  REQUIRE(spawn("cd " + d.path.string() + " && " + tetra_bin() + " train" +
                tiny_model_flags({.steps = 2}) + "--metrics run.jsonl --trace trace.json")
              .status == 0);
  std::ofstream(d / "plan.toml") << "[layout]\npp = 2\n";
  fs::create_hard_link(d / "run.jsonl", d / "alias.jsonl");
  const std::string tetra = tetra_bin();
  const std::pair<std::string, std::string> cases[] = {
      {" plot --loss run.jsonl --out run.jsonl", "--out 'run.jsonl' is --loss 'run.jsonl'"},
      {" plot --barrier run.jsonl --out alias.jsonl",
       "--out 'alias.jsonl' is --barrier 'run.jsonl'"},
      {" plot --trace trace.json --out ./trace.json", "--out './trace.json' is --trace"},
      {" plan --compare run.jsonl --draw run.jsonl", "--draw 'run.jsonl' is --compare 'run.jsonl'"},
      {" plan --config plan.toml --draw plan.toml", "--draw 'plan.toml' is --config 'plan.toml'"},
  };
  for (const auto& [args, why] : cases) expect_refusal_in(d.path, tetra + args, why);
}

TEST_CASE("train outputs: a run refused for its settings leaves no token cache beside its data") {
  const TempDir d;
  corpus_dir(d);
  std::ofstream docs(d / "docs.jsonl");
  for (int i = 0; i < 40; ++i)
    docs << "{\"text\": \"document " << i << ": the quick brown fox jumps over the lazy dog\"}\n";
  docs.close();
  const std::string tetra = tetra_bin() + " train";
  // bpe:N (its model and the tokens are cached) and documents under bytes (their tokens are).
  for (const char* data : {" --data corpus.txt --tokenizer bpe:300", " --data docs.jsonl"}) {
    CAPTURE(data);
    expect_refusal_in(d.path, tetra + tiny_model_flags({.heads = 3, .steps = 2}) + data,
                      "--dim 32 is not divisible by --heads 3");
    expect_refusal_in(
        d.path,
        mpirun(2) + tetra + tiny_model_flags({.kv_heads = 1, .steps = 2}) + data + " --tp 2",
        "--kv-heads 1 is not divisible by TP 2");
  }
  // Accepted on two ranks: rank 0 trains the tokenizer, the other takes its bytes; then one
  // model and one shard of the text lie beside it.
  const Spawned r =
      spawn("cd " + d.path.string() + " && " + mpirun(2) + tetra + tiny_model_flags({.steps = 1}) +
            " --data corpus.txt --tokenizer bpe:300 --tp 2");
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(count(r.out, "(trained now)") == 1);
  CHECK(count(r.out, "(tokenized now)") == 1);
  CHECK(!only_file(d.path, ".model").empty());
  CHECK(!only_file(d.path, ".bin").empty());
}
