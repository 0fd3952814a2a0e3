#include "data/added_tokens.hpp"

#include <algorithm>

#include "data/utf8.hpp"
#include "util/error.hpp"

namespace tetra::data {
namespace {

// The reference decides "a word character touches the token" and "white space around it" with
// Rust's regex crate, whose \w and \s are Unicode's (UTS #18): these classes.
const char* const kWordChar = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}])";
const char* const kWhiteSpace = R"(\p{White_Space})";

// The start of the character that ends at `end` (exclusive) in valid UTF-8.
size_t char_before(const std::string& s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

bool char_is(const Regex& re, const std::string& s, size_t at) {
  return re.matches_start(
      std::string_view(s).substr(at, utf8_length(static_cast<unsigned char>(s[at]))));
}

}  // namespace

AddedTokens::AddedTokens(const json& list, const Bpe& model, const Normalizer& normalizer,
                         const std::string& where)
    : word_char_(kWordChar, where + ": the word characters of single_word"),
      white_space_(kWhiteSpace, where + ": the white space of lstrip and rstrip") {
  check(list.is_null() || list.is_array(), where, ": added_tokens is not a list");
  if (list.is_null()) return;
  // Ids as the reference derives them: a content the vocabulary has keeps its id there, any
  // other takes the next one after the model's (counted as its vocabulary's entries) and the
  // added tokens' so far.
  int max_added = -1;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    const std::string at = where + ": added_tokens[" + std::to_string(i) + "]";
    check(t.is_object() && t.contains("content") && t["content"].is_string(), at,
          " has no string \"content\"");
    AddedToken token;
    token.content = t["content"].get<std::string>();
    check(!token.content.empty(), at, " has an empty content");
    const auto flag = [&](const char* name, bool fallback) {
      if (!t.contains(name)) return fallback;
      check(t[name].is_boolean(), at, ".", name, " is ", t[name].dump(), ", not true or false");
      return t[name].get<bool>();
    };
    token.special = flag("special", false);
    token.normalized = flag("normalized", !token.special);
    token.single_word = flag("single_word", false);
    token.lstrip = flag("lstrip", false);
    token.rstrip = flag("rstrip", false);
    check(!by_content_.count(token.content), at, " gives '", token.content, "' a second time");
    const int model_size = model.entries();
    int id = model.id(token.content);
    if (id < 0)
      id = max_added < 0 ? model_size : max_added >= model_size ? max_added + 1 : model_size;
    const std::optional<int64_t> given = t.contains("id") ? json_int(t["id"]) : std::nullopt;
    check(given && *given == id, at, " gives '", token.content, "' the id ",
          t.contains("id") ? t["id"].dump() : "null", ", where Hugging Face tokenizers reads ", id,
          " (the vocabulary's id, else the next one free)");
    token.id = id;
    max_added = std::max(max_added, id);
    by_content_[token.content] = int(tokens_.size());
    by_id_[id] = int(tokens_.size());
    tokens_.push_back(token);
  }
  for (int kind = 0; kind < 2; ++kind) {
    first_byte_[kind].assign(256, {});
    match_text_[kind].resize(tokens_.size());
  }
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const int kind = tokens_[i].normalized ? 1 : 0;
    const std::string text = kind ? normalizer.apply(tokens_[i].content) : tokens_[i].content;
    match_text_[kind][i] = text;
    if (!text.empty()) first_byte_[kind][static_cast<unsigned char>(text[0])].push_back(int(i));
  }
  for (int kind = 0; kind < 2; ++kind)
    for (std::vector<int>& v : first_byte_[kind])
      std::stable_sort(v.begin(), v.end(), [&](int a, int b) {
        return match_text_[kind][a].size() > match_text_[kind][b].size();
      });
}

std::vector<Piece> AddedTokens::split(const std::string& s, bool normalized,
                                      bool match_special) const {
  const int kind = normalized ? 1 : 0;
  std::vector<Piece> out;
  if (tokens_.empty()) {
    if (!s.empty()) out.push_back({s, -1});
    return out;
  }
  size_t done = 0;  // the text before this is in `out`
  for (size_t i = 0; i < s.size();) {
    int found = -1;
    for (const int t : first_byte_[kind][static_cast<unsigned char>(s[i])])
      if (s.compare(i, match_text_[kind][t].size(), match_text_[kind][t]) == 0) {
        found = t;  // the longest, as they are sorted
        break;
      }
    if (found < 0) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + match_text_[kind][found].size();
    i = stop;  // the search goes on after the match, whether it is kept or not
    const AddedToken& token = tokens_[found];
    if (token.special && !match_special) continue;
    if (token.single_word) {
      const bool word_before = start > 0 && char_is(word_char_, s, char_before(s, start));
      const bool word_after = stop < s.size() && char_is(word_char_, s, stop);
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      size_t p = start;
      while (p > 0 && char_is(white_space_, s, char_before(s, p))) p = char_before(s, p);
      start = std::max(p, done);  // white space an earlier token took stays there
    }
    if (token.rstrip)
      while (stop < s.size() && char_is(white_space_, s, stop))
        stop += utf8_length(static_cast<unsigned char>(s[stop]));
    if (done < start) out.push_back({s.substr(done, start - done), -1});
    out.push_back({s.substr(start, stop - start), token.id});
    done = stop;
  }
  if (done < s.size()) out.push_back({s.substr(done), -1});
  return out;
}

const AddedToken* AddedTokens::find(const std::string& content) const {
  const auto it = by_content_.find(content);
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

const std::string* AddedTokens::content(int id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second].content;
}

int AddedTokens::size() const {
  int n = 0;
  for (const AddedToken& t : tokens_) n = std::max(n, t.id + 1);
  return n;
}

}  // namespace tetra::data
