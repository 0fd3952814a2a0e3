#include "data/bpe.hpp"

#include <cstdio>
#include <queue>

#include "data/utf8.hpp"
#include "util/error.hpp"

namespace tetra::data {
namespace {

// The most ids a vocabulary may hold: tetra's vocabulary limit.
constexpr int64_t kMaxVocab = int64_t(1) << 24;
// Pre-tokens remembered; past this, new ones are merged without being kept (as the reference's
// bounded cache does).
constexpr size_t kCacheEntries = 100000;

uint64_t pair_key(int a, int b) {
  return uint64_t(uint32_t(a)) << 32 | uint32_t(b);
}

// A merge candidate: the pair starting at symbol `pos`, merging into `id`. The heap pops the
// lowest rank first, and of equal ranks the leftmost.
struct Candidate {
  int pos, rank, id;
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

// One symbol of a word being merged: its id and its neighbours in the list (-1: none); a
// symbol merged into its left neighbour is marked dead.
struct Symbol {
  int id, prev, next;
  bool dead = false;
};

}  // namespace

Bpe::Bpe(const json& model, const std::string& where) : where_(where) {
  const auto field = [&](const char* name) -> const json& {
    static const json null;
    return model.contains(name) ? model[name] : null;
  };
  check(model.is_object(), where, ": model is not an object");
  const json& type = field("type");
  check(type.is_null() || type == "BPE", where, ": model type '",
        type.is_string() ? type.get<std::string>() : type.dump(),
        "' is not supported (tetra reads BPE)");
  const json& dropout = field("dropout");
  check(dropout.is_null() || (dropout.is_number() && dropout.get<double>() == 0), where,
        ": model.dropout ", dropout.dump(), " is not supported (it makes encoding random)");
  for (const char* name : {"continuing_subword_prefix", "end_of_word_suffix"})
    check(field(name).is_null(), where, ": model.", name, " ", field(name).dump(),
          " is not supported");
  const auto flag = [&](const char* name) {
    const json& v = field(name);
    check(v.is_null() || v.is_boolean(), where, ": model.", name, " is ", v.dump(),
          ", not true or false");
    return v.is_boolean() && v.get<bool>();
  };
  fuse_unk_ = flag("fuse_unk");
  byte_fallback_ = flag("byte_fallback");
  ignore_merges_ = flag("ignore_merges");
  const json& unk = field("unk_token");
  check(unk.is_null() || unk.is_string(), where, ": model.unk_token is ", unk.dump(),
        ", not a string");
  if (unk.is_string()) unk_token_ = unk.get<std::string>();

  const json& vocab = field("vocab");
  check(vocab.is_object(), where, ": model.vocab is not an object of token: id");
  for (const auto& [token, v] : vocab.items()) {
    const std::optional<int64_t> id = json_int(v);
    check(id && *id >= 0 && *id < kMaxVocab, where, ": model.vocab gives '", token, "' the id ",
          v.dump(), ", not an integer in [0, ", kMaxVocab, ")");
    if (*id >= int64_t(tokens_.size())) {
      tokens_.resize(size_t(*id) + 1);
      has_token_.resize(size_t(*id) + 1);
    }
    check(!has_token_[*id], where, ": model.vocab gives the id ", *id, " to both '", tokens_[*id],
          "' and '", token, "'");
    tokens_[*id] = token;
    has_token_[*id] = true;
    vocab_[token] = int(*id);
  }

  const json& merges = field("merges");
  check(merges.is_array(), where, ": model.merges is not a list");
  int rank = 0;
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string at = "model.merges[" + std::to_string(i) + "]";
    std::string a, b;
    if (m.is_string()) {  // "a b"; a "#version" line is a comment
      const std::string s = m.get<std::string>();
      if (s.rfind("#version", 0) == 0) continue;
      const size_t space = s.find(' ');
      check(space != std::string::npos && s.find(' ', space + 1) == std::string::npos, where, ": ",
            at, " is \"", s, "\", not two tokens separated by one space");
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else {
      check(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), where, ": ", at,
            " is ", m.dump(), ", neither \"a b\" nor [\"a\", \"b\"]");
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    }
    for (const std::string& token : {a, b, a + b})
      check(vocab_.count(token), where, ": ", at, " needs the token '", token,
            "', which is not in model.vocab");
    // A pair given twice keeps its last rank, as the reference's map does.
    merges_[pair_key(vocab_.at(a), vocab_.at(b))] = {rank++, vocab_.at(a + b)};
  }
}

int Bpe::id(const std::string& token) const {
  const auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* Bpe::token(int id) const {
  return id >= 0 && id < size() && has_token_[id] ? &tokens_[id] : nullptr;
}

void Bpe::tokenize(const std::string& word, std::vector<int>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {  // a word in the vocabulary is its own token, whatever the merges say
    const int whole = id(word);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  {
    const std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto hit = cache_.find(word);
    if (hit != cache_.end()) {
      out.insert(out.end(), hit->second.begin(), hit->second.end());
      return;
    }
  }
  std::vector<int> ids = merge_word(word);
  out.insert(out.end(), ids.begin(), ids.end());
  const std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() < kCacheEntries) cache_.emplace(word, std::move(ids));
}

std::vector<int> Bpe::merge_word(const std::string& word) const {
  // The characters as symbols. A character outside the vocabulary becomes its bytes' <0xXX>
  // tokens (byte_fallback, when all are there), else the unknown token (consecutive ones fused
  // under fuse_unk), else nothing: the reference drops it, and so does tetra.
  std::vector<Symbol> symbols;
  int unk = -1;  // a pending unknown token, added before the next known symbol
  const auto add = [&](int id) {
    const int n = int(symbols.size());
    symbols.push_back({id, n - 1, -1});
    if (n > 0) symbols[n - 1].next = n;
  };
  for (size_t i = 0; i < word.size();) {
    const size_t n = utf8_length(static_cast<unsigned char>(word[i]));
    const std::string ch = word.substr(i, n);
    i += n;
    const int known = id(ch);
    if (known >= 0) {
      if (unk >= 0) add(unk);
      unk = -1;
      add(known);
      continue;
    }
    if (byte_fallback_) {
      std::vector<int> bytes;
      for (const char c : ch) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", static_cast<unsigned char>(c));
        if (id(name) >= 0) bytes.push_back(id(name));
      }
      if (bytes.size() == ch.size()) {  // as the reference, a pending unknown waits on
        for (const int b : bytes) add(b);
        continue;
      }
    }
    if (unk_token_.empty()) continue;
    const int unk_id = id(unk_token_);
    check(unk_id >= 0, where_, ": model.unk_token '", unk_token_,
          "' is needed for a character outside the vocabulary, and is not in model.vocab");
    if (unk >= 0 && !fuse_unk_) add(unk);
    unk = unk_id;
  }
  if (unk >= 0) add(unk);

  std::priority_queue<Candidate> heap;
  const auto offer = [&](int pos) {  // the pair starting at symbol pos, if it merges
    const int next = symbols[pos].next;
    if (next < 0) return;
    const auto m = merges_.find(pair_key(symbols[pos].id, symbols[next].id));
    if (m != merges_.end()) heap.push({pos, m->second.first, m->second.second});
  };
  for (int pos = 0; pos + 1 < int(symbols.size()); ++pos) offer(pos);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[top.pos];
    if (left.dead || left.next < 0) continue;
    // A candidate is stale when either side changed since it was offered.
    const auto m = merges_.find(pair_key(left.id, symbols[left.next].id));
    if (m == merges_.end() || m->second.second != top.id) continue;
    Symbol& right = symbols[left.next];
    left.id = top.id;
    right.dead = true;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) offer(left.prev);
    offer(top.pos);
  }
  std::vector<int> ids;
  for (const Symbol& s : symbols)
    if (!s.dead) ids.push_back(s.id);
  return ids;
}

}  // namespace tetra::data
