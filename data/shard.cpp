#include "data/shard.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "util/error.hpp"
#include "util/output_file.hpp"

namespace tetra::data {
namespace {

// llm.c shard layout: 256 int32 header words, then header[2] tokens of the width the magic
// number and version name.
constexpr int32_t kMagic16 = 20240520, kVersion16 = 1;
constexpr int32_t kMagic32 = 20240801, kVersion32 = 7;
constexpr int kHeaderWords = 256;
constexpr int64_t kHeaderBytes = kHeaderWords * sizeof(int32_t);

// Shards are little-endian and are read and written with plain memory copies.
static_assert(std::endian::native == std::endian::little, "tetra assumes a little-endian host");

}  // namespace

InputFile open_data_file(const std::string& path) {
  InputFile f = open_input_file(path);
  check(f.fd >= 0, "data file '", path, "': ", f.problem);
  return f;
}

void read_exactly(const InputFile& f, void* buf, int64_t n, int64_t offset, const std::string& path,
                  const char* what) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::pread(f.fd, p, size_t(n), off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    check(r > 0, "data file '", path, "': cannot read ", what,
          r < 0 ? std::string(": ") + std::strerror(errno) : std::string(" (it shrank)"));
    p += r;
    n -= r;
    offset += r;
  }
}

BinShard read_bin_shard(const std::string& path) {
  const InputFile f = open_data_file(path);
  const int64_t bytes = f.size;
  check(bytes >= kHeaderBytes, "data file '", path, "': ", bytes, " bytes, too short for the ",
        kHeaderBytes, "-byte llm.c header");
  BinShard shard;
  std::array<int32_t, kHeaderWords>& header = shard.header;
  read_exactly(f, header.data(), kHeaderBytes, 0, path, "the header");
  check(header[0] == kMagic16 || header[0] == kMagic32, "data file '", path, "': bad magic ",
        header[0], " (expected ", kMagic16, " for uint16 tokens or ", kMagic32, " for uint32)");
  const bool wide = header[0] == kMagic32;
  const int32_t version = wide ? kVersion32 : kVersion16;
  check(header[1] == version, "data file '", path, "': unsupported version ", header[1],
        " (expected ", version, " with magic ", header[0], ")");
  check(header[2] >= 0, "data file '", path, "': negative token count ", header[2],
        " in the header");
  shard.width = wide ? TokenWidth::U32 : TokenWidth::U16;
  const int64_t size = wide ? 4 : 2;
  const int64_t held = (bytes - kHeaderBytes) / size;
  check(held >= header[2], "data file '", path, "': header says ", header[2],
        " tokens but the file holds ", held);
  // Extra bytes after the header's count are ignored, as llm.c does.
  shard.tokens.resize(size_t(header[2]));
  if (wide) {
    read_exactly(f, shard.tokens.data(), header[2] * size, kHeaderBytes, path, "its tokens");
  } else {
    std::vector<uint16_t> narrow(static_cast<size_t>(header[2]));
    read_exactly(f, narrow.data(), header[2] * size, kHeaderBytes, path, "its tokens");
    std::copy(narrow.begin(), narrow.end(), shard.tokens.begin());
  }
  return shard;
}

bool is_bin_shard(const std::string& path) {
  const InputFile f = open_input_file(path);
  int32_t first = 0;
  return f.fd >= 0 && ::pread(f.fd, &first, sizeof first, 0) == ssize_t(sizeof first) &&
         (first == kMagic16 || first == kMagic32);
}

TokenWidth token_width(int64_t vocab) {
  return vocab <= 65536 ? TokenWidth::U16 : TokenWidth::U32;
}

std::string shard_bytes(const std::vector<uint32_t>& tokens, TokenWidth width) {
  if (width == TokenWidth::U32)
    return std::string(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 4);
  std::string out(tokens.size() * 2, '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint16_t t = uint16_t(tokens[i]);
    std::memcpy(&out[2 * i], &t, 2);
  }
  return out;
}

void write_bin_shard(const std::string& path, const std::vector<uint32_t>& tokens, TokenWidth width,
                     const std::vector<int32_t>& extra) {
  check(tokens.size() <= size_t(std::numeric_limits<int32_t>::max()), "data file '", path,
        "': ", tokens.size(), " tokens do not fit the int32 count of an llm.c header");
  check(extra.size() <= size_t(kHeaderWords - 3), "data file '", path, "': ", extra.size(),
        " extra header words do not fit");
  if (width == TokenWidth::U16) {
    const auto wide =
        std::find_if(tokens.begin(), tokens.end(), [](uint32_t t) { return t > 65535; });
    check(wide == tokens.end(), "data file '", path, "': token id ",
          wide == tokens.end() ? 0 : *wide, " does not fit the uint16 tokens of an llm.c shard");
  }
  const bool u32 = width == TokenWidth::U32;
  std::array<int32_t, kHeaderWords> header{};
  header[0] = u32 ? kMagic32 : kMagic16;
  header[1] = u32 ? kVersion32 : kVersion16;
  header[2] = static_cast<int32_t>(tokens.size());
  std::copy(extra.begin(), extra.end(), header.begin() + 3);
  const std::string body = shard_bytes(tokens, width);
  const std::string problem = replace_file(path, [&](int fd) {
    return write_all(fd, header.data(), kHeaderBytes) && write_all(fd, body.data(), body.size());
  });
  check(problem.empty(), "data file '", path, "': cannot be written: ", problem);
}

}  // namespace tetra::data
