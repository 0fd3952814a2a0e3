#include "data/token_cache.hpp"

#include <cstdio>
#include <filesystem>

#include "data/shard.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"
#include "util/output_file.hpp"

namespace tetra::data {
namespace {

std::string read_all(const std::string& path, const std::string& what) {
  std::string bytes;
  const std::string problem = read_input_file(path, bytes);
  check(problem.empty(), what, " '", path, "': ", problem);
  return bytes;
}

// FNV-1a over bytes: names a cache entry by its inputs' content, and checks it on reuse.
uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  for (size_t i = 0; i < n; ++i)
    h = (h ^ static_cast<const unsigned char*>(data)[i]) * 0x100000001b3ull;
  return h;
}

std::string hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// The name's hash: the text's bytes, then the tokenizer's.
std::string content_hash(const std::string& a, const std::string& b = "") {
  return hex(fnv1a(b.data(), b.size(), fnv1a(a.data(), a.size())));
}

void refuse_tokens(const std::string& text) {
  const bool bin = text.ends_with(".bin") || is_bin_shard(text);
  check(!bin, "`data.tokenizer` applies to text, and '", text,
        "' is an llm.c .bin shard, tokens already (give its `model.vocab` instead)");
}

// What a cached shard was made from, kept in its header's free words 3..16 (little-endian
// halves of 64-bit values): a tag, the source's size and hash, the recipe's (tokenizer's) hash,
// the hash of the tokens themselves, so that a shard cut short or edited is caught too, and
// for documents their count and the lines skipped (0 in a shard of a text, and in one made
// before documents were: the words were 0 there).
constexpr int32_t kCacheTag = 0x54545443;  // "CTTT": tetra's token cache, record version 1
struct Origin {
  uint64_t text_bytes = 0, text_hash = 0, tokenizer_hash = 0, tokens_hash = 0;
  uint64_t documents = 0, skipped = 0;

  std::vector<int32_t> words() const {
    std::vector<int32_t> w = {kCacheTag};
    for (uint64_t v : {text_bytes, text_hash, tokenizer_hash, tokens_hash, documents, skipped}) {
      w.push_back(int32_t(uint32_t(v)));
      w.push_back(int32_t(uint32_t(v >> 32)));
    }
    return w;
  }
  static Origin of(const BinShard& s) {
    const auto u64 = [&](int i) {
      return uint64_t(uint32_t(s.header[i])) | uint64_t(uint32_t(s.header[i + 1])) << 32;
    };
    return {u64(4), u64(6), u64(8), u64(10), u64(12), u64(14)};
  }
};

// The hash of the tokens as the shard stores them (so a uint16 shard's is what it always was).
uint64_t tokens_hash(const std::vector<uint32_t>& tokens, TokenWidth width) {
  const std::string bytes = shard_bytes(tokens, width);
  return fnv1a(bytes.data(), bytes.size());
}

// Why the cached shard at `bin` is not the tokens of (text, tokenizer); "" when it is, and then
// `had` is its record. Throws tetra::Error when it cannot be read at all (not a regular file, an
// I/O error).
std::string mismatch(const std::string& bin, const Origin& want, Origin& had) {
  const InputFile f = open_input_file(bin);
  check(f.fd >= 0, "the token cache '", bin, "' cannot be read: ", f.problem,
        "; it is a cache tetra made, which may be deleted (the text is then tokenized again)");
  BinShard shard;
  try {
    shard = read_bin_shard(bin);
  } catch (const Error& e) {
    return std::string("is not a whole shard (") + e.what() + ")";
  }
  if (shard.header[3] != kCacheTag) return "records nothing of what it was made from";
  had = Origin::of(shard);
  if (had.text_bytes != want.text_bytes || had.text_hash != want.text_hash)
    return "was made from another text";
  if (had.tokenizer_hash != want.tokenizer_hash) return "was made with another tokenizer";
  if (had.tokens_hash != tokens_hash(shard.tokens, shard.width))
    return "holds tokens that were changed since";
  return "";
}

}  // namespace

TokenizerModel tokenizer_model(const std::string& spec, const std::string& text) {
  if (spec.rfind("bpe:", 0) != 0) return {spec, ""};
  refuse_tokens(text);
  int pieces = 0;
  try {
    size_t used = 0;
    pieces = std::stoi(spec.substr(4), &used);
    check(used == spec.size() - 4, "");
  } catch (...) {
    pieces = 0;
  }
  check(pieces > 0, "`data.tokenizer` ", spec, ": N in bpe:N must be a positive integer");
  TokenizerModel m;
  m.path = text + ".bpe" + std::to_string(pieces) + "-" +
           content_hash(read_all(text, "data file")) + ".model";
  std::error_code ec;
  if (!std::filesystem::exists(m.path, ec)) m.trained = train_bpe(text, pieces);
  return m;
}

std::unique_ptr<Tokenizer> load_tokenizer_model(const TokenizerModel& m) {
  return m.trained.empty() ? load_tokenizer(m.path) : load_sentencepiece(m.path, m.trained);
}

void save_tokenizer_model(const TokenizerModel& m) {
  if (m.trained.empty()) return;
  // A fresh temporary per call: two runs training on the same text write the same bytes.
  const std::string problem = replace_file(m.path, m.trained);
  check(problem.empty(), "cannot write the tokenizer model '", m.path, "': ", problem);
}

CachedShard cached_tokens(const std::string& source, const std::string& recipe,
                          const std::function<Made(const std::string& bytes)>& make) {
  const std::string bytes = read_all(source, "data file");
  Origin origin{bytes.size(), fnv1a(bytes.data(), bytes.size()),
                fnv1a(recipe.data(), recipe.size())};
  CachedShard out;
  out.bin = source + "." + content_hash(bytes, recipe) + ".bin";
  std::error_code ec;
  if (std::filesystem::symlink_status(out.bin, ec).type() !=
      std::filesystem::file_type::not_found) {
    Origin had;
    out.rebuilt = mismatch(out.bin, origin, had);
    out.reused = out.rebuilt.empty();
    if (out.reused) {
      out.documents = int64_t(had.documents);
      out.skipped = int64_t(had.skipped);
      return out;
    }
  }
  Made made = make(bytes);
  origin.tokens_hash = tokens_hash(made.tokens, made.width);
  origin.documents = uint64_t(made.documents);
  origin.skipped = uint64_t(made.skipped);
  out.documents = made.documents;
  out.skipped = made.skipped;
  out.first_skipped = made.first_skipped;
  // Through a fresh temporary: two runs tokenizing the same text write the same bytes, and
  // either rename wins.
  write_bin_shard(out.bin, made.tokens, made.width, origin.words());
  return out;
}

CachedShard tokenize_cached(const std::string& text, const Tokenizer& tok) {
  refuse_tokens(text);
  // The whole text at once: the tokenizer keeps newlines (as byte pieces), so decoding the
  // shard gives the text back.
  return cached_tokens(text, read_all(tok.model_file(), "tokenizer"),
                       [&](const std::string& bytes) {
                         Made made;
                         made.width = token_width(tok.vocab());
                         std::vector<int> ids;
                         try {
                           ids = tok.encode(bytes);
                         } catch (const Error& e) {
                           fail("data file '", text, "': ", e.what());
                         }
                         made.tokens.assign(ids.begin(), ids.end());
                         return made;
                       });
}

}  // namespace tetra::data
