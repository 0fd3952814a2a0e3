#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "../support/test_util.hpp"
#include "checkpoint/safetensors.hpp"
#include "util/bf16.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;
using tetra::bf16_to_float;
using tetra::float_to_bf16;
using tetra::st::Reader;
using tetra::st::Writer;

using tetra::test::error_of;
using tetra::test::TempDir;

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A safetensors file built by hand: little-endian header length, header, data.
std::string st_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char(uint64_t(header.size()) >> (8 * i));
  return out + header + data;
}

std::string u16_le(std::initializer_list<uint16_t> values) {
  std::string out;
  for (uint16_t v : values) out += {char(v & 0xFF), char(v >> 8)};
  return out;
}

// Whether a temporary (any name ending in .tmp) is left in dir.
bool temporary_in(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".tmp") return true;
  return false;
}

uint32_t bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

}  // namespace

TEST_CASE("safetensors: write then read round trip with metadata") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> w = {1.5f, -2.25f, 0.0f, -0.0f, 3e-41f /*subnormal*/, 1e30f};
  const std::vector<float> special = {nan, inf, -inf};
  const float scalar = 42.0f;

  Writer writer;
  // Added in non-alphabetical order: the data section keeps this order.
  writer.add("z.weight", {2, 3}, w.data());
  writer.add("a.special", {3}, special.data());
  writer.add("m.scalar", {}, &scalar);
  writer.add("e.empty", {0, 4}, nullptr);
  writer.set_metadata("step", "1200");
  writer.set_metadata("format", "pt");
  writer.write(path);

  // Layout: header padded to 8 bytes, tensors back to back from an aligned data start.
  const std::string raw = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  CHECK(n % 8 == 0);
  CHECK(raw.size() == 8 + n + (6 + 3 + 1) * 4);
  CHECK(std::memcmp(raw.data() + 8 + n, w.data(), w.size() * 4) == 0);
  CHECK_FALSE(temporary_in(dir.path.string()));

  Reader r(path);
  CHECK(r.path() == path);
  CHECK(r.names() == std::vector<std::string>{"a.special", "e.empty", "m.scalar", "z.weight"});
  CHECK(r.metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"step", "1200"}});
  CHECK(r.info("z.weight").dtype == "F32");
  CHECK(r.info("z.weight").shape == std::vector<int64_t>{2, 3});
  CHECK(r.info("z.weight").begin == 0);
  CHECK(r.info("a.special").begin == 24);
  CHECK(r.info("m.scalar").begin == 36);
  CHECK(r.info("m.scalar").numel() == 1);
  CHECK(r.info("e.empty").numel() == 0);
  CHECK(r.has("z.weight"));
  CHECK_FALSE(r.has("nope"));

  const std::vector<float> w_back = r.read("z.weight");
  REQUIRE(w_back.size() == w.size());
  for (size_t i = 0; i < w.size(); ++i) CHECK(bits(w_back[i]) == bits(w[i]));
  const std::vector<float> s_back = r.read("a.special");
  CHECK(std::isnan(s_back[0]));
  CHECK(s_back[1] == inf);
  CHECK(s_back[2] == -inf);
  CHECK(r.read("m.scalar") == std::vector<float>{42.0f});
  CHECK(r.read("e.empty").empty());
}

TEST_CASE("safetensors: the header is padded so that data starts 8-byte aligned") {
  TempDir dir;
  const float x = 1.0f;
  // Names of 1..8 characters give every header length modulo 8.
  for (std::string name = "a"; name.size() <= 8; name += 'b') {
    CAPTURE(name);
    Writer writer;
    writer.add(name, {1}, &x);
    const std::string path = dir.file(name);
    writer.write(path);
    const std::string raw = read_bytes(path);
    uint64_t n = 0;
    std::memcpy(&n, raw.data(), 8);
    CHECK(n % 8 == 0);
    CHECK(raw.size() == 8 + n + 4);
    CHECK(Reader(path).read(name) == std::vector<float>{1.0f});
  }
}

