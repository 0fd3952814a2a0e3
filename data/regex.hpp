// Regular expressions with Unicode properties, for tokenizer.json: its Split pre-tokenizer and
// Replace normalizer, and ByteLevel's GPT-2 pattern. Through PCRE2 (Debian's libpcre2-dev), in
// UTF mode with Unicode properties and JIT-compiled.
//
// The reference (Hugging Face tokenizers) compiles these patterns with Oniguruma's Ruby syntax.
// The two agree on what tokenizer patterns use (\p{..} categories, classes, (?i:..),
// look-ahead, counted repeats, \r \n \d), but for \s: PCRE2's also takes U+180E, so \s and \S are
// rewritten to Unicode's White_Space, which is Oniguruma's \s. Escapes that mean something else
// in Oniguruma (\h is a hex digit there; \w and \b use another word set) and POSIX classes are
// refused rather than read differently. Unicode's tables are PCRE2's (Unicode 14 in Debian 12):
// a character assigned later may fall in another category than in the reference.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pcre2_real_code_8;

namespace tetra::data {

// Whether this build has PCRE2 (and so reads tokenizer.json).
bool have_pcre2();

class Regex {
 public:
  // Compiles `pattern` (Oniguruma's syntax, as above). Throws tetra::Error naming `what` (where
  // the pattern comes from: "tokenizer.json: pre_tokenizer.pattern.Regex") for a pattern PCRE2
  // refuses, an escape refused above, or a build without PCRE2.
  Regex(const std::string& pattern, const std::string& what);
  // A pattern that matches `text` literally (a String pattern).
  static Regex literal(const std::string& text, const std::string& what);
  Regex(Regex&& o) noexcept;
  Regex& operator=(Regex&& o) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  ~Regex();

  // The matches in `text` (valid UTF-8) as [begin, end) byte ranges, left to right, as
  // Oniguruma's find_iter gives them: each search starts where the last match ended, and an
  // empty match right where the last one ended is passed over by one character.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  // Whether the pattern matches at the start of `text` (an anchored match).
  bool matches_start(std::string_view text) const;

 private:
  // The first match at or after `from`; false when there is none.
  bool search(std::string_view text, size_t from, bool anchored, size_t& begin, size_t& end) const;

  pcre2_real_code_8* code_ = nullptr;
  std::string what_;
};

}  // namespace tetra::data
