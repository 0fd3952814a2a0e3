// The added tokens of a tokenizer.json ("added_tokens": the special tokens such as
// <|endoftext|>, and any others added to a trained model), which are found in the text before
// anything else runs, as Hugging Face tokenizers finds them:
//
//   1. the tokens with normalized: false are cut out of the raw text;
//   2. each piece left is normalized, and the tokens with normalized: true (their content
//      normalized the same way) are cut out of it;
//   3. what is left goes on to the pre-tokenizer and the model.
//
// Each cut takes the leftmost match and, of those starting there, the longest; the search
// goes on after it. A match is then dropped when single_word is set and a word character
// touches it; lstrip and rstrip widen it over the white space before or after it (which then
// belongs to the token). A document's text is encoded with the special tokens not matched
// (as the reference's encode_special_tokens): their text there is plain text.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "data/bpe.hpp"
#include "data/regex.hpp"
#include "data/tokenizer_steps.hpp"
#include "util/json.hpp"

namespace tetra::data {

struct AddedToken {
  std::string content;
  int id = -1;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// A piece of text: a token found (id >= 0) or text for the next step (id -1).
struct Piece {
  std::string text;
  int id = -1;
};

class AddedTokens {
 public:
  // Reads the "added_tokens" list. Each token's id is the one the reference derives (the
  // vocabulary's for a token in it, else the next after the model's and the earlier added
  // tokens'); a file that gives another, or the same content twice, is refused.
  AddedTokens(const json& list, const Bpe& model, const Normalizer& normalizer,
              const std::string& where);

  // Cuts the tokens of one kind (normalized: false, or true) out of `text`.
  std::vector<Piece> split(const std::string& text, bool normalized, bool match_special) const;

  // The token with this content, or nullptr.
  const AddedToken* find(const std::string& content) const;
  // The content of id, or nullptr.
  const std::string* content(int id) const;
  // One past the largest id (0 when there are none).
  int size() const;

 private:
  std::vector<AddedToken> tokens_;
  std::unordered_map<std::string, int> by_content_;  // content -> index in tokens_
  std::unordered_map<int, int> by_id_;               // id -> index in tokens_
  // Per kind (0: normalized false, 1: true): the indices of the tokens whose text (normalized
  // for kind 1) begins with each byte, longest first, and that text.
  std::vector<std::vector<int>> first_byte_[2];
  std::vector<std::string> match_text_[2];
  Regex word_char_, white_space_;
};

}  // namespace tetra::data