TEST_CASE("safetensors: range reads") {
  TempDir dir;
  const std::string path = dir.file("r.safetensors");
  std::vector<float> a(100), b(7);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) * 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = -float(i);
  Writer writer;
  writer.add("a", {10, 10}, a.data());
  writer.add("b", {7}, b.data());
  writer.write(path);

  Reader r(path);
  std::vector<float> out(5, -1.0f);
  r.read("a", 37, 5, out.data());
  CHECK(out == std::vector<float>(a.begin() + 37, a.begin() + 42));
  r.read("b", 6, 1, out.data());
  CHECK(out[0] == -6.0f);
  r.read("a", 100, 0, out.data());  // an empty range at the end is fine

  CHECK(error_of([&] { r.read("a", 98, 5, out.data()); }) ==
        "safetensors file '" + path +
            "': cannot read elements [98, 103) of tensor 'a' with 100 "
            "elements");
  CHECK(!error_of([&] { r.read("a", -1, 2, out.data()); }).empty());
  CHECK(!error_of([&] { r.read("a", 0, -1, out.data()); }).empty());
  CHECK(error_of([&] { r.read("c", 0, 1, out.data()); }) ==
        "safetensors file '" + path + "': no tensor named 'c'");
}

TEST_CASE("safetensors: bf16 conversion rounds to nearest even") {
  auto from_bits = [](uint32_t u) { return std::bit_cast<float>(u); };
  CHECK(float_to_bf16(1.0f) == 0x3F80);
  CHECK(float_to_bf16(from_bits(0x3F808000)) == 0x3F80);  // tie, 0x3F80 is even: down
  CHECK(float_to_bf16(from_bits(0x3F818000)) == 0x3F82);  // tie, 0x3F82 is even: up
  CHECK(float_to_bf16(from_bits(0x3F808001)) == 0x3F81);  // just above the tie
  CHECK(float_to_bf16(from_bits(0x3F807FFF)) == 0x3F80);  // just below the tie
  CHECK(float_to_bf16(-0.0f) == 0x8000);
  CHECK(float_to_bf16(std::numeric_limits<float>::max()) == 0x7F80);  // rounds to inf
  CHECK(float_to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80);
  // A NaN whose payload is only in the dropped bits must not become infinity.
  CHECK(std::isnan(bf16_to_float(float_to_bf16(from_bits(0x7F800001)))));
  CHECK(std::isnan(bf16_to_float(float_to_bf16(from_bits(0xFFC00000)))));
  CHECK(bf16_to_float(0x3F82) == 1.015625f);
  int changed = 0;  // every non-NaN bf16 survives float and back
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t b = uint16_t(h);
    if (!std::isnan(bf16_to_float(b)) && float_to_bf16(bf16_to_float(b)) != b) ++changed;
  }
  CHECK(changed == 0);
}

TEST_CASE("safetensors: BF16 file crafted by hand") {
  TempDir dir;
  const std::string path = dir.file("bf16.safetensors");
  // 0x3F82 is what 1.01171875 (a tie between 0x3F81 and 0x3F82) rounds to.
  REQUIRE(float_to_bf16(1.01171875f) == 0x3F82);
  const std::string data = u16_le({0x3F80, 0xC040, 0x3F82, 0x8000, 0x0001, 0x7F80, 0xFF80, 0x7FC1});
  write_bytes(path, st_file(R"({"w":{"dtype":"BF16","shape":[2,4],"data_offsets":[0,16]}})", data));
  Reader r(path);
  CHECK(r.info("w").dtype == "BF16");
  const std::vector<float> v = r.read("w");
  REQUIRE(v.size() == 8);
  CHECK(v[0] == 1.0f);
  CHECK(v[1] == -3.0f);
  CHECK(v[2] == 1.015625f);
  CHECK(bits(v[3]) == 0x80000000u);  // -0
  CHECK(bits(v[4]) == 0x00010000u);  // smallest bf16 subnormal
  CHECK(v[5] == std::numeric_limits<float>::infinity());
  CHECK(v[6] == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(v[7]));
  float mid[2];
  r.read("w", 2, 2, mid);
  CHECK(mid[0] == 1.015625f);
  CHECK(bits(mid[1]) == 0x80000000u);
}

TEST_CASE("safetensors: half-precision reads longer than the conversion buffer") {
  TempDir dir;
  const std::string path = dir.file("long.safetensors");
  const int64_t n = 150'000;  // more than two 64Ki-element chunks
  std::string data;
  std::vector<float> expect;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t b = uint16_t(0x3000 + i % 10007);
    data += u16_le({b});
    expect.push_back(bf16_to_float(b));
  }
  write_bytes(
      path, st_file(R"({"w":{"dtype":"BF16","shape":[150000],"data_offsets":[0,300000]}})", data));
  Reader r(path);
  CHECK(r.read("w") == expect);
  std::vector<float> part(100'000);
  r.read("w", 40'000, 100'000, part.data());
  CHECK(part == std::vector<float>(expect.begin() + 40'000, expect.begin() + 140'000));
}

