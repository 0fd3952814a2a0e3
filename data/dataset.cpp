// The data sources (synthetic, llm.c .bin shards, a text file, JSONL documents) and the sampler
// that maps a step's batch positions to sequences (docs/design.md, "Sequence order").
#include "data/dataset.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "data/documents.hpp"
#include "data/hash.hpp"
#include "util/error.hpp"

namespace tetra::data {
namespace {

// ---------------------------------------------------------------------------------------
// Synthetic source: an order-1 Markov chain over A = min(vocab, 64) symbols. Each symbol
// has 4 distinct successors taken with probabilities 1/2, 1/4, 1/8, 1/8, so a model that
// has learned the table predicts every token (each has its predecessor in context) with
// cross-entropy exactly H(1/2, 1/4, 1/8, 1/8) = 1.75 ln 2 nats.

constexpr int kMaxAlphabet = 64;
constexpr int kSuccessors = 4;
// Domain tags keep the table's hashes apart from the sequences' hashes.
constexpr uint64_t kTableTag = 1;
constexpr uint64_t kSequenceTag = 2;
constexpr uint64_t kValidationTag = 3;  // validation sequences: the same chain, other draws

// Which successor (0..3) a uniform 64-bit word selects: the top 3 bits are 0..7, and
// 4 of the 8 values pick successor 0, 2 pick successor 1, one each pick 2 and 3.
int pick_successor(uint64_t h) {
  const int r = static_cast<int>(h >> 61);
  return r < 4 ? 0 : r < 6 ? 1 : r == 6 ? 2 : 3;
}

class Synthetic final : public Dataset {
 public:
  Synthetic(int vocab, int seq_len, uint64_t seed, uint64_t tag)
      : alphabet_(std::min(vocab, kMaxAlphabet)), seq_len_(seq_len), seed_(seed), tag_(tag) {
    check(vocab >= kSuccessors, "synthetic data needs `model.vocab` of at least ", kSuccessors,
          " (got ", vocab, "): each symbol has ", kSuccessors, " distinct successors");
    // Successors of a: the first 4 entries of a partial Fisher-Yates shuffle of 0..A-1,
    // driven by hash(seed, a, i), so they are distinct and depend only on the seed.
    successors_.resize(alphabet_);
    std::vector<int32_t> perm(alphabet_);
    for (int a = 0; a < alphabet_; ++a) {
      std::iota(perm.begin(), perm.end(), 0);
      for (int i = 0; i < kSuccessors; ++i) {
        const uint64_t h = hash_words({seed_, kTableTag, uint64_t(a), uint64_t(i)});
        const int j = i + static_cast<int>(h % uint64_t(alphabet_ - i));
        std::swap(perm[i], perm[j]);
        successors_[a][i] = perm[i];
      }
    }
  }

  int64_t num_sequences() const override { return std::numeric_limits<int64_t>::max(); }

  // Token 0 is uniform over the alphabet; token p is drawn from the successors of token
  // p-1 with hash(seed, k, p). No state is carried between sequences.
  void sequence(int64_t k, int32_t* out) const override {
    const uint64_t uk = static_cast<uint64_t>(k);
    int32_t cur = static_cast<int32_t>(hash_words({seed_, tag_, uk, 0}) % uint64_t(alphabet_));
    out[0] = cur;
    for (int p = 1; p <= seq_len_; ++p) {
      cur = successors_[cur][pick_successor(hash_words({seed_, tag_, uk, uint64_t(p)}))];
      out[p] = cur;
    }
  }

  void document_ids(int64_t, int32_t* out) const override {
    std::fill(out, out + seq_len_ + 1, 0);  // one stream
  }

  double entropy_floor() const override { return 1.75 * std::log(2.0); }

  std::string describe() const override {
    std::ostringstream os;
    os.setf(std::ios::fixed);
    os.precision(4);
    os << "synthetic: order-1 Markov chain over " << alphabet_ << " symbols, entropy floor "
       << entropy_floor() << " nats/token";
    return os.str();
  }

 private:
  int alphabet_;
  int seq_len_;
  uint64_t seed_, tag_;
  std::vector<std::array<int32_t, kSuccessors>> successors_;  // [A][4]
};

// ---------------------------------------------------------------------------------------
// File sources: all T tokens are held in memory (as uint32, which holds either shard width);
// sequence k is the slice [k*S, k*S+S].

class TokenFile final : public Dataset {
 public:
  // `kind` says what the tokens are ("text file", "llm.c shard", "JSONL documents (...)"),
  // `portion` which of them ("", " (training split)"); `end_of_text` ends each document (-1:
  // one stream).
  TokenFile(std::string path, std::string kind, std::string portion, std::vector<uint32_t> tokens,
            int seq_len, int end_of_text)
      : path_(std::move(path)),
        kind_(std::move(kind)),
        portion_(std::move(portion)),
        tokens_(std::move(tokens)),
        seq_len_(seq_len),
        count_((int64_t(tokens_.size()) - 1) / seq_len),
        end_of_text_(end_of_text) {
    check(count_ >= 1, "data '", path_, "'", portion_, " holds ", tokens_.size(),
          " tokens, fewer than one sequence of seq-len+1 = ", seq_len_ + 1);
  }

  int64_t num_sequences() const override { return count_; }

  void sequence(int64_t k, int32_t* out) const override {
    check(k >= 0 && k < count_, "data '", path_, "': sequence ", k, " is outside [0, ", count_,
          ")");
    const auto first = tokens_.begin() + k * seq_len_;
    std::copy(first, first + seq_len_ + 1, out);
  }

