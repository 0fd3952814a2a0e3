// Runs of tetra with real tokens: the token shard cached beside the text and reused while
// text and tokenizer are unchanged; a bad tokenizer, tokens given as text, and a
// tokenizer.model of another vocabulary refused; tools/corpus.sh keeping every document.
// (The tokenizer and the shards in one process: tests/unit/test_tokenizer.cpp.)
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../support/corpus.hpp"
#include "../support/spawn.hpp"
#include "../support/tiny_model.hpp"
#include "data/dataset.hpp"
#include "data/token_cache.hpp"
#include "data/tokenizer.hpp"

using namespace tetra;
using tetra::test::corpus_dir;
using tetra::test::count;
using tetra::test::only_file;
using tetra::test::spawn;
using tetra::test::TempDir;
using tetra::test::tetra_bin;

namespace {

const std::string kTiny = " train" + tetra::test::tiny_model_flags();

struct Stat {
  ino_t inode = 0;
  int64_t mtime_ns = 0;
  bool operator==(const Stat&) const = default;
};
Stat stat_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return {st.st_ino, int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

}  // namespace

TEST_CASE("tokenizer: token shards are cached beside the text and reused") {
  if (!data::have_sentencepiece()) {
    MESSAGE("skipped: this build has no SentencePiece");
    return;
  }
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp), text = dir + "/corpus.txt";
  const std::string cmd = tetra_bin() + kTiny + "--steps 1 --data " + text + " --tokenizer bpe:400";
  const auto first = spawn(cmd, 120);
  CAPTURE(first.err);
  REQUIRE(first.status == 0);
  CHECK(count(first.out, "(trained now)") == 1);
  CHECK(count(first.out, "(tokenized now)") == 1);
  const std::string bin = only_file(dir, ".bin"), model = only_file(dir, ".model");
  REQUIRE(!bin.empty());
  const Stat before = stat_of(bin), model_before = stat_of(model);
  const auto second = spawn(cmd, 120);
  REQUIRE(second.status == 0);
  CHECK(count(second.out, "(reused)") == 2);
  CHECK(stat_of(bin) == before);
  CHECK(stat_of(model) == model_before);
  // The shard decodes back to the text.
  const auto tok = data::load_sentencepiece(model);
  const auto ds = data::open_dataset(bin, tok->vocab(), 16, 1);
  std::vector<int32_t> seq(17);
  ds->sequence(0, seq.data());
  CHECK(tetra::test::slurp(text).rfind(tok->decode(std::vector<int>(seq.begin(), seq.end())), 0) ==
        0);
  // Changed text: a new shard (the model, trained on the old text, is named by it too).
  std::ofstream(text, std::ios::app) << "the end.\n";
  const auto third = spawn(cmd, 120);
  REQUIRE(third.status == 0);
  CHECK(count(third.out, "(tokenized now)") == 1);
  CHECK(count(third.out, "(trained now)") == 1);
}

TEST_CASE("tokenizer: a bad tokenizer or tokens given as text is one error line, exit 2") {
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp), text = dir + "/corpus.txt";
  std::ofstream(dir + "/corrupt.model") << "not a model";
  data::write_bin_shard(dir + "/tokens.bin", std::vector<uint32_t>(100, 7));
  struct Case {
    std::string flags, message;
  };
  const std::vector<Case> cases = {
      {"--data " + text + " --tokenizer " + dir + "/missing.model",
       "tokenizer '" + dir + "/missing.model': not found"},
      {"--data " + text + " --tokenizer " + dir + "/corrupt.model", "not a SentencePiece model"},
      {"--data " + dir + "/tokens.bin --tokenizer bpe:400", "is an llm.c .bin shard"},
      {"--data " + text + " --tokenizer bpe:many", "N in bpe:N must be a positive integer"},
      {"--tokenizer bpe:400", "--tokenizer needs text data"},
      {"--data " + text + " --tokenizer bpe:400 --vocab 300", "--vocab and --tokenizer exclude"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.flags);
    const auto r = spawn(tetra_bin() + kTiny + "--steps 1 " + c.flags, 60);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(count(r.err, c.message) == 1);
  }
}

TEST_CASE("tokenizer: tetra generate refuses a tokenizer.model of another vocabulary") {
  if (!data::have_sentencepiece()) {
    MESSAGE("skipped: this build has no SentencePiece");
    return;
  }
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp);
  const data::TokenizerModel model = data::tokenizer_model("bpe:400", dir + "/corpus.txt");
  data::save_tokenizer_model(model);
  // A byte-level model (256 tokens) given the 400-piece tokenizer.
  const auto made = spawn(tetra_bin() + kTiny + "--steps 1 --export " + dir + "/m", 60);
  REQUIRE(made.status == 0);
  std::filesystem::copy_file(model.path, dir + "/m/tokenizer.model");
  const auto r =
      spawn(tetra_bin() + " generate --init-from " + dir + "/m --prompt 'the cat' --tokens 8", 60);
  CAPTURE(r.out);
  CHECK(r.status == 2);
  CHECK(count(r.err, "tetra: error:") == 1);
  CHECK(count(r.err, "has 256 tokens, and the tokenizer '" + dir +
                         "/m/tokenizer.model' has 400 pieces") == 1);
}

TEST_CASE("corpus.sh: every text document is kept, also one longer than a pipe's buffer") {
  const TempDir tmp;
  const std::string dir = tmp / "corpus_sh";
  std::filesystem::create_directories(dir + "/licenses");
  std::filesystem::create_directories(dir + "/doc/pkg");
  {
    std::ofstream big(dir + "/licenses/BIG");  // ~190 kB: more than two pipe buffers of 64 kB
    for (int i = 0; i < 11000; ++i) big << "alpha line " << i << "\n";
  }
  std::ofstream(dir + "/licenses/SMALL") << "beta, a short license\n";
  std::ofstream(dir + "/doc/pkg/README") << "gamma, a readme\n";
  const auto r = spawn("CORPUS_LICENSES=" + dir + "/licenses CORPUS_DOCS=" + dir + "/doc bash " +
                           std::string(TETRA_SOURCE_DIR) + "/tools/corpus.sh " + dir + "/out",
                       60);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(count(r.out, "corpus: 3 documents") == 1);
  const std::string train = tetra::test::slurp(dir + "/out/train.txt");
  CHECK(count(train, "alpha line 10999\n") == 1);
  CHECK(count(train, "beta, a short license") == 1);
  CHECK(count(train, "gamma, a readme") == 1);
}
