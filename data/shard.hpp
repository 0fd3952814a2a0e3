// llm.c's token shards (dev/data/data_common.py in llm.c): a header of 256 int32 words (magic,
// version, token count; llm.c reads only these three, and tetra's token cache keeps in words
// 3.. what the shard was made from), then the tokens, little-endian.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "util/input_file.hpp"

namespace tetra::data {

// The two token widths of llm.c's shards (dev/data/data_common.py): uint16 ids (GPT-2's
// format, magic 20240520, version 1) and uint32 ids (Llama 3's, magic 20240801, version 7).
enum class TokenWidth { U16, U32 };
// The width that holds every id of a vocabulary: uint16 up to 65,536 tokens, so that such
// shards stay llm.c's GPT-2 format as they always were.
TokenWidth token_width(int64_t vocab);

// An llm.c shard as read: its header (words 3.. are free: llm.c reads only the first three,
// and tetra's token cache keeps there what the shard was made from), its width and its tokens.
struct BinShard {
  std::array<int32_t, 256> header{};
  TokenWidth width = TokenWidth::U16;
  std::vector<uint32_t> tokens;
};
// Throws tetra::Error as open_dataset does for a file that is not a whole shard.
BinShard read_bin_shard(const std::string& path);

// Writes an llm.c-format token shard of `width` whole (a temporary renamed over `path`), with
// `extra` as header words 3 onwards. Throws tetra::Error for an id the width does not hold.
void write_bin_shard(const std::string& path, const std::vector<uint32_t>& tokens,
                     TokenWidth width = TokenWidth::U16, const std::vector<int32_t>& extra = {});
// The bytes a shard of `width` stores for `tokens` (what the token cache hashes).
std::string shard_bytes(const std::vector<uint32_t>& tokens, TokenWidth width);

// Whether the file begins with an llm.c shard's magic number, of either width (false when it
// cannot be read).
bool is_bin_shard(const std::string& path);

// A data file opened for reading (util/input_file: a regular file, never a FIFO or a device,
// whose open or read would not end), or a tetra::Error naming it; n bytes of it at offset, or
// a tetra::Error naming `what` was not read.
InputFile open_data_file(const std::string& path);
void read_exactly(const InputFile& f, void* buf, int64_t n, int64_t offset, const std::string& path,
                  const char* what);

}  // namespace tetra::data