  void document_ids(int64_t k, int32_t* out) const override {
    sequence(k, out);  // a text or shards: no end-of-text token (-1) and one document
    int32_t doc = 0;
    for (int i = 0; i <= seq_len_; ++i) {
      const bool ends = out[i] == end_of_text_;
      out[i] = doc;
      if (ends) ++doc;
    }
  }

  std::string describe() const override {
    std::ostringstream os;
    os << kind_ << portion_ << " '" << path_ << "': " << tokens_.size() << " tokens, " << count_
       << " sequences of seq-len+1 = " << seq_len_ + 1;
    return os.str();
  }

 private:
  std::string path_;
  std::string kind_, portion_;
  std::vector<uint32_t> tokens_;
  int seq_len_;
  int64_t count_;  // K = floor((T-1)/S)
  int end_of_text_;
};

// A text file under the byte tokenizer: byte b is token b.
std::vector<uint32_t> read_text(const std::string& path) {
  const InputFile f = open_data_file(path);
  std::string bytes(size_t(f.size), '\0');
  read_exactly(f, bytes.data(), f.size, 0, path, "its bytes");
  std::vector<uint32_t> tokens(bytes.size());
  // Through unsigned char: char may be signed, and byte 0xC3 must become token 195.
  std::transform(bytes.begin(), bytes.end(), tokens.begin(),
                 [](char c) { return static_cast<uint32_t>(static_cast<unsigned char>(c)); });
  return tokens;
}

void check_vocab(const std::string& path, const std::vector<uint32_t>& tokens, int vocab) {
  const auto bad =
      std::find_if(tokens.begin(), tokens.end(), [&](uint32_t t) { return int64_t(t) >= vocab; });
  check(bad == tokens.end(), "data file '", path, "': token id ", bad == tokens.end() ? 0 : *bad,
        " at position ", bad - tokens.begin(), " is not below `model.vocab` ", vocab);
}

}  // namespace

std::unique_ptr<Dataset> open_dataset(const std::string& spec, int vocab, int seq_len,
                                      uint64_t seed, Portion portion, const Tokenizer* tokenizer,
                                      const DocumentOptions& documents) {
  check(vocab >= 1, "data: `model.vocab` must be positive (got ", vocab, ")");
  check(seq_len >= 1, "data: `model.seq_len` must be positive (got ", seq_len, ")");
  const bool validation = portion.kind == Portion::Validation;
  if (spec == "synthetic")
    return std::make_unique<Synthetic>(vocab, seq_len, seed,
                                       validation ? kValidationTag : kSequenceTag);
  // A directory or a glob names documents or shards, read one after another in sorted order.
  // A shard is known by its name or by its header's magic number, whatever the name says: a
  // shard named .txt would otherwise be read as text, header included.
  const std::vector<std::string> files = source_files(spec);
  const std::vector<std::string> each = files.empty() ? std::vector<std::string>{spec} : files;
  std::vector<uint32_t> tokens;
  std::string kind;
  int end_of_text = -1;
  if (is_documents(spec)) {
    const std::unique_ptr<Tokenizer> bytes = tokenizer ? nullptr : byte_tokenizer();
    const Tokenizer& tok = tokenizer ? *tokenizer : *bytes;
    int64_t count = 0;
    for (const std::string& f : document_files(spec)) {
      const CachedShard cached = tokenize_documents(f, tok, documents);
      const std::vector<uint32_t> part = read_bin_shard(cached.bin).tokens;
      tokens.insert(tokens.end(), part.begin(), part.end());
      count += cached.documents;
    }
    end_of_text = tok.end_of_text();
    kind = "JSONL documents (" + std::to_string(count) + " in " + std::to_string(each.size()) +
           (each.size() == 1 ? " file)" : " files)");
  } else if (!files.empty() || spec.ends_with(".bin") || is_bin_shard(spec)) {
    for (const std::string& f : each) {
      check(files.empty() || is_bin_shard(f), "data '", spec, "': '", f,
            "' is not an llm.c .bin shard (a directory or a glob takes shards or documents)");
      const std::vector<uint32_t> part = read_bin_shard(f).tokens;
      tokens.insert(tokens.end(), part.begin(), part.end());
    }
    kind = files.size() > 1 ? std::to_string(files.size()) + " llm.c shards" : "llm.c shard";
  } else {
    tokens = read_text(spec);
    kind = "text file";
  }
  check_vocab(spec, tokens, vocab);
  std::string part;
  if (portion.kind != Portion::All) {
    // The first 1-F of the tokens train, the last F validate.
    const auto cut = tokens.begin() + int64_t(double(tokens.size()) * (1.0 - portion.fraction));
    tokens = validation ? std::vector<uint32_t>(cut, tokens.end())
                        : std::vector<uint32_t>(tokens.begin(), cut);
    part = validation ? " (validation split)" : " (training split)";
  }
  return std::make_unique<TokenFile>(spec, kind, part, std::move(tokens), seq_len, end_of_text);
}

void fill_batch(const Dataset& ds, int64_t step, int global_batch, int first, int count,
                int seq_len, int32_t* out, int32_t* docs) {
  check(step >= 0 && first >= 0 && count >= 0 && first + count <= global_batch,
        "fill_batch: positions [", first, ", ", first + count, ") of step ", step,
        " do not fit in a global batch of ", global_batch);
  const int64_t num = ds.num_sequences();
  for (int j = first; j < first + count; ++j) {
    // step*G + j stays far below 2^63 for any real run, also for the synthetic source
    // whose K is INT64_MAX.
    const int64_t k = (step * global_batch + j) % num;
    const int64_t at = int64_t(j - first) * (seq_len + 1);
    ds.sequence(k, out + at);
    if (docs) ds.document_ids(k, docs + at);
  }
}

}  // namespace tetra::data
