#include "checkpoint/json.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "model/error.hpp"

namespace tetra::json {
namespace {

// Deep enough for any header or manifest, shallow enough that a hostile file cannot
// overflow the stack of the recursive parser.
constexpr int kMaxDepth = 512;

const char* kind_name(Value::Kind k) {
  static const char* const names[] = {"null",     "a bool",   "a number",
                                      "a string", "an array", "an object"};
  return names[int(k)];
}

// The one-letter escapes of RFC 8259 and the characters they stand for, position by position.
constexpr char kEscapeLetters[] = "\"\\bfnrt/";
constexpr char kEscapeChars[] = "\"\\\b\f\n\r\t/";

[[noreturn]] void wrong_kind(Value::Kind got, const char* expected) {
  fail("JSON value is ", kind_name(got), ", expected ", expected);
}

// Values share their containers on copy; a mutation first takes a private copy so that
// copies behave as independent values.
template <typename T>
T& unshare(std::shared_ptr<T>& p) {
  if (p.use_count() > 1) p = std::make_shared<T>(*p);
  return *p;
}

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 if it is malformed
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
size_t utf8_length(const std::string& s, size_t i) {
  auto byte = [&](size_t k) { return i + k < s.size() ? uint8_t(s[i + k]) : 0; };
  auto cont = [&](size_t k, uint8_t lo = 0x80, uint8_t hi = 0xBF) {
    return byte(k) >= lo && byte(k) <= hi;
  };
  const uint8_t b = byte(0);
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return cont(1) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    const uint8_t lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    return cont(1, lo, hi) && cont(2) ? 3 : 0;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    const uint8_t lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) return void(out += char(cp));
  const int n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;  // bytes in the sequence
  static const uint8_t lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
  out += char(lead[n] | (cp >> (6 * (n - 1))));
  for (int k = n - 2; k >= 0; --k) out += char(0x80 | ((cp >> (6 * k)) & 0x3F));
}

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Value document() {
    skip_ws();
    Value v = value(0);
    skip_ws();
    if (pos_ < s_.size()) error(pos_, "unexpected " + describe(pos_) + " after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void error(size_t at, const std::string& what) const {
    fail("invalid JSON at offset ", at, ": ", what);
  }

  std::string describe(size_t at) const {
    if (at >= s_.size()) return "end of input";
    const uint8_t c = uint8_t(s_[at]);
    if (c >= 0x20 && c < 0x7F) return std::string("character '") + char(c) + "'";
    char buf[32];
    std::snprintf(buf, sizeof buf, "byte 0x%02X", c);
    return buf;
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }
  bool digit_at(size_t i) const { return i < s_.size() && s_[i] >= '0' && s_[i] <= '9'; }

  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) {
      ++pos_;
    }
  }

  void expect(char c, const char* what) {
    if (peek() != c) error(pos_, std::string("expected ") + what + ", got " + describe(pos_));
    ++pos_;
  }

  Value value(int depth) {
    if (depth > kMaxDepth) error(pos_, "nesting deeper than " + std::to_string(kMaxDepth));
    const char c = peek();
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Value(string());
    if (c == 't') return literal("true", Value(true));
    if (c == 'f') return literal("false", Value(false));
    if (c == 'n') return literal("null", Value());
    if (c == '-' || digit_at(pos_)) return number();
    error(pos_, "unexpected " + describe(pos_));
  }

  Value literal(const char* word, Value v) {
    const std::string w = word;
    if (s_.compare(pos_, w.size(), w) != 0) error(pos_, "invalid literal, expected '" + w + "'");
    pos_ += w.size();
    return v;
  }

  // The elements of an object or array, after its opening bracket; `item` parses one.
  template <typename Item>
  void elements(char close, const char* expected, Item item) {
    ++pos_;
    skip_ws();
    if (peek() == close) return void(++pos_);
    while (true) {
      skip_ws();
      item();
      skip_ws();
      if (peek() != ',') return expect(close, expected);
      ++pos_;
    }
  }

  Value object(int depth) {
    Value obj = Value::object();
    elements('}', "',' or '}'", [&] {
      const size_t key_at = pos_;
      if (peek() != '"') error(pos_, "expected a string key, got " + describe(pos_));
      std::string key = string();
      // Names should be unique (RFC 8259 4); a repeated tensor name would be ambiguous.
      if (obj.has(key)) error(key_at, "duplicate key '" + key + "'");
      skip_ws();
      expect(':', "':'");
      skip_ws();
      obj[key] = value(depth + 1);
    });
    return obj;
  }

  Value array(int depth) {
    Value arr = Value::array();
    elements(']', "',' or ']'", [&] { arr.push_back(value(depth + 1)); });
    return arr;
  }

  uint32_t hex4() {
    uint32_t v = 0;
    const char* p = s_.data() + pos_;
    const bool ok = s_.size() - pos_ >= 4 && std::from_chars(p, p + 4, v, 16).ptr == p + 4;
    if (!ok) error(pos_, "expected 4 hex digits after \\u");
    pos_ += 4;
    return v;
  }

  std::string string() {
    std::string out;
    ++pos_;  // opening quote
    while (true) {
      if (at_end()) error(pos_, "unterminated string");
      const uint8_t c = uint8_t(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) error(pos_, "unescaped control " + describe(pos_) + " in string");
      if (c >= 0x80) {
        const size_t n = utf8_length(s_, pos_);
        if (n == 0) error(pos_, "invalid UTF-8 in string");
        out.append(s_, pos_, n);
        pos_ += n;
        continue;
      }
      ++pos_;
      if (c != '\\') {
        out += char(c);
        continue;
      }
      const size_t esc_at = pos_ - 1;
      const char e = peek();
      ++pos_;
      if (e == 'u') {
        append_utf8(out, code_point(esc_at));
        continue;
      }
      const char* letter = e != '\0' ? std::strchr(kEscapeLetters, e) : nullptr;
      if (!letter) error(esc_at, "invalid escape in string");
      out += kEscapeChars[letter - kEscapeLetters];
    }
  }

  // The code point of a \uXXXX escape (pos_ just past the 'u'), joining a UTF-16
  // surrogate pair; a lone surrogate has no UTF-8 encoding, so it is an error.
  uint32_t code_point(size_t esc_at) {
    const uint32_t hi = hex4();
    if (hi >= 0xDC00 && hi <= 0xDFFF) error(esc_at, "unpaired low surrogate in \\u escape");
    if (hi < 0xD800 || hi > 0xDBFF) return hi;
    if (s_.compare(pos_, 2, "\\u") != 0) error(esc_at, "unpaired high surrogate in \\u escape");
    pos_ += 2;
    const uint32_t lo = hex4();
    if (lo < 0xDC00 || lo > 0xDFFF) error(esc_at, "unpaired high surrogate in \\u escape");
    return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
  }

  // One or more digits; `where` completes the error message.
  void digits(const char* where) {
    if (!digit_at(pos_))
      error(pos_, std::string("expected a digit") + where + ", got " + describe(pos_));
    while (digit_at(pos_)) ++pos_;
  }

  Value number() {
    const size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (peek() == '0' && digit_at(pos_ + 1)) error(start, "leading zeros are not allowed");
    digits("");
    const bool fraction = peek() == '.';
    if (fraction) {
      ++pos_;
      digits(" after '.'");
    }
    const bool exponent = peek() == 'e' || peek() == 'E';
    if (exponent) {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      digits(" in the exponent");
    }
    const char* begin = s_.data() + start;
    const char* end = s_.data() + pos_;
    if (!fraction && !exponent) {
      // Exact when it fits: offsets and seeds must not pass through a double.
      int64_t i = 0;
      if (std::from_chars(begin, end, i).ec == std::errc()) return Value(i);
    }
    // RFC 8259 6 lets a parser limit the range; beyond a double's (even 1e-400) is an error.
    double d = 0;
    if (std::from_chars(begin, end, d).ec != std::errc()) {
      error(start, "number " + std::string(begin, end) + " is out of range");
    }
    return Value(d);
  }

  const std::string& s_;
  size_t pos_ = 0;
};

