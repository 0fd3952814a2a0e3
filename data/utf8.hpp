// UTF-8, as tokenizer.json's text is: a character is 1 to 4 bytes, its lead byte says how many.
#pragma once
#include <cstddef>
#include <string_view>

namespace tetra::data {

// The byte length of the character whose lead byte is `lead` (valid UTF-8 assumed).
inline size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// The offset of the first byte of `s` that does not begin a well-formed character (RFC 3629: no
// overlong forms, no surrogates, nothing past U+10FFFF), or npos when all of `s` is UTF-8.
inline size_t utf8_error(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
      return i;
    }
    if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return i;
    for (size_t k = 2; k < n; ++k)
      if (b(i + k) < 0x80 || b(i + k) > 0xBF) return i;
    i += n;
  }
  return std::string_view::npos;
}

}  // namespace tetra::data
