// What tetra relies on when it reads and writes JSON through nlohmann-json (util/json.hpp):
// parse_json's one-line problems, exact integers and doubles, null for non-finite numbers,
// sorted keys, and the messages checkpoint files give for values of the wrong kind.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "../support/test_util.hpp"
#include "checkpoint/checkpoint.hpp"
#include "util/error.hpp"
#include "util/json.hpp"

using tetra::json;
using tetra::json_int;
using tetra::parse_json;
using tetra::test::error_of;
using tetra::test::parsed_json;

namespace {

// The problem parse_json reports for text ("" when it parses).
std::string problem_of(const std::string& text) {
  json v;
  return parse_json(text, v);
}

}  // namespace

TEST_CASE("json: parses scalars, arrays and nested objects") {
  const json v =
      parsed_json(R"( {"a": [1, -2.5, true, false, null, "s"], "b": {"c": {}, "d": []}} )");
  REQUIRE(v.is_object());
  CHECK(v.size() == 2);
  const json& a = v.at("a");
  REQUIRE(a.size() == 6);
  CHECK(json_int(a.at(0)) == 1);
  CHECK(a.at(1).get<double>() == -2.5);
  CHECK(a.at(2).get<bool>() == true);
  CHECK(a.at(3).get<bool>() == false);
  CHECK(a.at(4).is_null());
  CHECK(a.at(5).get<std::string>() == "s");
  CHECK(v.at("b").at("c").is_object());
  CHECK(v.at("b").at("c").size() == 0);
  CHECK(v.at("b").at("d").empty());
  CHECK(v.contains("a"));
  CHECK_FALSE(v.contains("z"));
  CHECK(json_int(parsed_json("\t\r\n 7 \n")) == 7);
  CHECK(json_int(parsed_json("0")) == 0);
  CHECK(parsed_json("-0.0e0").get<double>() == 0.0);
  CHECK(json_int(parsed_json("1E+2")) == 100);
  CHECK(parsed_json("25e-1").get<double>() == 2.5);
}

TEST_CASE("json: integers keep their exact int64 value") {
  // 2^53 + 1 has no double representation; it must not pass through one.
  CHECK(json_int(parsed_json("9007199254740993")) == 9007199254740993LL);
  CHECK(parsed_json("9007199254740993").dump() == "9007199254740993");
  CHECK(json_int(parsed_json("9223372036854775807")) == std::numeric_limits<int64_t>::max());
  CHECK(json_int(parsed_json("-9223372036854775808")) == std::numeric_limits<int64_t>::min());
  CHECK(json(int64_t{-9223372036854775807LL - 1}).dump() == "-9223372036854775808");

  // Past int64 it is still a number, and json_int refuses it rather than wrapping.
  const json big = parsed_json("18446744073709551615");
  CHECK(big.get<double>() == 18446744073709551615.0);
  CHECK(json_int(big) == std::nullopt);
  CHECK(parsed_json(big.dump()).get<double>() == big.get<double>());

  // Integral doubles are integers; fractions, non-numbers and the edges of int64 are not.
  CHECK(json_int(parsed_json("1.0")) == 1);
  CHECK(json_int(json(3.0)) == 3);
  CHECK(json_int(parsed_json("1.5")) == std::nullopt);
  CHECK(json_int(json(-0x1p63)) == std::numeric_limits<int64_t>::min());
  CHECK(json_int(json(0x1p63)) == std::nullopt);
  CHECK(json_int(json(std::nan(""))) == std::nullopt);
  CHECK(json_int(json("1")) == std::nullopt);
  CHECK(json_int(json(true)) == std::nullopt);
}

TEST_CASE("json: checkpoint files name the key and the value of the wrong kind") {
  const tetra::ModelConfig c;
  json m = tetra::ckpt::model_to_json(c);
  m["dim"] = 1.5;
  CHECK(error_of([&] { tetra::ckpt::model_from_json(m, "m"); }) ==
        "m: \"dim\" is 1.5, not an integer");
  m["dim"] = parsed_json("18446744073709551615");
  CHECK(error_of([&] { tetra::ckpt::model_from_json(m, "m"); }).find("not an integer") !=
        std::string::npos);
  m["dim"] = "64";
  CHECK(error_of([&] { tetra::ckpt::model_from_json(m, "m"); }) ==
        "m: \"dim\" is \"64\", not an integer");
  m = tetra::ckpt::model_to_json(c);
  m["rope_theta"] = nullptr;
  CHECK(error_of([&] { tetra::ckpt::model_from_json(m, "m"); }) ==
        "m: \"rope_theta\" is null, not a number");
  m.erase("heads");
  CHECK(error_of([&] { tetra::ckpt::model_from_json(m, "m"); }) == "m: missing \"heads\"");
  CHECK(error_of([&] { tetra::ckpt::model_from_json(json::array(), "m"); }) ==
        "m: expected an object with \"vocab\", got []");
}

