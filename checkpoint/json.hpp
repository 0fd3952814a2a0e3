// A small JSON value with a parser and a writer: enough for safetensors headers and
// checkpoint manifests. Numbers are kept as double plus, when integral, as int64 so that
// byte offsets and seeds survive a round trip exactly.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tetra::json {

class Value {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : kind_(Kind::Bool), bool_(b) {}
  Value(int v) : Value(static_cast<int64_t>(v)) {}
  Value(int64_t v) : kind_(Kind::Number), num_(double(v)), int_(v), integral_(true) {}
  Value(uint64_t v) : Value(static_cast<int64_t>(v)) {}
  Value(double v);
  Value(const char* s) : kind_(Kind::String), str_(s) {}
  Value(std::string s) : kind_(Kind::String), str_(std::move(s)) {}

  static Value array();
  static Value object();

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_object() const { return kind_ == Kind::Object; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Number; }

  // Accessors throw tetra::Error naming the expected kind when the value is another kind.
  bool as_bool() const;
  double as_double() const;
  int64_t as_int() const;  // also rejects non-integral numbers
  const std::string& as_string() const;
  const std::vector<Value>& items() const;              // array elements
  const std::map<std::string, Value>& members() const;  // object members, sorted by key

  // Object access. at() throws tetra::Error("missing key 'k'"); has() does not.
  bool has(const std::string& key) const;
  const Value& at(const std::string& key) const;
  Value& operator[](const std::string& key);  // makes this an object if null; inserts
  // Array access.
  const Value& at(size_t i) const;
  void push_back(Value v);  // makes this an array if null
  size_t size() const;      // array or object size

  // Compact text; object keys in sorted order, so equal values give equal text.
  std::string dump(int indent = -1) const;

 private:
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  double num_ = 0;
  int64_t int_ = 0;
  bool integral_ = false;
  std::string str_;
  std::shared_ptr<std::vector<Value>> arr_;
  std::shared_ptr<std::map<std::string, Value>> obj_;
};

// Throws tetra::Error("invalid JSON at offset N: ...") on malformed text.
Value parse(const std::string& text);

}  // namespace tetra::json
