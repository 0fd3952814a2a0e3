// Text under a SentencePiece tokenizer becomes an llm.c .bin shard once, cached beside the
// text and named by a hash of the text's and the tokenizer's bytes, so that a later run on
// the same text with the same tokenizer reads the shard instead of tokenizing again, and a
// change to either makes a new one. The shard records its origin and is checked on reuse.
// --tokenizer bpe:N trains the model on the text the same way, cached as TEXT.bpeN-HASH.model.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/shard.hpp"
#include "data/tokenizer.hpp"

namespace tetra::data {

// The SentencePiece model --tokenizer names for the training text: FILE.model as it is, or
// for bpe:N the cached model trained on `text` (trained now when missing, in memory: a run
// writes it with save_tokenizer_model once its checks have passed, so that a refused run
// leaves nothing beside the text). Throws tetra::Error for a malformed spec or a failed
// training.
struct TokenizerModel {
  std::string path;     // FILE.model, or bpe:N's TEXT.bpeN-HASH.model
  std::string trained;  // the model's bytes when trained now (not yet at path), else ""
};
TokenizerModel tokenizer_model(const std::string& spec, const std::string& text);
// The model's tokenizer: from its bytes when trained now, else read from its path.
std::unique_ptr<Tokenizer> load_tokenizer_model(const TokenizerModel& m);
// Writes a model trained now to its path (through a temporary and a rename); one read from
// its path is left as it is.
void save_tokenizer_model(const TokenizerModel& m);

// The .bin shard of `text` under `tok`, written now when missing (through a temporary and a
// rename). Its header records what it was made from (the text's size and hash, the
// tokenizer's hash, and the hash of its tokens); a shard found there is reused only when the
// record matches, else it is made again and `rebuilt` says why. Throws tetra::Error for a
// .bin `text` (it is tokens already) or an unreadable file (the cache included: it is named as
// one that may be deleted). The shard's tokens are uint16 for a tokenizer of up to 65,536
// pieces, uint32 past that (llm.c's two widths, data/dataset.hpp).
struct CachedShard {
  std::string bin;      // the shard's path
  bool reused = false;  // it was there and matched
  std::string rebuilt;  // why a shard that was there did not match: "was made from another text"
  // Documents (data/documents.hpp): how many the shard holds, how many lines were skipped as
  // bad, and (when made now) the first of them; 0 and "" for a text.
  int64_t documents = 0, skipped = 0;
  std::string first_skipped;
};
CachedShard tokenize_cached(const std::string& text, const Tokenizer& tok);

// What a cached shard is made of: its tokens and their width, and for documents the counts
// above.
struct Made {
  std::vector<uint32_t> tokens;
  TokenWidth width = TokenWidth::U16;
  int64_t documents = 0, skipped = 0;
  std::string first_skipped;
};
// The cache itself, for any source file: the shard SOURCE.HASH.bin of `source` under `recipe`
// (the bytes of everything else its tokens depend on: the tokenizer's file, options), reused
// when its record matches, else made by `make` from the source's bytes and written (through a
// temporary and a rename). Throws tetra::Error as tokenize_cached does.
CachedShard cached_tokens(const std::string& source, const std::string& recipe,
                          const std::function<Made(const std::string& bytes)>& make);

}  // namespace tetra::data
