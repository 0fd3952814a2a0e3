// Documents as data: JSONL files (one object a line, the text under --data-field), each
// document's tokens ended by the tokenizer's end-of-text token (bytes: 3), cached per file,
// read from a file, a directory or a glob in sorted order; a bad line refused with file:line,
// or skipped and counted under --skip-bad-lines. (What tetra train says of them:
// tests/e2e/test_documents_run.cpp.)
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../support/jsonl.hpp"
#include "../support/test_util.hpp"
#include "data/dataset.hpp"
#include "data/documents.hpp"

using namespace tetra;
using tetra::test::TempDir;

namespace {

constexpr int32_t E = data::kByteEndOfText;

std::vector<int32_t> sequence(const data::Dataset& ds, int64_t k, int seq_len) {
  std::vector<int32_t> out(seq_len + 1);
  ds.sequence(k, out.data());
  return out;
}

std::vector<int32_t> documents_of(const data::Dataset& ds, int64_t k, int seq_len) {
  std::vector<int32_t> out(seq_len + 1);
  ds.document_ids(k, out.data());
  return out;
}

}  // namespace

TEST_CASE("documents: joined by the end-of-text token, which tells each token its document") {
  const TempDir tmp;
  const std::string docs = tmp / "docs.jsonl";
  // A blank line is no document; an empty text is one (its end-of-text token alone).
  std::ofstream(docs) << "{\"text\": \"ab\"}\n{\"id\": 2, \"text\": \"c\"}\n\n{\"text\": \"\"}\n"
                         "{\"text\": \"defgh\"}";
  const auto ds = data::open_dataset(docs, 256, 4, 1);
  // a b E c E E d e f g h E: 12 tokens, (12 - 1) / 4 = 2 sequences.
  REQUIRE(ds->num_sequences() == 2);
  CHECK(sequence(*ds, 0, 4) == std::vector<int32_t>{'a', 'b', E, 'c', E});
  CHECK(sequence(*ds, 1, 4) == std::vector<int32_t>{E, E, 'd', 'e', 'f'});
  // An end-of-text token belongs to the document it ends; the next token starts the next.
  CHECK(documents_of(*ds, 0, 4) == std::vector<int32_t>{0, 0, 0, 1, 1});
  CHECK(documents_of(*ds, 1, 4) == std::vector<int32_t>{0, 1, 2, 2, 2});
  // A batch carries them beside its tokens, sequence by sequence (step 1 of G = 3 takes
  // sequences 3 mod 2 = 1, 0, 1).
  std::vector<int32_t> toks(15), ids(15);
  data::fill_batch(*ds, 1, 3, 0, 3, 4, toks.data(), ids.data());
  CHECK(ids == std::vector<int32_t>{0, 1, 2, 2, 2, 0, 0, 0, 1, 1, 0, 1, 2, 2, 2});
  CHECK(toks ==
        std::vector<int32_t>{E, E, 'd', 'e', 'f', 'a', 'b', E, 'c', E, E, E, 'd', 'e', 'f'});
  CHECK(ds->describe().rfind("JSONL documents (4 in 1 file) '" + docs + "': 12 tokens", 0) == 0);

  // Cached beside the file and reused, its record counting the documents.
  const auto bytes = data::byte_tokenizer();
  const data::CachedShard again = data::tokenize_documents(docs, *bytes, {});
  CHECK(again.reused);
  CHECK(again.documents == 4);
  CHECK(std::filesystem::exists(again.bin));
  // Another field is another cache, and other tokens.
  std::ofstream(tmp / "body.jsonl") << "{\"body\": \"xy\", \"text\": \"no\"}\n";
  const data::CachedShard body = data::tokenize_documents(tmp / "body.jsonl", *bytes, {"body"});
  CHECK(data::read_bin_shard(body.bin).tokens == std::vector<uint32_t>{'x', 'y', E});
  // A source without documents is one document.
  std::ofstream(tmp / "text.txt") << "a" << char(E) << "bcdefgh";
  const auto text = data::open_dataset(tmp / "text.txt", 256, 4, 1);
  CHECK(documents_of(*text, 0, 4) == std::vector<int32_t>{0, 0, 0, 0, 0});
}

TEST_CASE("documents: a bad line is refused with file:line, or skipped and counted") {
  const TempDir tmp;
  const std::string bad = tmp / "bad.jsonl";
  std::ofstream(bad) << tetra::test::kBadJsonl;
  CHECK(test::error_of([&] { data::open_dataset(bad, 256, 1, 1); }) ==
        "data file " + bad +
            ":2: has no string \"text\" (`data.data_field`) (`data.skip_bad_lines` skips "
            "such lines)");
  const auto bytes = data::byte_tokenizer();
  const data::CachedShard s = data::tokenize_documents(bad, *bytes, {"text", true});
  CHECK(s.documents == 1);
  CHECK(s.skipped == 5);
  CHECK(s.first_skipped == bad + ":2: has no string \"text\" (`data.data_field`)");
  CHECK(data::read_bin_shard(s.bin).tokens == std::vector<uint32_t>{'o', 'k', E});
  // Each kind of bad line, named.
  const std::string problems[] = {"[1, 2]", "not json", "{\"text\": \"a\\u0003b\"}"};
  const std::string words[] = {"not a JSON object", "invalid JSON",
                               "its text holds the end-of-text token (id 3, byte 3)"};
  for (int i = 0; i < 3; ++i) {
    std::ofstream(tmp / "one.jsonl") << "{\"text\": \"ok\"}\n" << problems[i] << "\n";
    CHECK(test::error_of([&] {
            data::tokenize_documents(tmp / "one.jsonl", *bytes, {});
          }).find((tmp / "one.jsonl") + ":2: " + words[i]) != std::string::npos);
  }
}

TEST_CASE("documents: a directory or a glob of JSONL files, in sorted order") {
  const TempDir tmp;
  const std::string dir = tmp / "docs";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/b.jsonl") << "{\"text\": \"B\"}\n";
  std::ofstream(dir + "/a.jsonl") << "{\"text\": \"A\"}\n";
  for (const std::string& spec : {dir, dir + "/*.jsonl"}) {
    CAPTURE(spec);
    CHECK(data::is_documents(spec));
    const auto ds = data::open_dataset(spec, 256, 3, 1);
    CHECK(sequence(*ds, 0, 3) == std::vector<int32_t>{'A', E, 'B', E});
    CHECK(ds->describe().rfind("JSONL documents (2 in 2 files)", 0) == 0);
  }
  // The directory now holds the caches too (.bin): still a directory of documents, but a glob
  // that takes both is refused.
  CHECK(data::source_files(dir).size() == 2);
  CHECK(test::error_of([&] {
          data::open_dataset(dir + "/*", 256, 3, 1);
        }).find("is not a .jsonl file of documents") != std::string::npos);
}
