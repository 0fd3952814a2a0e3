// A token cache that is verified (issue 24, class 6). A cached shard records in its llm.c
// header what it was made from (the text's size and hash, the tokenizer's hash) and the hash
// of its own tokens; on reuse the record is checked, a shard that does not match is made
// again. (What a run says of a rebuilt cache, and of one it cannot read:
// tests/e2e/test_token_cache_run.cpp.)
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../support/corpus.hpp"
#include "../support/test_util.hpp"
#include "data/dataset.hpp"
#include "data/token_cache.hpp"
#include "data/tokenizer.hpp"

using namespace tetra;
using namespace tetra::test;
namespace fs = std::filesystem;

namespace {

// bpe:N trained on `text` and written beside it, as a run writes it: the caches read its file.
std::unique_ptr<data::Tokenizer> trained_bpe(const std::string& spec, const std::string& text) {
  const data::TokenizerModel m = data::tokenizer_model(spec, text);
  data::save_tokenizer_model(m);
  return data::load_sentencepiece(m.path);
}

}  // namespace

TEST_CASE("token cache: a shard that does not match its record is made again, and said") {
  if (!data::have_sentencepiece()) {
    MESSAGE("skipped: this build has no SentencePiece");
    return;
  }
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp), text = dir + "/corpus.txt";
  const auto tok = trained_bpe("bpe:300", text);
  const data::CachedShard made = data::tokenize_cached(text, *tok);
  CHECK_FALSE(made.reused);
  CHECK(made.rebuilt.empty());
  const std::vector<uint32_t> tokens = data::read_bin_shard(made.bin).tokens;
  REQUIRE(tokens.size() > 100);
  CHECK(tok->encode(slurp(text)) == std::vector<int>(tokens.begin(), tokens.end()));
  const data::CachedShard again = data::tokenize_cached(text, *tok);
  CHECK(again.reused);
  CHECK(again.bin == made.bin);

  struct Case {
    std::string what;
    std::function<void()> damage;
  };
  const std::vector<Case> cases = {
      // One token changed in place: the header still holds its record, the tokens hash differs.
      {"holds tokens that were changed since",
       [&] {
         std::fstream f(made.bin, std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(1024 + 20);
         f.put(char(tokens[10] + 1));
       }},
      // A shard of an older tetra, or of another tool: no record at all.
      {"records nothing of what it was made from",
       [&] { data::write_bin_shard(made.bin, tokens); }},
      // Cut short: the header's count says more than the file holds.
      {"is not a whole shard", [&] { fs::resize_file(made.bin, fs::file_size(made.bin) - 100); }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    c.damage();
    const data::CachedShard r = data::tokenize_cached(text, *tok);
    CHECK_FALSE(r.reused);
    CHECK(r.rebuilt.find(c.what) == 0);
    CHECK(data::read_bin_shard(r.bin).tokens == tokens);
    CHECK(data::tokenize_cached(text, *tok).reused);
  }
}

TEST_CASE("token cache: a shard of another text or another tokenizer under the name is rebuilt") {
  if (!data::have_sentencepiece()) {
    MESSAGE("skipped: this build has no SentencePiece");
    return;
  }
  // The name hashes the text and the tokenizer, so only a copied (or colliding) shard sits
  // under another's name; the record, not the name, tells them apart.
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp), text = dir + "/corpus.txt", other = dir + "/other.txt";
  std::ofstream(other) << slurp(text).substr(0, 2000) << "the fox reads to the crowd.\n";
  const auto tok = trained_bpe("bpe:300", text);
  const auto tok2 = trained_bpe("bpe:400", text);
  const std::string bin = data::tokenize_cached(text, *tok).bin;
  const std::vector<uint32_t> tokens = data::read_bin_shard(bin).tokens;
  struct Case {
    std::string what, foreign;
  };
  const std::vector<Case> cases = {
      {"was made from another text", data::tokenize_cached(other, *tok).bin},
      {"was made with another tokenizer", data::tokenize_cached(text, *tok2).bin},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    REQUIRE(c.foreign != bin);
    fs::copy_file(c.foreign, bin, fs::copy_options::overwrite_existing);
    const data::CachedShard r = data::tokenize_cached(text, *tok);
    CHECK_FALSE(r.reused);
    CHECK(r.rebuilt == c.what);
    CHECK(r.bin == bin);
    CHECK(data::read_bin_shard(bin).tokens == tokens);
    CHECK(data::tokenize_cached(text, *tok).reused);
  }
}
