// Real tokens: --tokenizer bpe:N trains a SentencePiece BPE model on the text, the text is
// tokenized into an llm.c shard cached beside it (reused while text and tokenizer are
// unchanged), and --data also takes a directory or a glob of shards.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../support/corpus.hpp"
#include "../support/spawn.hpp"
#include "cli/options.hpp"
#include "data/dataset.hpp"
#include "data/token_cache.hpp"
#include "data/tokenizer.hpp"
#include "train/generate.hpp"
#include "train/trainer.hpp"

using namespace tetra;
using tetra::test::corpus_dir;
using tetra::test::count;
using tetra::test::only_file;
using tetra::test::spawn;
using tetra::test::TempDir;
using tetra::test::tetra_bin;

namespace {

const std::string kTiny =
    " train --layers 2 --dim 32 --heads 4 --kv-heads 2 --ffn-dim 64 --seq-len 16"
    " --global-batch 4 --peak-tflops 1 ";

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

TEST_CASE("tokenizer: a trained BPE model encodes and decodes text back exactly") {
  if (!data::have_sentencepiece()) {
    MESSAGE("skipped: this build has no SentencePiece");
    return;
  }
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp);
  bool trained = false;
  const std::string model = data::tokenizer_model("bpe:400", dir + "/corpus.txt", &trained);
  CHECK(trained);
  const auto tok = data::load_sentencepiece(model);
  CHECK(tok->vocab() == 400);
  for (const std::string& text :
       {std::string("the cat sees the bird.\nthe old fox helps a child"),
        std::string("  two spaces, digits 12345, tabs\tand héllo wörld\n"),
        std::string("zebra quokka: words it never saw")}) {
    CAPTURE(text);
    const std::vector<int> ids = tok->encode(text);
    CHECK(tok->decode(ids) == text);
  }
  // Common words are single pieces: far fewer tokens than bytes.
  CHECK(tok->encode("the teacher reads to the crowd").size() < 12);
  // The same text trains the same model, which is then found, not trained again.
  CHECK(data::tokenizer_model("bpe:400", dir + "/corpus.txt", &trained) == model);
  CHECK(!trained);
}

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

TEST_CASE("tokenizer: training on BPE tokens lowers the validation loss; the export carries it") {
  if (!data::have_sentencepiece()) {
    MESSAGE("skipped: this build has no SentencePiece");
    return;
  }
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp);
  TrainConfig o = parse_train_options({"--layers",       "2",
                                       "--dim",          "32",
                                       "--heads",        "4",
                                       "--kv-heads",     "2",
                                       "--ffn-dim",      "64",
                                       "--seq-len",      "16",
                                       "--global-batch", "4",
                                       "--steps",        "25",
                                       "--lr",           "1e-2",
                                       "--peak-tflops",  "1",
                                       "--data",         dir + "/corpus.txt",
                                       "--tokenizer",    "bpe:400",
                                       "--val-split",    "0.1"});
  Trainer t(o, MPI_COMM_SELF);
  CHECK(t.model().vocab == 400);
  CHECK(t.model().rows() == 512);
  const double before = t.evaluate();
  for (int s = 0; s < 25; ++s) t.step();
  const double after = t.evaluate();
  MESSAGE("validation loss " << before << " -> " << after);
  CHECK(after < before - 1.5);
  t.export_weights(dir + "/model");
  CHECK(std::filesystem::exists(dir + "/model/tokenizer.model"));
  CHECK(std::filesystem::exists(dir + "/model/tokenizer_config.json"));
  // Going on from the directory, the text is tokenized with its tokenizer, unasked: the
  // same validation loss.
  Trainer u(parse_train_options({"--init-from", dir + "/model", "--seq-len", "16", "--global-batch",
                                 "4", "--steps", "25", "--peak-tflops", "1", "--data",
                                 dir + "/corpus.txt", "--val-split", "0.1"}),
            MPI_COMM_SELF);
  CHECK(u.model().vocab == 400);
  CHECK(u.evaluate() == after);
}

TEST_CASE("tokenizer: a bad tokenizer or tokens given as text is one error line, exit 2") {
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp), text = dir + "/corpus.txt";
  std::ofstream(dir + "/corrupt.model") << "not a model";
  data::write_bin_shard(dir + "/tokens.bin", std::vector<uint16_t>(100, 7));
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

TEST_CASE("data: a directory or a glob of .bin shards is one source, in sorted order") {
  const TempDir tmp;
  const std::string dir = tmp / "shards";
  std::filesystem::create_directories(dir);
  std::vector<uint16_t> a, b;
  for (int i = 0; i < 50; ++i) a.push_back(uint16_t(i));
  for (int i = 0; i < 50; ++i) b.push_back(uint16_t(100 + i));
  data::write_bin_shard(dir + "/train_001.bin", b);  // written first, sorted second
  data::write_bin_shard(dir + "/train_000.bin", a);
  for (const std::string& spec : {dir, dir + "/train_*.bin"}) {
    CAPTURE(spec);
    const auto ds = data::open_dataset(spec, 256, 9, 1);
    CHECK(ds->num_sequences() == (100 - 1) / 9);
    std::vector<int32_t> seq(10);
    ds->sequence(5, seq.data());  // tokens 45 .. 54: across the two shards
    CHECK(seq[0] == 45);
    CHECK(seq[4] == 49);
    CHECK(seq[5] == 100);
  }
  std::ofstream(dir + "/train_002.bin") << "text, not a shard";
  CHECK_THROWS_WITH_AS(data::open_dataset(dir + "/train_*", 256, 9, 1),
                       doctest::Contains("is not an llm.c .bin shard"), Error);
  CHECK_THROWS_WITH_AS(data::open_dataset(dir + "/nothing_*.bin", 256, 9, 1),
                       doctest::Contains("matches no file"), Error);
}

