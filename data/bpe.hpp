// The BPE model of a tokenizer.json ("model": {"type": "BPE", ...}), as Hugging Face tokenizers
// applies it to one pre-token: split it into characters (for byte-level BPE, the characters
// ByteLevel mapped its bytes to), look each up in the vocabulary, then merge adjacent pairs,
// always the pair of lowest rank (its index in "merges") and of those the leftmost, until no
// pair of the merges is left. A heap of candidate pairs over a linked list of symbols keeps a
// word of n characters at O(n log n); a cache keyed by the pre-token skips words seen before.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "util/json.hpp"

namespace tetra::data {

class Bpe {
 public:
  // Reads the "model" object of tokenizer.json; `where` names the file in errors. Merges come
  // in either form: "a b" (before tokenizers 0.20) or ["a", "b"]. Throws tetra::Error naming
  // the field for what tetra does not implement (a model type other than BPE, dropout,
  // continuing_subword_prefix, end_of_word_suffix) or what is malformed (a merge of tokens not
  // in the vocabulary, an id given to two tokens).
  Bpe(const json& model, const std::string& where);

  // Appends the ids of `word`, one non-empty pre-token.
  void tokenize(const std::string& word, std::vector<int>& out) const;

  // The id of a token, or -1.
  int id(const std::string& token) const;
  // The token of an id, or nullptr.
  const std::string* token(int id) const;
  // One past the largest id.
  int size() const { return int(tokens_.size()); }
  // The vocabulary's entries (size() when its ids leave no gap).
  int entries() const { return int(vocab_.size()); }

 private:
  std::vector<int> merge_word(const std::string& word) const;

  std::string where_;
  std::unordered_map<std::string, int> vocab_;
  std::vector<std::string> tokens_;  // id -> token
  std::vector<bool> has_token_;      // whether an id has a token (ids may leave gaps)
  // (left id, right id) as one 64-bit key -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int, int>> merges_;
  std::string unk_token_;  // "" when none
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int>> cache_;
};

}  // namespace tetra::data
