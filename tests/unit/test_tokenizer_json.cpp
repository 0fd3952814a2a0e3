// tokenizer.json's pieces on small files written here, each expectation worked out by hand from
// Hugging Face tokenizers' rules (tests/hf_tokenizers.py holds the whole to the library itself
// on 100 kB of text): merges in both forms and by rank, special tokens before the regex and as
// text in a document, the added tokens' flags, the Split behaviors, the regex translation, and
// a refusal naming the field for everything tetra does not implement. (On the command line,
// tetra tokenize: tests/e2e/test_tokenizer_json_run.cpp.)
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "../support/test_util.hpp"
#include "../support/tokenizer_files.hpp"
#include "data/regex.hpp"
#include "data/tokenizer_json.hpp"
#include "data/tokenizer_steps.hpp"

using namespace tetra;
using tetra::test::added;
using tetra::test::byte_level;
using tetra::test::kTheMerges;
using tetra::test::TempDir;

namespace {

std::unique_ptr<data::Tokenizer> load(const TempDir& tmp, const json& j,
                                      const std::string& name = "tok.json") {
  std::ofstream(tmp / name) << j.dump();
  return data::load_tokenizer_json(tmp / name);
}

std::vector<int> bytes_of(const std::string& s) {
  std::vector<int> ids;
  for (const char c : s) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::vector<int> cat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("tokenizer.json: GPT-2's byte characters stand for the 256 bytes") {
  std::set<std::string> chars;
  for (int b = 0; b < 256; ++b) {
    const std::string& c = data::byte_char(static_cast<unsigned char>(b));
    CHECK(data::char_byte(c) == b);
    chars.insert(c);
  }
  CHECK(chars.size() == 256);
  CHECK(data::byte_char(' ') == "\xC4\xA0");   // Ġ
  CHECK(data::byte_char('\n') == "\xC4\x8A");  // Ċ
  CHECK(data::byte_char('a') == "a");
  CHECK(data::char_byte("ab") == -1);
}

TEST_CASE("tokenizer.json: merges as pairs or as \"a b\" strings, applied lowest rank first") {
  const TempDir tmp;
  json pairs = byte_level(kTheMerges);
  json strings = pairs;
  for (json& m : strings["model"]["merges"])
    m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  const auto a = load(tmp, pairs, "pairs.json");
  const auto b = load(tmp, strings, "strings.json");
  // "the the": GPT-2's regex gives "the" and " the"; th (256), the (257), " the" (258).
  CHECK(a->encode("the the") == std::vector<int>{257, 258});
  CHECK(b->encode("the the") == std::vector<int>{257, 258});
  CHECK(a->decode({257, 258}) == "the the");
  CHECK(a->vocab() == 260);
  CHECK(a->end_of_text() == -1);  // no end-of-text token

  // With h+e ranked first, "the" merges h and e (though t+h is leftmost), then nothing joins t
  // and he: [t, he].
  json he_first = byte_level({{"h", "e"}, {"t", "h"}, {"th", "e"}});
  const auto c = load(tmp, he_first, "he.json");
  CHECK(c->encode("the") == std::vector<int>{'t', 256});
  // A "#version" line of the string form is a comment.
  strings["model"]["merges"].insert(strings["model"]["merges"].begin(), "#version: 0.2");
  CHECK(load(tmp, strings, "version.json")->encode("the the") == std::vector<int>{257, 258});
}

TEST_CASE("tokenizer.json: ignore_merges takes a pre-token the vocabulary has whole") {
  const TempDir tmp;
  json j = byte_level({{"t", "h"}, {"h", "e"}});
  j["model"]["vocab"]["the"] = 300;  // no merge makes it
  CHECK(load(tmp, j, "a.json")->encode("the") == std::vector<int>{256, 'e'});
  j["model"]["ignore_merges"] = true;
  CHECK(load(tmp, j, "b.json")->encode("the") == std::vector<int>{300});
}

TEST_CASE("tokenizer.json: special tokens are cut out before the regex; a document's are text") {
  const TempDir tmp;
  json j = byte_level(kTheMerges);
  j["added_tokens"] = {added(260, "<|endoftext|>", true)};
  const auto tok = load(tmp, j);
  CHECK(tok->end_of_text() == 260);
  // Alone the regex would split "<|" from "endoftext"; the token is found first.
  CHECK(tok->encode("the<|endoftext|>the") == std::vector<int>{257, 260, 257});
  // In a document the text is content: its bytes, and the one end-of-text token after them.
  CHECK(tok->encode_document("a<|endoftext|>") ==
        cat(cat({'a'}, bytes_of("<|endoftext|>")), {260}));
  CHECK(tok->decode({257, 260, 257}) == "the<|endoftext|>the");
  // tokenizer_config.json beside a tokenizer.json names the end of text.
  std::filesystem::create_directories(tmp / "dir");
  j["added_tokens"].push_back(added(261, "<|eot|>", true));
  std::ofstream(tmp / "dir/tokenizer_config.json") << R"({"eos_token": {"content": "<|eot|>"}})";
  CHECK(load(tmp, j, "dir/tokenizer.json")->end_of_text() == 261);
}

TEST_CASE(
    "tokenizer.json: lstrip and rstrip take the white space around; single_word whole words") {
  const TempDir tmp;
  json j = byte_level(kTheMerges);
  j["added_tokens"] = {added(260, "<m>", true, {{"lstrip", true}, {"rstrip", true}}),
                       added(261, "ab", false, {{"single_word", true}})};
  const auto tok = load(tmp, j);
  // The spaces around <m> belong to it: "x" and "y" are left, with no space.
  CHECK(tok->encode("x  <m> y") == std::vector<int>{'x', 260, 'y'});
  // "ab" alone is the token; inside a word (a word character touches it) it is text.
  CHECK(tok->encode("ab") == std::vector<int>{261});
  CHECK(tok->encode("xab") == std::vector<int>{'x', 'a', 'b'});
  CHECK(tok->encode("ab!") == std::vector<int>{261, '!'});
  CHECK(tok->encode("\xC3\xA9"
                    "ab") == cat(bytes_of("\xC3\xA9"), {'a', 'b'}));  // é is a letter
}

TEST_CASE("tokenizer.json: a TemplateProcessing BOS goes before a document, not before a text") {
  const TempDir tmp;
  json j = byte_level(kTheMerges);
  j["added_tokens"] = {added(260, "<|begin_of_text|>", true), added(261, "<|end_of_text|>", true)};
  j["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}},
        {{"type", "TemplateProcessing"},
         {"single",
          {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
         {"pair", json::array()},
         {"special_tokens",
          {{"<|begin_of_text|>",
            {{"id", "<|begin_of_text|>"}, {"ids", {260}}, {"tokens", {"<|begin_of_text|>"}}}}}}}}}};
  const auto tok = load(tmp, j);
  CHECK(tok->encode("the") == std::vector<int>{257});
  CHECK(tok->encode_document("the") == std::vector<int>{260, 257, 261});
  CHECK(tok->begin_of_text() == 260);
  CHECK(tok->end_of_text() == 261);
}

TEST_CASE("tokenizer.json: Split behaviors, and invert") {
  const auto split = [](const std::string& behavior, bool invert) {
    const json spec = {{"type", "Split"},
                       {"pattern", {{"String", "-"}}},
                       {"behavior", behavior},
                       {"invert", invert}};
    return data::PreTokenizer(spec, "t").split("a-b--c");
  };
  using V = std::vector<std::string>;
  CHECK(split("Removed", false) == V{"a", "b", "c"});
  CHECK(split("Isolated", false) == V{"a", "-", "b", "-", "-", "c"});
  CHECK(split("MergedWithPrevious", false) == V{"a-", "b-", "-", "c"});
  CHECK(split("MergedWithNext", false) == V{"a", "-b", "-", "-c"});
  CHECK(split("Contiguous", false) == V{"a", "-", "b", "--", "c"});
  CHECK(split("Removed", true) == V{"-", "-", "-"});
}

TEST_CASE("tokenizer.json: patterns read as Oniguruma reads them") {
  // \s is Unicode's White_Space: U+00A0 is, U+180E (which PCRE2's own \s takes) is not.
  const data::Regex space("\\s+", "t");
  CHECK(space
            .find_all("a\xC2\xA0"
                      "b")
            .size() == 1);
  CHECK(space
            .find_all("a\xE1\xA0\x8E"
                      "b")
            .empty());
  const data::Regex not_space("\\S+", "t");
  CHECK(not_space
            .find_all("a\xE1\xA0\x8E"
                      "b")
            .size() == 1);
  // An empty match right where the last one ended is passed over by one character.
  using M = std::vector<std::pair<size_t, size_t>>;
  CHECK(data::Regex("x*", "t").find_all("axb") == M{{0, 0}, {1, 2}, {3, 3}});
  // A literal pattern's special characters are plain.
  CHECK(data::Regex::literal("a.b", "t").find_all("axb a.b") == M{{4, 7}});
}

TEST_CASE("tokenizer.json: what tetra does not implement is refused, naming the field") {
  const TempDir tmp;
  struct Case {
    std::string field;
    json value;
    std::string message;
  };
  const json template_bert = {
      {"type", "BertProcessing"}, {"sep", {"[SEP]", 1}}, {"cls", {"[CLS]", 0}}};
  const std::vector<Case> cases = {
      {"normalizer", {{"type", "NFC"}}, "normalizer type 'NFC' is not supported"},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "x"}},
          {{"type", "Precompiled"}, {"precompiled_charsmap", ""}}}}},
       "normalizer.normalizers[1] type 'Precompiled' is not supported"},
      {"pre_tokenizer",
       {{"type", "Whitespace"}},
       "pre_tokenizer type 'Whitespace' is not supported"},
      {"pre_tokenizer",
       {{"type", "Split"},
        {"pattern", {{"Regex", "\\w+"}}},
        {"behavior", "Isolated"},
        {"invert", false}},
       "pre_tokenizer.pattern.Regex: the escape \\w in the pattern is not supported"},
      {"pre_tokenizer",
       {{"type", "Split"},
        {"pattern", {{"Regex", "(a"}}},
        {"behavior", "Isolated"},
        {"invert", false}},
       "pre_tokenizer.pattern.Regex: the pattern does not compile"},
      {"pre_tokenizer",
       {{"type", "Split"},
        {"pattern", {{"String", "-"}}},
        {"behavior", "Sideways"},
        {"invert", false}},
       "pre_tokenizer.behavior 'Sideways' is not supported"},
      {"post_processor", template_bert, "post_processor type 'BertProcessing' is not supported"},
      {"decoder", {{"type", "Metaspace"}}, "decoder type 'Metaspace' is not supported"},
      {"truncation", {{"max_length", 512}}, "truncation {\"max_length\":512} is not supported"},
      {"padding", {{"strategy", "BatchLongest"}}, "padding"},
      {"added_tokens",
       {added(7, "<x>", true)},
       "added_tokens[0] gives '<x>' the id 7, where "
       "Hugging Face tokenizers reads 260"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    json j = byte_level(kTheMerges);
    j[c.field] = c.value;
    const std::string what = test::error_of([&] { load(tmp, j); });
    CHECK(what.find("tokenizer '" + (tmp / "tok.json") + "'") == 0);
    CHECK(what.find(c.message) != std::string::npos);
  }
  const std::vector<Case> model_cases = {
      {"type", "WordPiece", "model type 'WordPiece' is not supported"},
      {"dropout", 0.1, "model.dropout 0.1 is not supported"},
      {"continuing_subword_prefix", "##",
       "model.continuing_subword_prefix \"##\" is not supported"},
      {"merges", {"a b c"}, "model.merges[0] is \"a b c\", not two tokens"},
      {"merges", json::array({json::array({"t", "zz"})}),
       "model.merges[0] needs the token 'zz', which is not in model.vocab"},
  };
  for (const Case& c : model_cases) {
    CAPTURE(c.message);
    json j = byte_level(kTheMerges);
    j["model"][c.field] = c.value;
    CHECK(test::error_of([&] { load(tmp, j); }).find(c.message) != std::string::npos);
  }
}