TEST_CASE("json: string escapes and unicode") {
  CHECK(parsed_json(R"("\"\\\/\b\f\n\r\t")").get<std::string>() == "\"\\/\b\f\n\r\t");
  CHECK(parsed_json(R"("\u00e9\u20AC")").get<std::string>() == "\xC3\xA9\xE2\x82\xAC");  // é€
  CHECK(parsed_json(R"("\ud83d\ude00")").get<std::string>() == "\xF0\x9F\x98\x80");      // U+1F600
  CHECK(parsed_json(R"("\u0000")").get<std::string>() == std::string(1, '\0'));
  CHECK(parsed_json("\"caf\xC3\xA9 \xF0\x9F\x98\x80\"").get<std::string>() ==
        "caf\xC3\xA9 \xF0\x9F\x98\x80");

  // Writing escapes what JSON requires and leaves UTF-8 as it is.
  CHECK(json("a\"b\\c\n\x01\x1F\xC3\xA9").dump() == R"("a\"b\\c\n\u0001\u001f)"
                                                    "\xC3\xA9\"");

  CHECK(json("a/b").dump() == "\"a/b\"");  // '/' may be escaped, but need not be

  // Every ASCII byte, and multi-byte characters, survive dump -> parse.
  std::string all;
  for (int c = 0; c < 128; ++c) all += char(c);
  all += "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  CHECK(parsed_json(json(all).dump()).get<std::string>() == all);

  // Bytes that are not UTF-8 would make text no JSON parser accepts: the library refuses.
  CHECK_THROWS_WITH_AS(json("bad \xFF").dump(), doctest::Contains("invalid UTF-8"),
                       json::type_error);
}

TEST_CASE("json: malformed input is one line naming the position") {
  // Positions are the library's: line and column of the last character it read.
  struct Case {
    std::string text;
    std::string where;
  };
  const Case cases[] = {
      {"", "line 1, column 1"},                     // empty
      {"   ", "line 1, column 4"},                  // only whitespace
      {"{", "line 1, column 2"},                    // unterminated object
      {"[1,2", "line 1, column 5"},                 // unterminated array
      {"[1,]", "line 1, column 4"},                 // trailing comma
      {"{\"a\":1,}", "line 1, column 8"},           // trailing comma in object
      {"{\"a\" 1}", "line 1, column 6"},            // missing colon
      {"{a:1}", "line 1, column 2"},                // unquoted key
      {"{\"a\":1 \"b\":2}", "line 1, column 10"},   // missing comma
      {"01", "line 1, column 2"},                   // leading zero
      {"1.", "line 1, column 3"},                   // no fraction digits
      {".5", "line 1, column 1"},                   // no integer part
      {"-", "line 1, column 2"},                    // sign only
      {"1e", "line 1, column 3"},                   // no exponent digits
      {"+1", "line 1, column 1"},                   // plus sign
      {"NaN", "line 1, column 1"},                  // not JSON
      {"Infinity", "line 1, column 1"},             // not JSON
      {"tru", "line 1, column 4"},                  // truncated literal
      {"nul", "line 1, column 4"},                  // truncated literal
      {"True", "line 1, column 1"},                 // case matters
      {"'a'", "line 1, column 1"},                  // single quotes
      {"\"abc", "line 1, column 5"},                // unterminated string
      {"\"a\nb\"", "line 2, column 0"},             // raw control character
      {"\"\\x\"", "line 1, column 3"},              // unknown escape
      {"\"\\u12\"", "line 1, column 6"},            // short \u escape
      {"\"\\u-123\"", "line 1, column 4"},          // sign in a \u escape
      {"\"\\u 123\"", "line 1, column 4"},          // space in a \u escape
      {"\"\\ud800\"", "line 1, column 8"},          // lone high surrogate
      {"\"\\udc00\"", "line 1, column 7"},          // lone low surrogate
      {"\"\\ud800\\u0041\"", "line 1, column 13"},  // high surrogate + non-surrogate
      {"\"\xFF\"", "line 1, column 2"},             // not UTF-8
      {"\"\xC0\xAF\"", "line 1, column 2"},         // overlong encoding
      {"\"\xED\xA0\x80\"", "line 1, column 3"},     // UTF-8 encoded surrogate
      {"\"\xE2\x82\"", "line 1, column 4"},         // truncated sequence
      {"[1] x", "line 1, column 5"},                // trailing garbage
      {"{} {}", "line 1, column 4"},                // two values
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const std::string problem = problem_of(c.text);
    CHECK(problem.find("invalid JSON: parse error at " + c.where + ":") == 0);
    CHECK(problem.find('\n') == std::string::npos);
  }

  // The rest are refused by tetra itself or have no position.
  CHECK(problem_of("{\"a\":1,\"a\":2}") == "invalid JSON: duplicate key 'a'");
  CHECK(problem_of("{\"a\":{\"b\":1,\"c\":{\"b\":2,\"b\":3}}}") ==
        "invalid JSON: duplicate key 'b'");
  CHECK(problem_of(std::string("[1]\0", 4)) == "invalid JSON: NUL byte at offset 3");
  CHECK(problem_of(std::string("[1]\0garbage", 11)) == "invalid JSON: NUL byte at offset 3");
  CHECK(problem_of(std::string(600, '[')) == "invalid JSON: nesting deeper than 512");
  CHECK(problem_of(std::string(513, '[') + std::string(513, ']')) ==
        "invalid JSON: nesting deeper than 512");
  CHECK(problem_of(std::string(512, '[') + std::string(512, ']')) == "");
  CHECK(problem_of("1e400") == "invalid JSON: number overflow parsing '1e400'");
  // The same key in different objects is fine.
  CHECK(problem_of(R"({"a":{"b":1},"b":{"b":2},"c":[{"a":1},{"a":1}]})") == "");

  // Otherwise the message is the library's, without its "[json.exception...]" tag.
  std::string library;
  try {
    [[maybe_unused]] const json v = json::parse("[1,]");
  } catch (const json::parse_error& e) {
    library = e.what();
  }
  const std::string tag = "[json.exception.parse_error.101] ";
  REQUIRE(library.find(tag) == 0);
  CHECK(problem_of("[1,]") == "invalid JSON: " + library.substr(tag.size()));
}

