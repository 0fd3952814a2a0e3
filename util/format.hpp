// Numbers and text as tetra prints them. printf-style formatting of one number into a string as
// long as it needs: "%.0f" of 1e308 is 309 digits, and a fixed buffer would cut it to a number
// that reads as another.
#pragma once
#include <cstdio>
#include <string>

namespace tetra {

// `fmt` holds one conversion of a double ("%.3g ms"); the result is never cut short.
inline std::string format_number(const char* fmt, double x) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  const int n = std::snprintf(nullptr, 0, fmt, x);
  std::string out(n > 0 ? size_t(n) : 0, '\0');
  if (n > 0) std::snprintf(out.data(), out.size() + 1, fmt, x);
#pragma GCC diagnostic pop
  return out;
}

// x rounded to an integer with thousands separated: 16777216 -> "16,777,216", -1234 -> "-1,234";
// from 1e15 on, three significant digits ("3.8e+25"), not dozens of digits a user would count.
inline std::string commas(double x) {
  if (!(x > -1e15 && x < 1e15)) return format_number("%.3g", x);
  const std::string digits = format_number("%.0f", x);
  std::string out;
  const size_t lead = !digits.empty() && digits[0] == '-' ? 1 : 0;
  for (size_t i = 0; i < digits.size(); ++i) {
    out += digits[i];
    const size_t left = digits.size() - 1 - i;
    if (i >= lead && left > 0 && left % 3 == 0) out += ',';
  }
  return out;
}

// A byte count in decimal units with three significant digits: 512 -> "512 B", 1.5e6 ->
// "1.50 MB", 2.1e13 -> "21.0 TB".
inline std::string byte_size(double b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while ((b < 0 ? -b : b) >= 999.5 && u < 5) b /= 1000, ++u;
  const double a = b < 0 ? -b : b;
  return format_number(a >= 99.95 ? "%.0f " : a >= 9.995 ? "%.1f " : "%.2f ", b) + units[u];
}

// Text on one line, in quotes: newlines, other control characters, quotes and backslashes
// escaped.
inline std::string printable(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

}  // namespace tetra
