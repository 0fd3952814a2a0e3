// Data sources and the sampler: sequence order exactly as docs/design.md states it, the text
// and .bin readers with their error messages, and the synthetic chain's determinism and
// entropy floor.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../support/test_util.hpp"
#include "data/dataset.hpp"
#include "data/hash.hpp"
#include "util/error.hpp"

using tetra::data::Dataset;
using tetra::data::fill_batch;
using tetra::data::open_dataset;
using tetra::data::write_bin_shard;

using tetra::test::error_of;
using tetra::test::TempDir;

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// An llm.c header with the given words and then raw uint16 tokens, for malformed shards.
void write_raw_shard(const std::string& path, int32_t magic, int32_t version, int32_t count,
                     const std::vector<uint16_t>& tokens) {
  std::array<int32_t, 256> header{};
  header[0] = magic;
  header[1] = version;
  header[2] = count;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), sizeof(header));
  out.write(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(uint16_t));
}

std::vector<int32_t> batch(const Dataset& ds, int64_t step, int global_batch, int first, int count,
                           int seq_len) {
  std::vector<int32_t> out(size_t(count) * (seq_len + 1), -1);
  fill_batch(ds, step, global_batch, first, count, seq_len, out.data());
  return out;
}

// doctest's matcher for "the exception message contains this"; it takes no std::string.
doctest::Contains has(const std::string& part) {
  return doctest::Contains(part.c_str());
}

std::vector<int32_t> tokens_of(const std::string& text) {
  std::vector<int32_t> out;
  for (char c : text) out.push_back(static_cast<unsigned char>(c));
  return out;
}

}  // namespace

TEST_CASE("data: .bin shard follows the contract's sequence order, with wrap-around mod K") {
  TempDir dir;
  const std::string path = dir.file("order.bin");
  // T = 23 tokens 100..122; S = 4 gives K = floor(22/4) = 5, sequence k = tokens 4k..4k+4.
  std::vector<uint32_t> tokens;
  for (int i = 0; i < 23; ++i) tokens.push_back(uint32_t(100 + i));
  write_bin_shard(path, tokens);
  const auto ds = open_dataset(path, 256, 4, 0);
  CHECK(ds->num_sequences() == 5);
  CHECK(ds->entropy_floor() < 0);
  CHECK(ds->describe().find("23 tokens") != std::string::npos);

  // G = 3. Step 0 takes sequences 0, 1, 2.
  CHECK(batch(*ds, 0, 3, 0, 3, 4) == std::vector<int32_t>{100, 101, 102, 103, 104,  //
                                                          104, 105, 106, 107, 108,  //
                                                          108, 109, 110, 111, 112});
  // Step 1 takes sequences 3, 4 and then (1*3 + 2) mod 5 = 0.
  CHECK(batch(*ds, 1, 3, 0, 3, 4) == std::vector<int32_t>{112, 113, 114, 115, 116,  //
                                                          116, 117, 118, 119, 120,  //
                                                          100, 101, 102, 103, 104});
  // A rank's slice is the same sequences as the matching part of the whole batch.
  CHECK(batch(*ds, 1, 3, 1, 2, 4) == std::vector<int32_t>{116, 117, 118, 119, 120,  //
                                                          100, 101, 102, 103, 104});
  // Step 7 starts at 21 mod 5 = 1; far steps wrap the same way.
  CHECK(batch(*ds, 7, 3, 0, 1, 4) == std::vector<int32_t>{104, 105, 106, 107, 108});
  CHECK(batch(*ds, 1'000'000'000'000, 3, 0, 1, 4) == batch(*ds, 0, 3, 0, 1, 4));
}

TEST_CASE("data: .bin shard uses only the header's token count") {
  TempDir dir;
  const std::string path = dir.file("extra.bin");
  // 9 counted tokens, then 3 extra ones that are out of vocabulary and must be ignored.
  write_raw_shard(path, 20240520, 1, 9, {0, 1, 2, 3, 4, 5, 6, 7, 8, 900, 901, 902});
  const auto ds = open_dataset(path, 16, 2, 0);
  CHECK(ds->num_sequences() == 4);  // floor((9-1)/2)
  CHECK(batch(*ds, 0, 4, 3, 1, 2) == std::vector<int32_t>{6, 7, 8});
}