TEST_CASE("safetensors: F16 file crafted by hand") {
  TempDir dir;
  const std::string path = dir.file("f16.safetensors");
  // A second tensor first in the data section, so "h" starts at a non-zero offset.
  const std::string data = u16_le({0x1234, 0x3C00, 0xC000, 0x3555, 0x7BFF, 0x0400, 0x0001, 0x03FF,
                                   0x8001, 0x7C00, 0xFC00, 0x7E00, 0x8000});
  write_bytes(path, st_file(R"({"pad":{"dtype":"I16","shape":[1],"data_offsets":[0,2]},)"
                            R"("h":{"dtype":"F16","shape":[12],"data_offsets":[2,26]}})",
                            data));
  Reader r(path);
  const std::vector<float> v = r.read("h");
  REQUIRE(v.size() == 12);
  CHECK(v[0] == 1.0f);
  CHECK(v[1] == -2.0f);
  CHECK(v[2] == 0.333251953125f);
  CHECK(v[3] == 65504.0f);                  // largest half
  CHECK(v[4] == std::ldexp(1.0f, -14));     // smallest normal
  CHECK(v[5] == std::ldexp(1.0f, -24));     // smallest subnormal
  CHECK(v[6] == std::ldexp(1023.0f, -24));  // largest subnormal
  CHECK(v[7] == -std::ldexp(1.0f, -24));
  CHECK(v[8] == std::numeric_limits<float>::infinity());
  CHECK(v[9] == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(v[10]));
  CHECK(bits(v[11]) == 0x80000000u);  // -0
  float tail[3];
  r.read("h", 9, 3, tail);
  CHECK(tail[0] == -std::numeric_limits<float>::infinity());
}

TEST_CASE("safetensors: truncated files and header lengths past the end") {
  TempDir dir;
  const std::string path = dir.file("t.safetensors");
  const std::vector<float> w(16, 1.0f);
  Writer writer;
  writer.add("w", {4, 4}, w.data());
  writer.write(path);
  const uint64_t size = fs::file_size(path);

  fs::resize_file(path, size - 4);
  CHECK(error_of([&] { Reader r(path); })
            .find("tensor 'w': data_offsets [0, 64] run past the "
                  "end of the data section (60 bytes") != std::string::npos);
  fs::resize_file(path, 20);
  CHECK(error_of([&] { Reader r(path); }).find("runs past the end of the file (20 bytes)") !=
        std::string::npos);
  fs::resize_file(path, 5);
  CHECK(error_of([&] { Reader r(path); }) ==
        "safetensors file '" + path + "': 5 bytes is too short for the 8-byte header length");

  std::string bytes = st_file("{}", "");
  bytes.resize(120, ' ');
  bytes[0] = char(99999 & 0xFF);
  bytes[1] = char(99999 >> 8);
  bytes[2] = char(99999 >> 16);
  write_bytes(path, bytes);
  CHECK(error_of([&] { Reader r(path); }) ==
        "safetensors file '" + path +
            "': header length 99999 runs past the end of the file (120 bytes)");

  // A file cut short after its header was read fails on the read, not with garbage.
  writer.write(path);
  Reader r(path);
  fs::resize_file(path, size - 8);
  CHECK(error_of([&] { r.read("w"); }).find("unexpected end of file") != std::string::npos);
}

TEST_CASE("safetensors: malformed headers are rejected with the file and the problem") {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  struct Case {
    const char* header;
    const char* message;
  };
  const Case cases[] = {
      {"not json", "header is not valid: invalid JSON: parse error at line 1, column 2"},
      {"[1, 2]", "header is not a JSON object"},
      {R"({"t": 5})", "tensor 't': expected an object"},
      {R"({"t": {"shape": [1], "data_offsets": [0, 4]}})", "tensor 't': missing \"dtype\""},
      {R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})", "missing \"shape\""},
      {R"({"t": {"dtype": "F32", "shape": [1]}})", "missing \"data_offsets\""},
      {R"({"t": {"dtype": 1, "shape": [1], "data_offsets": [0, 4]}})", "\"dtype\" is not a str"},
      {R"({"t": {"dtype": "F32", "shape": 1, "data_offsets": [0, 4]}})", "\"shape\" is not an"},
      {R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", "not a non-negative"},
      {R"({"t": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", "not a non-negat"},
      {R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})",
       "has too many elements"},
      {R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", "not a pair"},
      {R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})", "not a pair"},
      {R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", "not a pair"},
      {R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", "end before begin"},
      {R"({"t": {"dtype": "F32", "shape": [5], "data_offsets": [0, 20]}})",
       "tensor 't': data_offsets [0, 20] run past the end of the data section (16 bytes"},
      {R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 12]}})",
       "tensor 't': dtype F32 with shape [2] needs 8 bytes but data_offsets [0, 12] hold 12"},
      {R"({"t": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 8]}})",
       "dtype BF16 with shape [2, 3] needs 12 bytes"},
      {R"({"__metadata__": {"k": 1}})", "__metadata__ value of 'k' is not a string"},
      {R"({"__metadata__": []})", "__metadata__ is not an object"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.header);
    write_bytes(path, st_file(c.header, std::string(16, '\0')));
    const std::string msg = error_of([&] { Reader r(path); });
    CHECK(msg.find("safetensors file '" + path + "': ") == 0);
    CHECK(msg.find(c.message) != std::string::npos);
  }
}

