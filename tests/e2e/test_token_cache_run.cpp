// A token cache that is verified (issue 24, class 6), as a run sees it: a shard whose record
// is gone is made again and the run says so; a shard that cannot be read at all is named as
// a cache that may be deleted. (The record and its checks: tests/unit/test_token_cache.cpp.)
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../support/corpus.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "data/dataset.hpp"
#include "data/tokenizer.hpp"

using namespace tetra;
using namespace tetra::test;
namespace fs = std::filesystem;

TEST_CASE("token cache: the run says a cache was rebuilt, and names one it cannot read") {
  if (!data::have_sentencepiece()) {
    MESSAGE("skipped: this build has no SentencePiece");
    return;
  }
  const TempDir tmp;
  const std::string dir = corpus_dir(tmp), text = dir + "/corpus.txt";
  const std::string run = tetra_bin() +
                          " train --layers 1 --dim 32 --heads 2 --kv-heads 1 --ffn-dim 64 "
                          "--seq-len 16 --global-batch 2 --peak-tflops 1 --steps 1 --data " +
                          text + " --tokenizer bpe:300";
  Spawned r = spawn(run, 120);
  REQUIRE(r.status == 0);
  const std::string bin = only_file(dir, ".bin");
  REQUIRE(!bin.empty());
  const std::vector<uint32_t> tokens = data::read_bin_shard(bin).tokens;
  data::write_bin_shard(bin, tokens);  // the record gone
  r = spawn(run, 120);
  CAPTURE(r.out);
  CHECK(r.status == 0);
  CHECK(count(r.out, "tokens: " + text + " -> " + bin +
                         " (rebuilt: the cache there records nothing of what it was made from)") ==
        1);
  r = spawn(run, 120);
  CHECK(count(r.out, "tokens: " + text + " -> " + bin + " (reused)") == 1);

  // A directory where the shard should be: not a cache tetra can read or replace.
  fs::remove(bin);
  fs::create_directory(bin);
  r = spawn(run, 120);
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(count(r.err, "tetra: error:") == 1);
  CHECK(r.err.find("the token cache '" + bin +
                   "' cannot be read: it is a directory, not a regular file; it is a cache tetra "
                   "made, which may be deleted") != std::string::npos);
}