void write_string(std::string& out, const std::string& s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = uint8_t(s[i]);
    if (c >= 0x80) {
      // Raw bytes that are not UTF-8 would make text that no JSON parser accepts.
      const size_t n = utf8_length(s, i);
      check(n > 0, "cannot write JSON: string has invalid UTF-8 at byte ", i);
      out.append(s, i, n);
      i += n;
      continue;
    }
    // '/' may be escaped but need not be; it is last in the tables, so leave it out.
    const char* special = c != 0 ? std::strchr(kEscapeChars, c) : nullptr;
    if (special && c != '/') {
      out += '\\';
      out += kEscapeLetters[special - kEscapeChars];
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04X", c);
      out += buf;
    } else {
      out += char(c);
    }
    ++i;
  }
  out += '"';
}

}  // namespace

Value::Value(double v) : kind_(Kind::Number), num_(v) {
  // 2^63 is exact as a double; the int64 range is [-2^63, 2^63).
  if (std::isfinite(v) && v == std::trunc(v) && v >= -0x1p63 && v < 0x1p63) {
    int_ = static_cast<int64_t>(v);
    integral_ = true;
  }
}

Value Value::array() {
  Value v;
  v.kind_ = Kind::Array;
  v.arr_ = std::make_shared<std::vector<Value>>();
  return v;
}