TEST_CASE("json: numbers beyond the range of a double are errors") {
  // RFC 8259 section 6 lets parsers limit the range; subnormals are still in it.
  CHECK(parsed_json("5e-324").get<double>() == std::numeric_limits<double>::denorm_min());
  CHECK(parsed_json("-2.2250738585072014e-308").get<double>() ==
        -std::numeric_limits<double>::min());
  CHECK(!problem_of(std::string(400, '9')).empty());
}

TEST_CASE("json: dump is compact or pretty with sorted keys") {
  json v;
  v["zeta"] = 1;
  v["alpha"]["x"] = "y";
  v["list"].push_back(true);
  v["list"].push_back(nullptr);
  v["list"].push_back(0.5);
  v["empty"] = json::array();
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
  CHECK(parsed_json(v.dump(2)).dump() == v.dump());
  CHECK(json::object().dump(4) == "{}");
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
    const double back = parsed_json(json(d).dump()).get<double>();
    CHECK(std::bit_cast<uint64_t>(back) == std::bit_cast<uint64_t>(d));
  }
  CHECK(json(0.1).dump() == "0.1");  // shortest form, not 0.10000000000000001

  // Losses in metrics files are compared bitwise: every finite double, not just the easy
  // ones, must come back with the same bits (random bit patterns cover every exponent).
  std::mt19937_64 rng(7);
  int mismatches = 0, finite = 0;
  for (int i = 0; i < 200000; ++i) {
    const double d = std::bit_cast<double>(uint64_t(rng()));
    if (!std::isfinite(d)) continue;
    ++finite;
    const double back = parsed_json(json(d).dump()).get<double>();
    mismatches += std::bit_cast<uint64_t>(back) != std::bit_cast<uint64_t>(d);
  }
  CHECK(finite > 190000);
  CHECK(mismatches == 0);
}

TEST_CASE("json: non-finite numbers are written as null") {
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(json(inf).dump() == "null");
  CHECK(json(-inf).dump() == "null");
  CHECK(json(std::nan("")).dump() == "null");
  json v;
  v["a"].push_back(std::nan(""));
  CHECK(v.dump() == R"({"a":[null]})");
}

TEST_CASE("json: copies are independent values") {
  json a;
  a["k"] = 1;
  a["list"].push_back(1);
  json b = a;
  b["k"] = 2;
  b["list"].push_back(2);
  CHECK(a.dump() == R"({"k":1,"list":[1]})");
  CHECK(b.dump() == R"({"k":2,"list":[1,2]})");
}
