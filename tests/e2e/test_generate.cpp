// tetra generate and --sample-every: greedy decoding is deterministic, the KV cache gives
// what a full recomputation gives, and an exported model and its re-import write the same.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../support/spawn.hpp"
#include "backend/backend.hpp"
#include "cli/options.hpp"
#include "data/dataset.hpp"
#include "train/trainer.hpp"
#include "transformer/generator.hpp"

using namespace tetra;
using tetra::test::count;
using tetra::test::spawn;
using tetra::test::TempDir;
using tetra::test::tetra_bin;

namespace {

std::vector<std::string> tiny(const std::string& corpus, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--layers",       "2", "--dim",     "32",  "--heads",   "4",
                                   "--kv-heads",     "2", "--ffn-dim", "64",  "--seq-len", "32",
                                   "--global-batch", "4", "--steps",   "40",  "--lr",      "1e-2",
                                   "--peak-tflops",  "1", "--data",    corpus};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::string write_corpus(const std::string& path) {
  std::ofstream f(path);
  for (int i = 0; i < 300; ++i) f << "the cat sat on the mat. ";
  return path;
}

}  // namespace

TEST_CASE("generate: the KV cache decodes what a full forward of the sequence predicts") {
  const TempDir tmp;
  const std::string corpus = write_corpus(tmp / "gen_corpus.txt");
  Trainer t(parse_train_options(tiny(corpus)), MPI_COMM_SELF);
  for (int s = 0; s < 40; ++s) t.step();
  auto be = make_cpu_backend(1);
  Generator g(*be, t.model(), t.full_weights());
  const std::vector<int> prompt = {'t', 'h', 'e', ' '};
  const std::vector<int> out = g.generate(prompt, {12, 0, 0, 1});
  REQUIRE(out.size() == 12);
  CHECK(g.generate(prompt, {12, 0, 0, 1}) == out);  // greedy: deterministic
  // Each token again, from the whole sequence before it in one forward (no cache reuse).
  for (size_t i = 1; i < out.size(); ++i) {
    std::vector<int> seq = prompt;
    seq.insert(seq.end(), out.begin(), out.begin() + i);
    CHECK(g.generate(seq, {1, 0, 0, 1})[0] == out[i]);
  }
  // Trained on one sentence, the model continues it.
  const std::string text(out.begin(), out.end());
  MESSAGE("the " << text);
  CHECK(text.find("at") != std::string::npos);
  // Sampling: the same seed draws the same tokens.
  const SampleOptions hot{12, 1.0, 5, 7};
  CHECK(g.generate(prompt, hot) == g.generate(prompt, hot));
}

TEST_CASE("generate: an exported model and its re-import generate the same text") {
  const TempDir tmp;
  const std::string dir = tmp / "gen_export", corpus = tmp / "gen_export.txt";
  std::filesystem::create_directories(dir);
  write_corpus(corpus);
  {
    Trainer t(parse_train_options(tiny(corpus)), MPI_COMM_SELF);
    for (int s = 0; s < 40; ++s) t.step();
    t.export_weights(dir + "/a");
    // Re-imported and exported again without a step: the same weights in a new directory.
    Trainer b(parse_train_options({"--init-from", dir + "/a", "--data", corpus, "--seq-len", "32",
                                   "--global-batch", "4", "--peak-tflops", "1"}),
              MPI_COMM_SELF);
    b.export_weights(dir + "/b");
  }
  const std::string args = " --prompt \"the cat\" --tokens 24";
  const auto a = spawn(tetra_bin() + " generate --init-from " + dir + "/a" + args, 60);
  const auto b = spawn(tetra_bin() + " generate --init-from " + dir + "/b" + args, 60);
  const auto again = spawn(tetra_bin() + " generate --init-from " + dir + "/a" + args, 60);
  CAPTURE(a.err);
  REQUIRE(a.status == 0);
  REQUIRE(b.status == 0);
  MESSAGE(a.out);
  CHECK(a.out.rfind("the cat", 0) == 0);
  CHECK(a.out.size() == std::string("the cat").size() + 24 + 1);  // bytes, and a newline
  CHECK(b.out == a.out);
  CHECK(again.out == a.out);
  const auto hot = spawn(tetra_bin() + " generate --init-from " + dir + "/a" + args +
                             " --temperature 0.8 --top-k 20 --seed 3",
                         60);
  const auto hot2 = spawn(tetra_bin() + " generate --init-from " + dir + "/a" + args +
                              " --temperature 0.8 --top-k 20 --seed 3",
                          60);
  CHECK(hot.status == 0);
  CHECK(hot.out == hot2.out);
  const auto missing = spawn(tetra_bin() + " generate --init-from " + dir + "/none" + args, 30);
  CHECK(missing.status == 2);
  CHECK(count(missing.err, "tetra: error:") == 1);
}

TEST_CASE("generate: --sample-every prints a sample from rank 0 during training") {
  const TempDir tmp;
  const std::string corpus = write_corpus(tmp / "gen_sample.txt");
  const auto r = spawn(tetra::test::mpirun(2) + tetra_bin() +
                           " train --layers 2 --dim 32 --heads 4 --kv-heads 2 --ffn-dim 64"
                           " --seq-len 32 --global-batch 4 --steps 4 --peak-tflops 1 --pp 2"
                           " --sample-every 2 --data " +
                           corpus,
                       90);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(count(r.out, "sample: \"the cat \" -> \"") == 2);  // after steps 1 and 3
}

TEST_CASE("generate: a sample of token shards with no tokenizer shows their ids, not bytes") {
  const TempDir tmp;
  const std::string bin = tmp / "gen_ids.bin";
  std::vector<uint32_t> tokens;
  for (int i = 0; i < 400; ++i) tokens.push_back(uint32_t(250 + i % 40));  // ids past a byte
  data::write_bin_shard(bin, tokens);
  Trainer t(parse_train_options({"--layers",       "2",   "--dim",     "32", "--heads",       "4",
                                 "--kv-heads",     "2",   "--ffn-dim", "64", "--seq-len",     "16",
                                 "--global-batch", "4",   "--steps",   "1",  "--peak-tflops", "1",
                                 "--vocab",        "300", "--data",    bin}),
            MPI_COMM_SELF);
  const std::string s = t.sample(3);
  MESSAGE(s);
  CHECK(s.rfind("[250 251 252 253 254 255 256 257] -> [", 0) == 0);
}
