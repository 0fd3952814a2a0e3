// tetra tokenize on tokenizer.json files written here: the ids of a text and of a document,
// ids decoded, and one error line for a file that asks for what tetra does not implement, for
// ids that are not the tokenizer's and for text that is not UTF-8. (The tokenizer's pieces in
// one process: tests/unit/test_tokenizer_json.cpp.)
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "../support/spawn.hpp"
#include "../support/tokenizer_files.hpp"

using namespace tetra;
using tetra::test::added;
using tetra::test::byte_level;
using tetra::test::kTheMerges;
using tetra::test::spawn;
using tetra::test::TempDir;
using tetra::test::tetra_bin;

TEST_CASE("tokenizer.json: a refusal on the command line is one error line, exit status 2") {
  const TempDir tmp;
  json j = byte_level(kTheMerges);
  j["normalizer"] = {{"type", "NFKC"}};
  std::ofstream(tmp / "nfkc.json") << j.dump();
  const auto r =
      spawn(tetra_bin() + " tokenize --tokenizer " + (tmp / "nfkc.json") + " </dev/null");
  CHECK(r.status == 2);
  CHECK(r.err == "tetra: error: tokenizer '" + (tmp / "nfkc.json") +
                     "': normalizer type 'NFKC' is not supported\n");
}

TEST_CASE("tokenizer.json: tetra tokenize writes ids, a document's, and decodes them") {
  const TempDir tmp;
  json j = byte_level(kTheMerges);
  j["added_tokens"] = {added(260, "<|endoftext|>", true)};
  std::ofstream(tmp / "tok.json") << j.dump();
  std::ofstream(tmp / "in.txt") << "the<|endoftext|>";
  const std::string cmd = tetra_bin() + " tokenize --tokenizer " + (tmp / "tok.json");
  CHECK(spawn(cmd + " < " + (tmp / "in.txt")).out == "257 260\n");
  CHECK(spawn(cmd + " --document < " + (tmp / "in.txt")).out ==
        "257 60 124 101 110 100 111 102 116 101 120 116 124 62 260\n");
  std::ofstream(tmp / "ids.txt") << "257 258 260";
  CHECK(spawn(cmd + " --decode < " + (tmp / "ids.txt")).out == "the the<|endoftext|>");
  std::ofstream(tmp / "bad.txt") << "257 x";
  const auto r = spawn(cmd + " --decode < " + (tmp / "bad.txt"));
  CHECK(r.status == 2);
  CHECK(r.err.find("'x' is not a token id of the tokenizer (0 to 260)") != std::string::npos);
  // Text that is not UTF-8 is refused, not read another way.
  std::ofstream(tmp / "latin1.txt") << "caf\xE9";
  CHECK(spawn(cmd + " < " + (tmp / "latin1.txt")).err.find("not UTF-8 (at byte 3)") !=
        std::string::npos);
}
