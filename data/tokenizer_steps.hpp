// The steps of a tokenizer.json around its BPE model, each as Hugging Face tokenizers runs it:
//
//   normalizer     rewrites a piece's text: Replace (a String or Regex pattern by a content),
//                  Prepend, and a Sequence of them; none at all (null) is the usual case for
//                  byte-level BPE
//   pre_tokenizer  cuts a piece into pre-tokens: Split (a pattern, with its behavior
//                  Removed/Isolated/MergedWithPrevious/MergedWithNext/Contiguous and invert:
//                  GPT-4 and Llama 3 give their regex here), ByteLevel (add_prefix_space, then
//                  GPT-2's regex when use_regex, then every byte mapped to the printable
//                  character GPT-2 chose for it; trim_offsets concerns offsets only, which tetra
//                  does not report), and a Sequence of them
//   post_processor what encoding puts around a text: TemplateProcessing (its "single" template:
//                  special tokens around the text, as Llama 3's <|begin_of_text|> $A),
//                  ByteLevel (offsets only: nothing), and a Sequence of them
//   decoder        turns tokens back into text: ByteLevel (each token's characters back to
//                  their bytes) or a Sequence of it; none joins the tokens with spaces
//
// Any other type, or a field of these that tetra does not implement, is refused by name when
// the file is read: an encoding that silently differed would be worse than none.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "data/regex.hpp"
#include "util/json.hpp"

namespace tetra::data {

// `where` in the constructors below is the file and the field ("tokenizer 'F': normalizer").

class Normalizer {
 public:
  Normalizer(const json& spec, const std::string& where);
  std::string apply(std::string text) const;

 private:
  void add(const json& spec, const std::string& where);
  struct Step {
    std::optional<Regex> pattern;  // Replace: its pattern; Prepend: none
    std::string content;           // what replaces a match, or what is prepended
  };
  std::vector<Step> steps_;
};

class PreTokenizer {
 public:
  PreTokenizer(const json& spec, const std::string& where);
  // The pre-tokens of one piece of text, non-empty, in order.
  std::vector<std::string> split(const std::string& piece) const;

 private:
  void add(const json& spec, const std::string& where);
  enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
  struct Step {
    bool byte_level = false;
    std::optional<Regex> pattern;  // Split: its pattern; ByteLevel: GPT-2's when use_regex
    Behavior behavior = Behavior::Isolated;
    bool invert = false, add_prefix_space = false;
  };
  static std::vector<std::string> split_by(const Step& step, const std::string& text);
  std::vector<Step> steps_;
};

class PostProcessor {
 public:
  PostProcessor(const json& spec, const std::string& where);
  // A text's ids with the special tokens around them.
  std::vector<int> apply(const std::vector<int>& ids) const;
  // The first token put before a text, or -1 (no token goes before it).
  int first_token() const;

 private:
  void add(const json& spec, const std::string& where);
  struct Item {
    bool text = false;     // the text's ids ($A), else these:
    std::vector<int> ids;  // a special token's ids
  };
  std::vector<std::vector<Item>> templates_;  // applied in order
};

class Decoder {
 public:
  Decoder(const json& spec, const std::string& where);
  // The bytes of the tokens' text. Where the reference would replace an incomplete UTF-8
  // sequence by U+FFFD (its strings are UTF-8), tetra keeps the bytes.
  std::string decode(const std::vector<std::string>& tokens) const;

 private:
  void add(const json& spec, const std::string& where);
  int byte_level_steps_ = 0;  // the supported decoders are ByteLevel, repeated
  bool none_ = false;
};

// GPT-2's printable character (UTF-8) for each byte, and the byte of such a character (-1 for
// any other text).
const std::string& byte_char(unsigned char byte);
int char_byte(const std::string& utf8_char);

}  // namespace tetra::data
