#include "data/regex.hpp"

#include <cctype>

#include "data/utf8.hpp"
#include "util/error.hpp"

#ifdef TETRA_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

namespace tetra::data {
namespace {

// `pattern` in PCRE2's syntax: \s and \S as White_Space, everything else as it is, and a
// refusal for what the two libraries read differently. \Q...\E is copied whole.
std::string translate(const std::string& pattern, const std::string& what) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t name_end = pattern.find_first_not_of("abcdefghijklmnopqrstuvwxyz^", i + 2);
      if (name_end != std::string::npos && name_end > i + 2 &&
          pattern.compare(name_end, 2, ":]") == 0)
        fail(what, ": the POSIX class '", pattern.substr(i, name_end + 2 - i),
             "' in the pattern is not supported (Oniguruma and PCRE2 read it differently)");
    }
    if (c != '\\' || i + 1 == pattern.size()) {
      out += c;
      continue;
    }
    const char e = pattern[++i];
    if (e == 'Q') {
      const size_t end = pattern.find("\\E", i);
      const size_t stop = end == std::string::npos ? pattern.size() : end + 2;
      out += pattern.substr(i - 1, stop - (i - 1));
      i = stop - 1;
    } else if (e == 's' || e == 'S') {
      out += e == 's' ? "\\p{White_Space}" : "\\P{White_Space}";
    } else if (e == 'h' || e == 'H' || e == 'w' || e == 'W' || e == 'b' || e == 'B') {
      fail(what, ": the escape \\", e,
           " in the pattern is not supported (Oniguruma and PCRE2 read it differently)");
    } else {
      out += '\\';
      out += e;
    }
  }
  return out;
}

}  // namespace

bool have_pcre2() {
#ifdef TETRA_HAVE_PCRE2
  return true;
#else
  return false;
#endif
}

#ifdef TETRA_HAVE_PCRE2

Regex::Regex(const std::string& pattern, const std::string& what) : what_(what) {
  const std::string text = translate(pattern, what);
  int error = 0;
  PCRE2_SIZE at = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                        PCRE2_UTF | PCRE2_UCP, &error, &at, nullptr);
  if (code_ == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    fail(what, ": the pattern does not compile (", reinterpret_cast<const char*>(message),
         " at offset ", at, ")");
  }
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // where JIT is missing, matching interprets
}

Regex::~Regex() {
  if (code_ != nullptr) pcre2_code_free(code_);
}

bool Regex::search(std::string_view text, size_t from, bool anchored, size_t& begin,
                   size_t& end) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // The text was checked as UTF-8 once, before any search.
  const uint32_t options = PCRE2_NO_UTF_CHECK | (anchored ? PCRE2_ANCHORED : 0);
  int rc = pcre2_match(code_, subject, text.size(), from, options, md, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // a long backtrack: the interpreter keeps it on the heap
    rc = pcre2_match(code_, subject, text.size(), from, options | PCRE2_NO_JIT, md, nullptr);
  if (rc >= 0) {
    const PCRE2_SIZE* v = pcre2_get_ovector_pointer(md);
    begin = v[0];
    end = v[1];
  }
  pcre2_match_data_free(md);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof message);
    fail(what_, ": matching failed (", reinterpret_cast<const char*>(message), ")");
  }
  return true;
}

#else

Regex::Regex(const std::string& pattern, const std::string& what) : what_(what) {
  translate(pattern, what);
  fail(what, ": this build has no PCRE2 (libpcre2-dev was not found when tetra was configured)");
}

Regex::~Regex() = default;

bool Regex::search(std::string_view, size_t, bool, size_t&, size_t&) const {
  return false;
}

#endif

Regex Regex::literal(const std::string& text, const std::string& what) {
  // A backslash before any ASCII character that is not a letter or digit makes it literal;
  // letters, digits and non-ASCII characters are literal as they are.
  std::string pattern;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) pattern += '\\';
    pattern += c;
  }
  return Regex(pattern, what);
}

Regex::Regex(Regex&& o) noexcept : code_(o.code_), what_(std::move(o.what_)) {
  o.code_ = nullptr;
}

Regex& Regex::operator=(Regex&& o) noexcept {
  std::swap(code_, o.code_);
  std::swap(what_, o.what_);
  return *this;
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  size_t from = 0, begin = 0, end = 0;
  bool matched_before = false;
  size_t last_end = 0;
  while (from <= text.size() && search(text, from, false, begin, end)) {
    if (begin == end && matched_before && last_end == end) {
      // An empty match where the last one ended: step over one character and search again.
      from += from < text.size() ? utf8_length(static_cast<unsigned char>(text[from])) : 1;
      continue;
    }
    out.emplace_back(begin, end);
    from = last_end = end;
    matched_before = true;
  }
  return out;
}

bool Regex::matches_start(std::string_view text) const {
  size_t begin = 0, end = 0;
  return search(text, 0, true, begin, end);
}

}  // namespace tetra::data
