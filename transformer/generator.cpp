#include "transformer/generator.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>

#include "parallel/mpi_comm.hpp"
#include "transformer/ends.hpp"
#include "util/error.hpp"

namespace tetra {

Generator::Generator(Backend& be, const ModelConfig& cfg,
                     const std::map<std::string, std::vector<float>>& weights)
    : be_(be),
      cfg_(cfg),
      units_(make_units(cfg, 1, 0)),
      self_(make_mpi_comm(MPI_COMM_SELF, "generate")) {
  self_->bind_backend(&be_);
  for (const UnitSpec& u : units_) {
    std::vector<float> flat(u.numel);
    for (const ParamInfo& p : u.params) {
      const auto it = weights.find(p.name);
      check(it != weights.end() && int64_t(it->second.size()) == p.numel(), "generate: tensor '",
            p.name, "' is missing or has the wrong size");
      std::copy(it->second.begin(), it->second.end(), flat.begin() + p.offset);
    }
    weights_.emplace_back(be_, u.numel);
    be_.upload(weights_.back().flat(), flat.data());
  }
}

std::vector<float> Generator::forward(const std::vector<int>& tokens, int64_t p0) {
  const int64_t n = int64_t(tokens.size()), d = cfg_.dim;
  // The new tokens are one sequence of n at positions p0 .. p0+n-1 (RoPE and the queries);
  // the keys are every position so far.
  TokenPositions pos;
  pos.batch = 1;
  pos.seq = n;
  pos.token_pos = pos.seq_pos = positions_.flat(p0, n);
  pos.key_pos = positions_.flat(0, p0 + n);
  const TensorParallel tp{*self_};
  const ContextParallel cp{*self_};
  Buffer ids(be_, n, DType::I32);
  be_.upload(ids.flat(), tokens.data());
  Buffer x;  // [n, d]: the residual stream of the new tokens
  std::vector<float> out;
  for (size_t i = 0; i < units_.size(); ++i) {
    const UnitSpec& u = units_[i];
    const Tensor w = weights_[i].flat();
    if (u.kind == UnitSpec::Kind::Embedding) {
      x = embed_forward(be_, tp, u, w, ids.flat());
    } else if (u.kind == UnitSpec::Kind::Block) {
      const BlockContext ctx{be_, tp, cp, cfg_, pos, &caches_[u.layer]};
      BlockActs acts;  // what a backward would read; dropped
      Buffer y(be_, n * d);
      block_forward(ctx, u, w, x.view({n, d}), y.view({n, d}), acts);
      x = std::move(y);
    } else {
      // The last token's logits [1, rows]; the padding rows are not tokens. The head's matrix:
      // its own, or under tied embeddings the embedding's table (unit 0).
      const Tensor w_head =
          cfg_.tie_embeddings ? head_matrix(units_[0], weights_[0].flat()) : head_matrix(u, w);
      const Buffer logits = head_last_row(be_, tp, cfg_, u, w, w_head, x.view({n, d}));
      out.resize(cfg_.rows());
      be_.download(out.data(), logits.flat());
      out.resize(cfg_.vocab);
    }
  }
  // Finite weights can still overflow: no token can be drawn from logits that are not finite.
  const auto bad = std::find_if(out.begin(), out.end(), [](float v) { return !std::isfinite(v); });
  if (bad != out.end())
    throw DivergedError("the model's forward at position " + std::to_string(p0 + n - 1) +
                        " gives logits that are not finite (token " +
                        std::to_string(bad - out.begin()) +
                        "): its weights overflow float arithmetic");
  return out;
}

namespace {

// The next token from logits: the arg max at temperature 0, else a draw from
// softmax(logits / T) over the top k (all when k is 0).
int pick(const std::vector<float>& logits, const SampleOptions& o, std::mt19937_64& rng) {
  const int V = int(logits.size());
  if (o.temperature <= 0)
    return int(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  const int k = o.top_k > 0 ? std::min(o.top_k, V) : V;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<double> p(k);
  for (int i = 0; i < k; ++i)
    p[i] = std::exp((logits[order[i]] - logits[order[0]]) / o.temperature);
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  // A uniform draw from the 53 top bits, so that the same seed picks the same token anywhere.
  double u = double(rng() >> 11) * 0x1.0p-53 * total;
  for (int i = 0; i < k; ++i) {
    if (u < p[i]) return order[i];
    u -= p[i];
  }
  return order[k - 1];
}

}  // namespace

std::vector<int> Generator::generate(const std::vector<int>& prompt, const SampleOptions& o) {
  check(!prompt.empty(), "generate: the prompt has no tokens");
  for (int t : prompt)
    check(t >= 0 && t < cfg_.vocab, "generate: prompt token ", t, " is outside the ", cfg_.vocab,
          "-token vocabulary");
  const int64_t max_len = int64_t(prompt.size()) + o.tokens;
  // The cache holds every position; positions are bounded as a training sequence's are.
  check(max_len <= kMaxSeqLen, "--tokens ", o.tokens, " after a prompt of ", prompt.size(),
        " tokens is ", max_len, " positions, more than tetra's limit of ", kMaxSeqLen);
  const int64_t kw = int64_t(cfg_.kv_heads) * cfg_.head_dim();
  caches_.clear();
  for (int l = 0; l < cfg_.layers; ++l)
    caches_.push_back(KvCache{Buffer(be_, max_len * kw), Buffer(be_, max_len * kw), 0});
  std::vector<int32_t> pos(max_len);
  std::iota(pos.begin(), pos.end(), 0);
  positions_ = Buffer(be_, max_len, DType::I32);
  be_.upload(positions_.flat(), pos.data());

  std::mt19937_64 rng(o.seed);
  std::vector<int> out;
  std::vector<float> logits = forward(prompt, 0);
  for (int i = 0; i < o.tokens; ++i) {
    out.push_back(pick(logits, o, rng));
    if (i + 1 < o.tokens) logits = forward({out.back()}, int64_t(prompt.size()) + i);
  }
  return out;
}

}  // namespace tetra
