// Real tokens: --tokenizer bpe:N trains a SentencePiece BPE model on the text, the text is
// tokenized into an llm.c shard cached beside it, and --data also takes a directory or a
// glob of shards. (Runs of tetra with real tokens: tests/e2e/test_tokenizer_run.cpp.)
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../support/corpus.hpp"
#include "../support/test_util.hpp"
#include "cli/options.hpp"
#include "data/dataset.hpp"
#include "data/token_cache.hpp"
#include "data/tokenizer.hpp"
#include "train/trainer.hpp"
#include "util/format.hpp"

using namespace tetra;
using tetra::test::corpus_dir;
using tetra::test::only_file;
using tetra::test::TempDir;

TEST_CASE("tokenizer: a trained BPE model encodes and decodes text back exactly") {
  if (!data::have_sentencepiece()) {
    MESSAGE("skipped: this build has no SentencePiece");
    return;
  }
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp);
  const data::TokenizerModel model = data::tokenizer_model("bpe:400", dir + "/corpus.txt");
  CHECK(!model.trained.empty());  // trained now, in memory
  CHECK(!std::filesystem::exists(model.path));
  data::save_tokenizer_model(model);
  const auto tok = data::load_sentencepiece(model.path);
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
  const data::TokenizerModel again = data::tokenizer_model("bpe:400", dir + "/corpus.txt");
  CHECK(again.path == model.path);
  CHECK(again.trained.empty());
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

TEST_CASE("data: a directory or a glob of .bin shards is one source, in sorted order") {
  const TempDir tmp;
  const std::string dir = tmp / "shards";
  std::filesystem::create_directories(dir);
  std::vector<uint32_t> a, b;
  for (int i = 0; i < 50; ++i) a.push_back(uint32_t(i));
  for (int i = 0; i < 50; ++i) b.push_back(uint32_t(100 + i));
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
  const auto tok =
      data::load_tokenizer_model(data::tokenizer_model("bpe:400", dir + "/corpus.txt"));
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

TEST_CASE(
    "tokenizer: one of more pieces than uint16 holds makes a uint32 shard (llm.c's Llama 3 "
    "format)") {
  // Its ids here are mostly small: the width follows the vocabulary, not the ids a text uses.
  struct Wide final : data::Tokenizer {
    explicit Wide(std::string f) : file(std::move(f)) {}
    int vocab() const override { return 70000; }
    std::vector<int> encode(const std::string& t) const override {
      std::vector<int> ids(t.size(), 5);
      ids[1] = 69999;
      return ids;
    }
    std::string decode(const std::vector<int>& ids) const override {
      return std::string(ids.size(), 'x');
    }
    int end_of_text() const override { return -1; }
    std::string model_file() const override { return file; }
    std::string kind() const override { return "wide"; }
    std::string file;
  };
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp);
  std::ofstream(dir + "/wide.model") << "its bytes name the cached shard";
  const Wide wide(dir + "/wide.model");
  const data::CachedShard made = data::tokenize_cached(dir + "/corpus.txt", wide);
  CHECK_FALSE(made.reused);
  // llm.c's header: magic 20240801, version 7, then uint32 tokens, 4 bytes each.
  std::ifstream in(made.bin, std::ios::binary);
  std::vector<int32_t> header(256);
  in.read(reinterpret_cast<char*>(header.data()), 1024);
  CHECK(header[0] == 20240801);
  CHECK(header[1] == 7);
  const int64_t count = header[2];
  CHECK(int64_t(std::filesystem::file_size(made.bin)) == 1024 + 4 * count);
  const data::BinShard shard = data::read_bin_shard(made.bin);
  CHECK(shard.width == data::TokenWidth::U32);
  REQUIRE(shard.tokens.size() > 2);
  CHECK(shard.tokens[0] == 5);
  CHECK(shard.tokens[1] == 69999);
  // Reused as it is the second time (its record's token hash is over the uint32 bytes).
  CHECK(data::tokenize_cached(dir + "/corpus.txt", wide).reused);
  // And trained on: a dataset of the vocabulary reads the ids past 65,535.
  const auto ds = data::open_dataset(made.bin, 70000, 8, 1);
  std::vector<int32_t> seq(9);
  ds->sequence(0, seq.data());
  CHECK(seq[1] == 69999);
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
