#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "../test_util.hpp"
#include "checkpoint/json.hpp"
#include "model/error.hpp"

using tetra::json::parse;
using tetra::json::Value;

using tetra::test::error_of;
using tetra::test::TempDir;

TEST_CASE("json: parses scalars, arrays and nested objects") {
  const Value v = parse(R"( {"a": [1, -2.5, true, false, null, "s"], "b": {"c": {}, "d": []}} )");
  REQUIRE(v.is_object());
  CHECK(v.size() == 2);
  const Value& a = v.at("a");
  REQUIRE(a.size() == 6);
  CHECK(a.at(0).as_int() == 1);
  CHECK(a.at(1).as_double() == -2.5);
  CHECK(a.at(2).as_bool() == true);
  CHECK(a.at(3).as_bool() == false);
  CHECK(a.at(4).is_null());
  CHECK(a.at(5).as_string() == "s");
  CHECK(v.at("b").at("c").is_object());
  CHECK(v.at("b").at("c").size() == 0);
  CHECK(v.at("b").at("d").items().empty());
  CHECK(v.has("a"));
  CHECK_FALSE(v.has("z"));
  CHECK(parse("\t\r\n 7 \n").as_int() == 7);
  CHECK(parse("0").as_int() == 0);
  CHECK(parse("-0.0e0").as_double() == 0.0);
  CHECK(parse("1E+2").as_int() == 100);
  CHECK(parse("25e-1").as_double() == 2.5);
}

TEST_CASE("json: integers keep their exact int64 value") {
  // 2^53 + 1 has no double representation; it must not pass through one.
  CHECK(parse("9007199254740993").as_int() == 9007199254740993LL);
  CHECK(parse("9007199254740993").dump() == "9007199254740993");
  CHECK(parse("9223372036854775807").as_int() == std::numeric_limits<int64_t>::max());
  CHECK(parse("-9223372036854775808").as_int() == std::numeric_limits<int64_t>::min());
  CHECK(Value(int64_t{-9223372036854775807LL - 1}).dump() == "-9223372036854775808");

  // Past int64 it is a double, and as_int refuses it rather than wrapping.
  const Value big = parse("18446744073709551615");
  CHECK(big.as_double() == 18446744073709551615.0);
  CHECK(error_of([&] { big.as_int(); }).find("not an integer") != std::string::npos);
  CHECK(parse(big.dump()).as_double() == big.as_double());

  // Integral doubles are integers; fractions are not.
  CHECK(parse("1.0").as_int() == 1);
  CHECK(Value(3.0).as_int() == 3);
  CHECK(error_of([] { parse("1.5").as_int(); }) ==
        "JSON number 1.5 is not an integer in the int64 range");
}

TEST_CASE("json: string escapes and unicode") {
  CHECK(parse(R"("\"\\\/\b\f\n\r\t")").as_string() == "\"\\/\b\f\n\r\t");
  CHECK(parse(R"("\u00e9\u20AC")").as_string() == "\xC3\xA9\xE2\x82\xAC");  // é€
  CHECK(parse(R"("\ud83d\ude00")").as_string() == "\xF0\x9F\x98\x80");      // U+1F600
  CHECK(parse(R"("\u0000")").as_string() == std::string(1, '\0'));
  CHECK(parse("\"caf\xC3\xA9 \xF0\x9F\x98\x80\"").as_string() == "caf\xC3\xA9 \xF0\x9F\x98\x80");

  // Writing escapes what JSON requires and leaves UTF-8 as it is.
  CHECK(Value("a\"b\\c\n\x01\x1F\xC3\xA9").dump() == R"("a\"b\\c\n\u0001\u001F)"
                                                     "\xC3\xA9\"");

  CHECK(Value("a/b").dump() == "\"a/b\"");  // '/' may be escaped, but need not be

  // Every ASCII byte, and multi-byte characters, survive dump -> parse.
  std::string all;
  for (int c = 0; c < 128; ++c) all += char(c);
  all += "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  CHECK(parse(Value(all).dump()).as_string() == all);

  CHECK(error_of([] { Value("bad \xFF").dump(); }).find("invalid UTF-8") != std::string::npos);
}

TEST_CASE("json: malformed input is an error naming the byte offset") {
  struct Case {
    std::string text;
    size_t offset;
  };
  const Case cases[] = {
      {"", 0},                       // empty
      {"   ", 3},                    // only whitespace
      {"{", 1},                      // unterminated object
      {"[1,2", 4},                   // unterminated array
      {"[1,]", 3},                   // trailing comma
      {"{\"a\":1,}", 7},             // trailing comma in object
      {"{\"a\" 1}", 5},              // missing colon
      {"{a:1}", 1},                  // unquoted key
      {"{\"a\":1 \"b\":2}", 7},      // missing comma
      {"{\"a\":1,\"a\":2}", 7},      // duplicate key
      {"01", 0},                     // leading zero
      {"1.", 2},                     // no fraction digits
      {".5", 0},                     // no integer part
      {"-", 1},                      // sign only
      {"1e", 2},                     // no exponent digits
      {"+1", 0},                     // plus sign
      {"1e400", 0},                  // overflows a double
      {"NaN", 0},                    // not JSON
      {"Infinity", 0},               // not JSON
      {"tru", 0},                    // truncated literal
      {"nul", 0},                    // truncated literal
      {"True", 0},                   // case matters
      {"'a'", 0},                    // single quotes
      {"\"abc", 4},                  // unterminated string
      {"\"a\nb\"", 2},               // raw control character
      {"\"\\x\"", 1},                // unknown escape
      {"\"\\u12\"", 3},              // short \u escape
      {"\"\\u-123\"", 3},            // sign in a \u escape
      {"\"\\u 123\"", 3},            // space in a \u escape
      {"\"\\ud800\"", 1},            // lone high surrogate
      {"\"\\udc00\"", 1},            // lone low surrogate
      {"\"\\ud800\\u0041\"", 1},     // high surrogate + non-surrogate
      {"\"\xFF\"", 1},               // not UTF-8
      {"\"\xC0\xAF\"", 1},           // overlong encoding
      {"\"\xED\xA0\x80\"", 1},       // UTF-8 encoded surrogate
      {"\"\xE2\x82\"", 1},           // truncated sequence
      {"[1] x", 4},                  // trailing garbage
      {"{} {}", 3},                  // two values
      {std::string("[1]\0", 4), 3},  // trailing NUL byte
      {std::string(600, '['), 513}   // nesting too deep
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const std::string msg = error_of([&] { parse(c.text); });
    CHECK(msg.find("invalid JSON at offset " + std::to_string(c.offset) + ":") == 0);
  }
  CHECK(error_of([] { parse("[1,]"); }) == "invalid JSON at offset 3: unexpected character ']'");
  CHECK(error_of([] { parse("{\"a\":1,\"a\":2}"); }) ==
        "invalid JSON at offset 7: duplicate key 'a'");
}

