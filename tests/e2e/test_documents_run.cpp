// tetra train on JSONL documents: it trains, says whether it tokenized them or reused the
// cache and how many documents it read, refuses a bad line with file:line in one error line, or
// skips and counts them under --skip-bad-lines; bpe:N, which trains on a text file, is refused.
// (Documents in one process: tests/unit/test_documents.cpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "../support/jsonl.hpp"
#include "../support/spawn.hpp"
#include "../support/tiny_model.hpp"
#include "../support/tokenizer_files.hpp"
#include "data/shard.hpp"

using namespace tetra;
using tetra::test::count;
using tetra::test::spawn;
using tetra::test::TempDir;
using tetra::test::tetra_bin;
using tetra::test::tiny_model_flags;

TEST_CASE("documents: tetra train reads them, reports the cache and the lines skipped") {
  const TempDir tmp;
  std::string lines;
  for (int i = 0; i < 40; ++i) lines += "{\"text\": \"document " + std::to_string(i) + " text\"}\n";
  std::ofstream(tmp / "docs.jsonl") << lines;
  std::ofstream(tmp / "bad.jsonl") << lines << tetra::test::kBadJsonl;
  const std::string train = tetra_bin() + " train" + tiny_model_flags({.steps = 1}) + "--data ";
  const auto first = spawn(train + (tmp / "docs.jsonl"));
  CHECK(first.status == 0);
  CHECK(first.out.find("(tokenized now; 40 documents)") != std::string::npos);
  CHECK(first.out.find("data: JSONL documents (40 in 1 file)") != std::string::npos);
  CHECK(spawn(train + (tmp / "docs.jsonl")).out.find("(reused; 40 documents)") !=
        std::string::npos);
  const auto refused = spawn(train + (tmp / "bad.jsonl"));
  CHECK(refused.status == 2);
  CHECK(count(refused.err, "tetra: error:") == 1);
  CHECK(refused.err.find("bad.jsonl:42: has no string \"text\"") != std::string::npos);
  const auto skipped = spawn(train + (tmp / "bad.jsonl") + " --skip-bad-lines");
  CHECK(skipped.status == 0);
  CHECK(skipped.out.find("41 documents, 5 bad lines skipped (first: " + (tmp / "bad.jsonl") +
                         ":42: ") != std::string::npos);
  const auto bpe = spawn(train + (tmp / "docs.jsonl") + " --tokenizer bpe:300");
  CHECK(bpe.status == 2);
  CHECK(bpe.err.find("--tokenizer bpe:300 trains on a text file") != std::string::npos);
}

TEST_CASE("documents: a tokenizer of more than 65,536 tokens trains, its ids cached as uint32") {
  // A byte-level BPE of 70,000 tokens (Llama 3's has 128,256): the 256 bytes, "th" and "the",
  // then tokens no text here makes, and <|endoftext|> as the last, id 69,999, which ends every
  // document: ids past 65,535 in the data, which llm.c's uint16 shards cannot hold.
  const TempDir tmp;
  json tok = tetra::test::byte_level(tetra::test::kTheMerges);
  for (int id = int(tok["model"]["vocab"].size()); id < 69999; ++id)
    tok["model"]["vocab"]["unused" + std::to_string(id)] = id;
  tok["added_tokens"].push_back(tetra::test::added(69999, "<|endoftext|>", true));
  std::ofstream(tmp / "tokenizer.json") << tok.dump();
  std::string lines;
  for (int i = 0; i < 30; ++i) lines += "{\"text\": \"the document " + std::to_string(i) + "\"}\n";
  std::ofstream(tmp / "docs.jsonl") << lines;
  const auto run = spawn(tetra_bin() + " train" + tiny_model_flags({.steps = 2}) + "--data " +
                         (tmp / "docs.jsonl") + " --tokenizer " + (tmp / "tokenizer.json"));
  REQUIRE(run.status == 0);
  CHECK(run.out.find("(tokenized now; 30 documents)") != std::string::npos);
  // The cache: llm.c's uint32 format, the end-of-text id among its tokens.
  std::string bin;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path))
    if (e.path().extension() == ".bin") bin = e.path().string();
  const data::BinShard shard = data::read_bin_shard(bin);
  CHECK(shard.header[0] == 20240801);
  CHECK(shard.header[1] == 7);
  CHECK(std::count(shard.tokens.begin(), shard.tokens.end(), 69999u) == 30);
  CHECK(run.out.find("step     1/2") != std::string::npos);
}