TEST_CASE("data: a shard is known by its magic number, whatever its name") {
  TempDir dir;
  const std::string path = dir.file("shard.txt");
  write_raw_shard(path, 20240520, 1, 9, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  const auto ds = open_dataset(path, 16, 2, 0);
  CHECK(ds->num_sequences() == 4);  // the 9 tokens, not the 1 KiB header read as bytes
  CHECK(batch(*ds, 0, 4, 3, 1, 2) == std::vector<int32_t>{6, 7, 8});
  CHECK(ds->describe().find("llm.c shard") != std::string::npos);
}

TEST_CASE("data: uint32 shards (llm.c's Llama 3 format) beside uint16 ones") {
  TempDir dir;
  // Ids past 65,535, as a Llama 3 tokenizer's (128,256 tokens) are.
  const std::vector<uint32_t> tokens = {128000, 5, 70000, 65536, 65535, 0, 128255, 9, 1};
  const std::string wide = dir.file("wide.bin");
  write_bin_shard(wide, tokens, tetra::data::TokenWidth::U32);
  CHECK(std::filesystem::file_size(wide) == 1024 + 4 * tokens.size());
  const tetra::data::BinShard read = tetra::data::read_bin_shard(wide);
  CHECK(read.header[0] == 20240801);
  CHECK(read.header[1] == 7);
  CHECK(read.width == tetra::data::TokenWidth::U32);
  CHECK(read.tokens == tokens);
  CHECK(tetra::data::is_bin_shard(wide));
  const auto ds = open_dataset(wide, 128256, 2, 0);
  CHECK(batch(*ds, 0, 4, 0, 2, 2) == std::vector<int32_t>{128000, 5, 70000, 70000, 65536, 65535});
  CHECK(ds->describe().find("llm.c shard") != std::string::npos);
  CHECK_THROWS_WITH_AS(
      open_dataset(wide, 100000, 2, 0),
      doctest::Contains("token id 128000 at position 0 is not below `model.vocab` 100000"),
      tetra::Error);
  // A uint16 shard keeps its format, and refuses an id it cannot hold rather than cut it.
  const std::string narrow = dir.file("narrow.bin");
  write_bin_shard(narrow, {1, 2, 65535});
  CHECK(std::filesystem::file_size(narrow) == 1024 + 2 * 3);
  CHECK(tetra::data::read_bin_shard(narrow).width == tetra::data::TokenWidth::U16);
  CHECK_THROWS_WITH_AS(write_bin_shard(narrow, tokens),
                       doctest::Contains("token id 128000 does not fit the uint16 tokens"),
                       tetra::Error);
  // The width goes with the vocabulary: uint16 up to 65,536 tokens.
  CHECK(tetra::data::token_width(65536) == tetra::data::TokenWidth::U16);
  CHECK(tetra::data::token_width(65537) == tetra::data::TokenWidth::U32);
  // llm.c's uint32 magic with another version, and a file shorter than its count, are refused.
  const std::string version = dir.file("version7.bin");
  write_raw_shard(version, 20240801, 1, 2, {1, 0, 2, 0});
  CHECK_THROWS_WITH_AS(open_dataset(version, 256, 1, 0),
                       doctest::Contains("unsupported version 1 (expected 7 with magic 20240801)"),
                       tetra::Error);
  const std::string short32 = dir.file("short32.bin");
  write_raw_shard(short32, 20240801, 7, 3, {1, 0, 2, 0});  // 2 uint32 tokens for a count of 3
  CHECK_THROWS_WITH_AS(open_dataset(short32, 256, 1, 0),
                       doctest::Contains("header says 3 tokens but the file holds 2"),
                       tetra::Error);
}

TEST_CASE("data: a text file's bytes are its tokens") {
  TempDir dir;
  const std::string path = dir.file("corpus.txt");
  write_bytes(path, "abcdefghij");
  // T = 10, S = 3: K = 3 sequences "abcd", "defg", "ghij".
  const auto ds = open_dataset(path, 256, 3, 0);
  CHECK(ds->num_sequences() == 3);
  CHECK(batch(*ds, 0, 2, 0, 2, 3) == tokens_of("abcddefg"));
  CHECK(batch(*ds, 1, 2, 0, 2, 3) == tokens_of("ghijabcd"));  // 3 mod 3 = 0

  // Bytes above 127 are tokens 128..255, not negative numbers.
  const std::string utf8 = dir.file("utf8.txt");
  write_bytes(utf8, "caf\xC3\xA9!");
  const auto u = open_dataset(utf8, 256, 5, 0);
  CHECK(batch(*u, 0, 1, 0, 1, 5) == std::vector<int32_t>{'c', 'a', 'f', 0xC3, 0xA9, '!'});

  // T = S+1 is the shortest source: exactly one sequence.
  CHECK(open_dataset(path, 256, 9, 0)->num_sequences() == 1);
}

TEST_CASE("data: bad sources fail with a message naming the file and the problem") {
  TempDir dir;
  using tetra::Error;

  const std::string missing_txt = dir.file("missing.txt");
  CHECK_THROWS_WITH_AS(open_dataset(missing_txt, 256, 4, 0),
                       has("data file '" + missing_txt + "': not found"), Error);
  const std::string missing_bin = dir.file("missing.bin");
  CHECK_THROWS_WITH_AS(open_dataset(missing_bin, 256, 4, 0),
                       has("data file '" + missing_bin + "': not found"), Error);
  // A directory is a set of shards; this one has none.
  CHECK_THROWS_WITH_AS(open_dataset(dir.path.string(), 256, 4, 0),
                       has("holds no .jsonl documents or .bin shards"), Error);

  const std::string magic = dir.file("magic.bin");
  write_raw_shard(magic, 123, 1, 10, std::vector<uint16_t>(10, 0));
  CHECK_THROWS_WITH_AS(
      open_dataset(magic, 256, 4, 0),
      has("data file '" + magic +
          "': bad magic 123 (expected 20240520 for uint16 tokens or 20240801 for uint32)"),
      Error);

  const std::string version = dir.file("version.bin");
  write_raw_shard(version, 20240520, 2, 10, std::vector<uint16_t>(10, 0));
  CHECK_THROWS_WITH_AS(open_dataset(version, 256, 4, 0),
                       has("data file '" + version + "': unsupported version 2"), Error);

  const std::string truncated = dir.file("truncated.bin");
  write_raw_shard(truncated, 20240520, 1, 1000, std::vector<uint16_t>(10, 0));
  CHECK_THROWS_WITH_AS(
      open_dataset(truncated, 256, 4, 0),
      has("data file '" + truncated + "': header says 1000 tokens but the file holds 10"), Error);

  const std::string headless = dir.file("headless.bin");
  write_bytes(headless, "tiny");
  CHECK_THROWS_WITH_AS(open_dataset(headless, 256, 4, 0),
                       has("too short for the 1024-byte llm.c header"), Error);

  const std::string big_token = dir.file("vocab.bin");
  std::vector<uint32_t> tokens(40, 1);
  tokens[17] = 300;
  write_bin_shard(big_token, tokens);
  CHECK_THROWS_WITH_AS(open_dataset(big_token, 256, 4, 0),
                       has("data file '" + big_token +
                           "': token id 300 at position 17 is not below `model.vocab` 256"),
                       Error);

  // The byte tokenizer's ids are byte values, checked the same way ('x' is 120).
  const std::string text = dir.file("text.txt");
  write_bytes(text, "aaax");
  CHECK_THROWS_WITH_AS(
      open_dataset(text, 100, 1, 0),
      has("data file '" + text + "': token id 120 at position 3 is not below `model.vocab` 100"),
      Error);

  const std::string short_text = dir.file("short.txt");
  write_bytes(short_text, "12345");
  CHECK_THROWS_WITH_AS(
      open_dataset(short_text, 256, 64, 0),
      has("data '" + short_text + "' holds 5 tokens, fewer than one sequence of seq-len+1 = 65"),
      Error);
  CHECK_THROWS_WITH_AS(open_dataset(short_text, 256, 5, 0),
                       has("fewer than one sequence of seq-len+1 = 6"), Error);

  CHECK_THROWS_WITH_AS(open_dataset("synthetic", 3, 8, 0), has("`model.vocab` of at least 4"),
                       Error);
}

TEST_CASE("data: the hash is splitmix64") {
  // splitmix64 seeded with 0 first returns mix(0x9E3779B97F4A7C15): the published value.
  CHECK(tetra::data::mix(0x9E3779B97F4A7C15ull) == 0xE220A8397B1DCDAFull);
  CHECK(tetra::data::hash_words({1, 2}) != tetra::data::hash_words({2, 1}));
}

TEST_CASE("data: synthetic sequences depend only on (seed, k)") {
  const int S = 32;
  const auto a = open_dataset("synthetic", 256, S, 7);
  const auto b = open_dataset("synthetic", 256, S, 7);
  const auto other = open_dataset("synthetic", 256, S, 8);
  CHECK(a->num_sequences() == INT64_MAX);

  // Same seed: the same sequences, whatever order or batch they are asked for in.
  std::vector<int32_t> x(S + 1), y(S + 1);
  for (int64_t k : {int64_t(0), int64_t(1), int64_t(99), int64_t(1) << 50}) {
    a->sequence(k, x.data());
    b->sequence(k, y.data());
    CHECK(x == y);
  }
  a->sequence(13, x.data());
  CHECK(batch(*b, 3, 4, 1, 1, S) == x);  // step 3, G = 4, position 1 is sequence 13

  // Different seed: different sequences; different k: different sequences.
  int differ_seed = 0, differ_k = 0;
  for (int64_t k = 0; k < 50; ++k) {
    a->sequence(k, x.data());
    other->sequence(k, y.data());
    differ_seed += x != y;
    a->sequence(k + 1, y.data());
    differ_k += x != y;
  }
  CHECK(differ_seed == 50);
  CHECK(differ_k == 50);
}

TEST_CASE("data: synthetic tokens stay in the alphabet of min(vocab, 64) symbols") {
  for (int vocab : {4, 10, 64, 256, 50000}) {
    CAPTURE(vocab);
    const int alphabet = std::min(vocab, 64);
    const auto ds = open_dataset("synthetic", vocab, 64, 1);
    CHECK(ds->describe().find("over " + std::to_string(alphabet) + " symbols") !=
          std::string::npos);
    const auto tokens = batch(*ds, 0, 200, 0, 200, 64);
    CHECK(*std::min_element(tokens.begin(), tokens.end()) == 0);
    CHECK(*std::max_element(tokens.begin(), tokens.end()) == alphabet - 1);
  }
}

TEST_CASE("data: synthetic transitions reach the entropy floor 1.75 ln 2") {
  const auto ds = open_dataset("synthetic", 256, 100, 42);
  CHECK(ds->entropy_floor() == doctest::Approx(1.75 * std::log(2.0)));
  CHECK(ds->describe() ==
        "synthetic: order-1 Markov chain over 64 symbols, entropy floor 1.2130 nats/token");

  // 2000 sequences of 100 transitions: counts[a][b] of token a followed by token b.
  std::vector<std::array<int64_t, 64>> counts(64, std::array<int64_t, 64>{});
  const auto tokens = batch(*ds, 0, 2000, 0, 2000, 100);
  for (size_t s = 0; s < 2000; ++s)
    for (size_t p = 0; p < 100; ++p) ++counts[tokens[s * 101 + p]][tokens[s * 101 + p + 1]];

  // Empirical H(next | current) = -sum_ab n_ab/N ln(n_ab / n_a).
  double entropy = 0;
  int64_t total = 0;
  for (const auto& row : counts) {
    int64_t n_a = 0, successors = 0;
    for (int64_t n : row) n_a += n, successors += n > 0;
    CHECK(successors <= 4);
    if (n_a >= 200) CHECK(successors == 4);  // a row seen this often shows all 4, distinct
    for (int64_t n : row)
      if (n > 0) entropy -= double(n) * std::log(double(n) / double(n_a));
    total += n_a;
  }
  entropy /= double(total);
  CHECK(total == 200'000);
  CAPTURE(entropy);
  CHECK(std::abs(entropy - ds->entropy_floor()) < 0.02);
}
