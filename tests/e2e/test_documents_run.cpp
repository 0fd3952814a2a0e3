// tetra train on JSONL documents: it trains, says whether it tokenized them or reused the
// cache and how many documents it read, refuses a bad line with file:line in one error line, or
// skips and counts them under --skip-bad-lines; bpe:N, which trains on a text file, is refused.
// (Documents in one process: tests/unit/test_documents.cpp.)
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "../support/jsonl.hpp"
#include "../support/spawn.hpp"
#include "../support/tiny_model.hpp"

using namespace tetra;
using tetra::test::count;
using tetra::test::spawn;
using tetra::test::TempDir;
using tetra::test::tetra_bin;
using tetra::test::tiny_model_flags;

namespace {}  // namespace

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