TEST_CASE("tokenizer: a continuation keeps the space where it joins the prompt") {
  if (!data::have_sentencepiece()) {
    MESSAGE("skipped: this build has no SentencePiece");
    return;
  }
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp);
  bool trained = false;
  const auto tok =
      data::load_sentencepiece(data::tokenizer_model("bpe:400", dir + "/corpus.txt", &trained));
  const std::string text = "the old fox helps the crowd, and a dog reads to her sister";
  const std::vector<int> ids = tok->encode(text);
  int glued = 0;  // cuts where decoding the two halves apart loses the space between them
  for (size_t k = 1; k < ids.size(); ++k) {
    CAPTURE(k);
    const std::vector<int> head(ids.begin(), ids.begin() + k), tail(ids.begin() + k, ids.end());
    CHECK(tok->decode(head) + data::decode_continuation(*tok, head, tail) == text);
    glued += tok->decode(head) + tok->decode(tail) != text;
  }
  CHECK(glued > 0);
  // Bytes decode piece by piece.
  const auto bytes = data::byte_tokenizer();
  CHECK(data::decode_continuation(*bytes, {'a', ' '}, {'b'}) == "b");
}

TEST_CASE("tokenizer: one of more pieces than an llm.c shard's uint16 holds is refused") {
  // Its ids here are all small: the refusal must not depend on which ones a text uses.
  struct Wide final : data::Tokenizer {
    explicit Wide(std::string f) : file(std::move(f)) {}
    int vocab() const override { return 70000; }
    std::vector<int> encode(const std::string& t) const override {
      return std::vector<int>(t.size(), 5);
    }
    std::string decode(const std::vector<int>& ids) const override {
      return std::string(ids.size(), 'x');
    }
    std::string model_file() const override { return file; }
    std::string file;
  };
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp);
  std::ofstream(dir + "/wide.model") << "its bytes name the cached shard";
  CHECK_THROWS_WITH_AS(data::tokenize_cached(dir + "/corpus.txt", Wide(dir + "/wide.model")),
                       doctest::Contains("has 70000 pieces"), Error);
  CHECK(only_file(dir, ".bin").empty());
}

TEST_CASE("data: a text file whose name holds a wildcard character is that file, not a glob") {
  const TempDir tmp;
  const std::string dir = tmp / "wild";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/notes [draft].txt";
  std::ofstream(path) << std::string(100, 'a');
  const auto ds = data::open_dataset(path, 256, 9, 1);
  CHECK(ds->num_sequences() == (100 - 1) / 9);
  CHECK(ds->describe().rfind("text file", 0) == 0);
}

TEST_CASE("tokenizer: token shards on a model directory are its tokenizer's: samples, export") {
  if (!data::have_sentencepiece()) {
    MESSAGE("skipped: this build has no SentencePiece");
    return;
  }
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp);
  const std::vector<std::string> run = {"--seq-len", "16", "--global-batch", "4",
                                        "--steps",   "1",  "--peak-tflops",  "1"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), run.begin(), run.end());
    return parse_train_options(args);
  };
  Trainer(with({"--layers", "2", "--dim", "32", "--heads", "4", "--kv-heads", "2", "--ffn-dim",
                "64", "--data", dir + "/corpus.txt", "--tokenizer", "bpe:400"}),
          MPI_COMM_SELF)
      .export_weights(dir + "/model");
  const std::string bin = only_file(dir, ".bin");
  REQUIRE(!bin.empty());
  // Going on from the directory on the cached shard (its tokens), not on the text.
  Trainer u(with({"--init-from", dir + "/model", "--data", bin, "--vocab", "400"}), MPI_COMM_SELF);
  const auto tok = data::load_sentencepiece(dir + "/model/tokenizer.model");
  const auto ds = data::open_dataset(bin, 400, 16, 1);
  std::vector<int32_t> seq(17);
  ds->sequence(0, seq.data());
  const std::string prompt = printable(tok->decode(std::vector<int>(seq.begin(), seq.begin() + 8)));
  CHECK(u.sample(4).rfind(prompt + " -> ", 0) == 0);
  u.export_weights(dir + "/again");
  CHECK(tetra::test::slurp(dir + "/again/tokenizer.model") ==
        tetra::test::slurp(dir + "/model/tokenizer.model"));
}

TEST_CASE("tokenizer: tetra generate refuses a tokenizer.model of another vocabulary") {
  if (!data::have_sentencepiece()) {
    MESSAGE("skipped: this build has no SentencePiece");
    return;
  }
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp);
  bool trained = false;
  const std::string model = data::tokenizer_model("bpe:400", dir + "/corpus.txt", &trained);
  // A byte-level model (256 tokens) given the 400-piece tokenizer.
  const auto made = spawn(tetra_bin() + kTiny + "--steps 1 --export " + dir + "/m", 60);
  REQUIRE(made.status == 0);
  std::filesystem::copy_file(model, dir + "/m/tokenizer.model");
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