TEST_CASE("safetensors: unsupported dtypes and missing files are named in the error") {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  write_bytes(path,
              st_file(R"({"lm_head.weight":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
                      R"("odd":{"dtype":"F4_NEW","shape":[3],"data_offsets":[16,18]}})",
                      std::string(18, '\0')));
  Reader r(path);  // the header is valid; only reading these as float is not
  CHECK(r.names() == std::vector<std::string>{"lm_head.weight", "odd"});
  CHECK(error_of([&] { r.read("lm_head.weight"); }) ==
        "safetensors file '" + path +
            "': tensor 'lm_head.weight' has dtype I64; supported: F32, BF16, F16");
  CHECK(error_of([&] { r.read("odd"); }).find("has dtype F4_NEW") != std::string::npos);

  const std::string missing = dir.file("missing.safetensors");
  CHECK(error_of([&] { Reader m(missing); }) == "safetensors file '" + missing + "': not found");
  CHECK(error_of([&] { Reader d(dir.path.string()); }).find("not a regular file") !=
        std::string::npos);
}

TEST_CASE("safetensors: failed writes name the path and leave nothing behind") {
  TempDir dir;
  const std::vector<float> w = {1, 2, 3};
  Writer writer;
  writer.add("w", {3}, w.data());

  const std::string in_missing_dir = dir.file("no/such/dir/x.safetensors");
  const std::string msg = error_of([&] { writer.write(in_missing_dir); });
  CHECK(msg.find("cannot write safetensors file '" + in_missing_dir + "'") == 0);
  CHECK(msg.find("No such file or directory") != std::string::npos);
  CHECK_FALSE(fs::exists(in_missing_dir));

  // The rename fails late, after the data is written: the temporary must still go.
  const std::string is_dir = dir.file("taken");
  fs::create_directory(is_dir);
  CHECK(error_of([&] { writer.write(is_dir); }).find("'" + is_dir + "'") != std::string::npos);
  CHECK(fs::is_directory(is_dir));
  CHECK_FALSE(temporary_in(dir.path.string()));

  // Permissions do not stop root, so the read-only case runs only for other users.
  if (::geteuid() != 0) {
    const std::string ro = dir.file("ro");
    fs::create_directory(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    const std::string target = ro + "/x.safetensors";
    CHECK(error_of([&] { writer.write(target); }).find(target) != std::string::npos);
    CHECK_FALSE(fs::exists(target));
    fs::permissions(ro, fs::perms::owner_all);
  }

  // A successful write replaces an existing file whole.
  const std::string path = dir.file("x.safetensors");
  write_bytes(path, "old contents");
  writer.write(path);
  CHECK(Reader(path).read("w") == w);
  CHECK_FALSE(temporary_in(dir.path.string()));
}

TEST_CASE("safetensors: the writer rejects bad tensors") {
  const float x = 1.0f;
  Writer writer;
  writer.add("a", {1}, &x);
  CHECK(error_of([&] { writer.add("a", {1}, &x); }) ==
        "safetensors writer: tensor 'a' added twice");
  CHECK(!error_of([&] { writer.add("__metadata__", {1}, &x); }).empty());
  CHECK(error_of([&] {
          writer.add("b", {2, -1}, &x);
        }) == "safetensors writer: tensor 'b' has invalid shape [2, -1]");
  CHECK(error_of([&] { writer.add("c", {4}, nullptr); }) ==
        "safetensors writer: tensor 'c' has no data");
}