TEST_CASE("json: numbers beyond the range of a double are errors") {
  // RFC 8259 section 6 lets parsers limit the range; subnormals are still in it.
  CHECK(parse("5e-324").as_double() == std::numeric_limits<double>::denorm_min());
  CHECK(parse("-2.2250738585072014e-308").as_double() == -std::numeric_limits<double>::min());
  CHECK(error_of([] { parse("[1e-400]"); }) ==
        "invalid JSON at offset 1: number 1e-400 is out of range");
  CHECK(!error_of([] { parse(std::string(400, '9')); }).empty());
}

TEST_CASE("json: dump is compact or pretty with sorted keys") {
  Value v;
  v["zeta"] = 1;
  v["alpha"]["x"] = "y";
  v["list"].push_back(true);
  v["list"].push_back(Value());
  v["list"].push_back(0.5);
  v["empty"] = Value::array();
  CHECK(v.dump() == R"({"alpha":{"x":"y"},"empty":[],"list":[true,null,0.5],"zeta":1})");
  CHECK(v.dump(2) ==
        "{\n"
        "  \"alpha\": {\n"
        "    \"x\": \"y\"\n"
        "  },\n"
        "  \"empty\": [],\n"
        "  \"list\": [\n"
        "    true,\n"
        "    null,\n"
        "    0.5\n"
        "  ],\n"
        "  \"zeta\": 1\n"
        "}");
  CHECK(parse(v.dump(2)).dump() == v.dump());
  CHECK(Value::object().dump(4) == "{}");
}

TEST_CASE("json: doubles round-trip bit for bit") {
  const double values[] = {0.1,
                           1.0 / 3.0,
                           -2.5e-7,
                           1e-300,
                           6.02214076e23,
                           1e300,
                           std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::min(),
                           std::numeric_limits<double>::denorm_min()};
  for (double d : values) {
    CAPTURE(d);
    const double back = parse(Value(d).dump()).as_double();
    CHECK(std::bit_cast<uint64_t>(back) == std::bit_cast<uint64_t>(d));
  }
  CHECK(Value(0.1).dump() == "0.1");  // shortest form, not 0.10000000000000001
}

TEST_CASE("json: non-finite numbers cannot be written") {
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(error_of([&] { Value(inf).dump(); }).find("non-finite") != std::string::npos);
  CHECK(error_of([&] { Value(-inf).dump(); }).find("non-finite") != std::string::npos);
  CHECK(!error_of([] { Value(std::nan("")).dump(); }).empty());
  Value v;
  v["a"].push_back(std::nan(""));
  CHECK(!error_of([&] { v.dump(); }).empty());
}

TEST_CASE("json: accessors check the kind") {
  const Value v = parse(R"({"n": 1, "s": "x", "a": [1]})");
  CHECK(error_of([&] { v.at("s").as_int(); }) == "JSON value is a string, expected an integer");
  CHECK(error_of([&] { v.at("n").as_string(); }) == "JSON value is a number, expected a string");
  CHECK(error_of([&] { v.at("n").as_bool(); }) == "JSON value is a number, expected a bool");
  CHECK(error_of([&] { v.at("a").members(); }) == "JSON value is an array, expected an object");
  CHECK(error_of([&] { v.items(); }) == "JSON value is an object, expected an array");
  CHECK(error_of([&] { v.at("missing"); }) == "missing key 'missing'");
  CHECK(error_of([&] { v.at("a").at(1); }) == "JSON array index 1 is out of range (size 1)");
  CHECK(error_of([&] { v.at("n").size(); }) ==
        "JSON value is a number, expected an array or object");
  Value arr = Value::array();
  CHECK(error_of([&] { arr["k"]; }) == "JSON value is an array, expected an object");
  Value obj = Value::object();
  CHECK(error_of([&] { obj.push_back(1); }) == "JSON value is an object, expected an array");
  CHECK_FALSE(arr.has("k"));
}

TEST_CASE("json: copies are independent values") {
  Value a;
  a["k"] = 1;
  a["list"].push_back(1);
  Value b = a;
  b["k"] = 2;
  b["list"].push_back(2);
  CHECK(a.dump() == R"({"k":1,"list":[1]})");
  CHECK(b.dump() == R"({"k":2,"list":[1,2]})");
}