Value Value::object() {
  Value v;
  v.kind_ = Kind::Object;
  v.obj_ = std::make_shared<std::map<std::string, Value>>();
  return v;
}

bool Value::as_bool() const {
  if (kind_ != Kind::Bool) wrong_kind(kind_, "a bool");
  return bool_;
}

double Value::as_double() const {
  if (kind_ != Kind::Number) wrong_kind(kind_, "a number");
  return num_;
}

int64_t Value::as_int() const {
  if (kind_ != Kind::Number) wrong_kind(kind_, "an integer");
  check(integral_, "JSON number ", num_, " is not an integer in the int64 range");
  return int_;
}

const std::string& Value::as_string() const {
  if (kind_ != Kind::String) wrong_kind(kind_, "a string");
  return str_;
}

const std::vector<Value>& Value::items() const {
  if (kind_ != Kind::Array) wrong_kind(kind_, "an array");
  return *arr_;
}

const std::map<std::string, Value>& Value::members() const {
  if (kind_ != Kind::Object) wrong_kind(kind_, "an object");
  return *obj_;
}

bool Value::has(const std::string& key) const {
  return kind_ == Kind::Object && obj_->count(key) > 0;
}

const Value& Value::at(const std::string& key) const {
  const auto& m = members();
  auto it = m.find(key);
  check(it != m.end(), "missing key '", key, "'");
  return it->second;
}

Value& Value::operator[](const std::string& key) {
  if (kind_ == Kind::Null) *this = object();
  if (kind_ != Kind::Object) wrong_kind(kind_, "an object");
  return unshare(obj_)[key];
}

const Value& Value::at(size_t i) const {
  const auto& a = items();
  check(i < a.size(), "JSON array index ", i, " is out of range (size ", a.size(), ")");
  return a[i];
}

void Value::push_back(Value v) {
  if (kind_ == Kind::Null) *this = array();
  if (kind_ != Kind::Array) wrong_kind(kind_, "an array");
  unshare(arr_).push_back(std::move(v));
}

size_t Value::size() const {
  if (kind_ == Kind::Array) return arr_->size();
  if (kind_ == Kind::Object) return obj_->size();
  wrong_kind(kind_, "an array or object");
}

std::string Value::dump(int indent) const {
  std::string out;
  auto newline = [&](int depth) {
    if (indent < 0) return;
    out += '\n';
    out.append(size_t(indent) * size_t(depth), ' ');
  };
  // Before the i-th element of a container at `depth`.
  auto separate = [&](size_t i, int depth) {
    if (i > 0) out += ',';
    newline(depth + 1);
  };
  auto close = [&](bool empty, int depth, char bracket) {
    if (!empty) newline(depth);
    out += bracket;
  };
  // A lambda, not a free function, so that it may read the private number fields.
  auto write = [&](auto& self, const Value& v, int depth) -> void {
    if (v.kind_ == Kind::Null) {
      out += "null";
    } else if (v.kind_ == Kind::Bool) {
      out += v.bool_ ? "true" : "false";
    } else if (v.kind_ == Kind::String) {
      write_string(out, v.str_);
    } else if (v.kind_ == Kind::Number) {
      char buf[32];
      // Shortest text that parses back to the same double; locale-independent.
      std::to_chars_result r = v.integral_ ? std::to_chars(buf, buf + sizeof buf, v.int_)
                                           : std::to_chars(buf, buf + sizeof buf, v.num_);
      check(std::isfinite(v.num_), "cannot write the non-finite number ", std::string(buf, r.ptr),
            " as JSON");
      out.append(buf, r.ptr);
    } else if (v.kind_ == Kind::Array) {
      out += '[';
      for (size_t i = 0; i < v.arr_->size(); ++i) {
        separate(i, depth);
        self(self, (*v.arr_)[i], depth + 1);
      }
      close(v.arr_->empty(), depth, ']');
    } else {
      out += '{';
      size_t i = 0;
      for (const auto& [key, item] : *v.obj_) {
        separate(i++, depth);
        write_string(out, key);
        out += indent < 0 ? ":" : ": ";
        self(self, item, depth + 1);
      }
      close(v.obj_->empty(), depth, '}');
    }
  };
  write(write, *this, 0);
  return out;
}

Value parse(const std::string& text) {
  return Parser(text).document();
}

}  // namespace tetra::json
