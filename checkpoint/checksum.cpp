#include "checkpoint/checksum.hpp"

#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "util/error.hpp"
#include "util/input_file.hpp"

namespace tetra::ckpt {

namespace {

// The reflected Castagnoli polynomial 0x1EDC6F41.
constexpr uint32_t kPoly = 0x82F63B78u;

// Slicing-by-8: table k maps a byte to its CRC contribution k bytes further on, so eight
// input bytes are folded in with eight independent lookups instead of eight dependent ones.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c >> 1) ^ ((c & 1) ? kPoly : 0);
    t[0][i] = c;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
  }
  return t;
}

constexpr Tables kTables = make_tables();

static_assert(std::endian::native == std::endian::little,
              "the slicing-by-8 loop reads 8 bytes as a little-endian word");

}  // namespace

void Crc32c::update(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = state_;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    w ^= c;
    c = kTables[7][w & 0xFF] ^ kTables[6][(w >> 8) & 0xFF] ^ kTables[5][(w >> 16) & 0xFF] ^
        kTables[4][(w >> 24) & 0xFF] ^ kTables[3][(w >> 32) & 0xFF] ^ kTables[2][(w >> 40) & 0xFF] ^
        kTables[1][(w >> 48) & 0xFF] ^ kTables[0][w >> 56];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xFF];
  state_ = c;
}

uint32_t crc32c(const void* data, size_t n) {
  Crc32c c;
  c.update(data, n);
  return c.value();
}

FileDigest digest_file(const std::string& path) {
  const InputFile in = open_input_file(path);
  check(in.fd >= 0, "checkpoint file '", path, "': cannot open: ", in.problem);
  std::vector<char> buf(1 << 20);
  Crc32c crc;
  FileDigest d;
  for (;;) {
    const ssize_t r = ::read(in.fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    check(r >= 0, "checkpoint file '", path, "': read failed: ", std::strerror(errno));
    if (r == 0) break;
    crc.update(buf.data(), size_t(r));
    d.bytes += uint64_t(r);
  }
  d.crc = crc.value();
  return d;
}

std::string crc_hex(uint32_t crc) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", crc);
  return buf;
}

}  // namespace tetra::ckpt
