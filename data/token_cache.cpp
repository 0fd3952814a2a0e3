#include "data/token_cache.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "data/dataset.hpp"
#include "util/error.hpp"

namespace tetra::data {
namespace {

std::string read_all(const std::string& path, const std::string& what) {
  std::error_code ec;
  check(std::filesystem::is_regular_file(path, ec), what, " '", path, "': not found");
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  check(!in.bad(), what, " '", path, "': read error");
  return bytes;
}

// FNV-1a over bytes, as 16 hex digits: names a cache entry by its inputs' content.
std::string content_hash(const std::string& a, const std::string& b = "") {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const std::string* s : {&a, &b})
    for (unsigned char c : *s) h = (h ^ c) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void refuse_tokens(const std::string& text) {
  const bool bin = text.ends_with(".bin") || is_bin_shard(text);
  check(!bin, "--tokenizer applies to text, and '", text,
        "' is an llm.c .bin shard, tokens already (give its --vocab instead)");
}

}  // namespace

std::string tokenizer_model(const std::string& spec, const std::string& text, bool* trained) {
  *trained = false;
  if (spec.rfind("bpe:", 0) != 0) return spec;
  refuse_tokens(text);
  int pieces = 0;
  try {
    size_t used = 0;
    pieces = std::stoi(spec.substr(4), &used);
    check(used == spec.size() - 4, "");
  } catch (...) {
    pieces = 0;
  }
  check(pieces > 0, "--tokenizer ", spec, ": N in bpe:N must be a positive integer");
  const std::string model = text + ".bpe" + std::to_string(pieces) + "-" +
                            content_hash(read_all(text, "data file")) + ".model";
  std::error_code ec;
  if (std::filesystem::exists(model, ec)) return model;
  train_bpe(text, pieces, model);
  *trained = true;
  return model;
}

std::string tokenize_cached(const std::string& text, const Tokenizer& tok, bool* reused) {
  refuse_tokens(text);
  // Refused whatever the text: which ids a text uses would otherwise decide it.
  check(tok.vocab() <= 65536, "tokenizer '", tok.model_file(), "' has ", tok.vocab(),
        " pieces, and an llm.c shard's uint16 tokens hold ids below 65536 only");
  const std::string bytes = read_all(text, "data file");
  const std::string bin =
      text + "." + content_hash(bytes, read_all(tok.model_file(), "tokenizer")) + ".bin";
  std::error_code ec;
  *reused = std::filesystem::exists(bin, ec);
  if (*reused) return bin;
  // The whole text at once: the tokenizer keeps newlines (as byte pieces), so decoding the
  // shard gives the text back.
  std::vector<uint16_t> tokens;
  for (int id : tok.encode(bytes)) {
    check(id >= 0 && id < 65536, "tokenizer: id ", id, " does not fit an llm.c shard's uint16");
    tokens.push_back(uint16_t(id));
  }
  // Per process: two runs tokenizing the same text write the same bytes, and either rename wins.
  const std::string tmp = bin + ".tmp." + std::to_string(::getpid());
  write_bin_shard(tmp, tokens);
  check(std::rename(tmp.c_str(), bin.c_str()) == 0, "cannot rename '", tmp, "' to '", bin, "'");
  return bin;
}

}  // namespace tetra::data
