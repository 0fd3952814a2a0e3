// CRC-32C (Castagnoli), the checksum of checkpoint shard files. It is the CRC that iSCSI,
// ext4 and RocksDB use; a table-driven version is short, needs no library and runs at a
// few GB/s, so checksumming a shard costs little next to writing it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tetra::ckpt {

// The name the manifest gives the algorithm.
inline constexpr const char* kChecksumAlgorithm = "crc32c";

// Incremental: feed the bytes in any pieces, then read value().
class Crc32c {
 public:
  void update(const void* data, size_t n);
  uint32_t value() const { return ~state_; }

 private:
  uint32_t state_ = 0xFFFFFFFFu;
};

uint32_t crc32c(const void* data, size_t n);

// Size and checksum of a whole file. Throws tetra::Error naming the file if it cannot be
// read.
struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc = 0;
};
FileDigest digest_file(const std::string& path);

// Eight lowercase hex digits, as the manifest stores a checksum.
std::string crc_hex(uint32_t crc);

}  // namespace tetra::ckpt
