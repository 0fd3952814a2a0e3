// Small tokenizer.json files for the tests, built as Hugging Face tokenizers writes them.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "data/tokenizer_steps.hpp"
#include "util/json.hpp"

namespace tetra::test {

// A byte-level BPE over the 256 byte characters (id = byte) and `merges`, in the pair form;
// each merged token takes the next id from 256. GPT-2's pre-tokenizer and decoder.
inline json byte_level(const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[data::byte_char(static_cast<unsigned char>(b))] = b;
  json pairs = json::array();
  int next = 256;
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
    pairs.push_back({a, b});
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "ByteLevel"},
            {"add_prefix_space", false},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"post_processor", nullptr},
          {"decoder",
           {{"type", "ByteLevel"},
            {"add_prefix_space", true},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", pairs}}}};
}

// Merges that spell " the", "he" and "th".
inline const std::vector<std::pair<std::string, std::string>> kTheMerges = {
    {"t", "h"}, {"th", "e"}, {"\xC4\xA0", "the"}, {"h", "e"}};  // "Ġ" is U+0120

inline json added(int id, const std::string& content, bool special, json flags = json::object()) {
  json t = {{"id", id},        {"content", content},     {"single_word", false}, {"lstrip", false},
            {"rstrip", false}, {"normalized", !special}, {"special", special}};
  for (const auto& [k, v] : flags.items()) t[k] = v;
  return t;
}

}  // namespace tetra::test
