#include "train/generate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

#include "checkpoint/hf_io.hpp"
#include "data/tokenizer.hpp"
#include "util/error.hpp"
#include "transformer/block.hpp"

namespace tetra {

Generator::Generator(Backend& be, const ModelConfig& cfg,
                     const std::map<std::string, std::vector<float>>& weights)
    : be_(be), cfg_(cfg), units_(make_units(cfg, 1, 0)) {
  for (const UnitLayout& u : units_) {
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

Tensor Generator::param(const std::string& name) const {
  for (size_t u = 0; u < units_.size(); ++u)
    for (const ParamInfo& p : units_[u].params)
      if (p.name == name) return param_view(weights_[u].flat(), p);
  fail("generate: no tensor '", name, "'");
}

std::vector<float> Generator::forward(const std::vector<int>& tokens, int64_t p0) {
  const int64_t n = int64_t(tokens.size()), d = cfg_.dim, hd = cfg_.head_dim();
  const int H = cfg_.heads, KV = cfg_.kv_heads;
  const int64_t qw = H * hd, kw = KV * hd, F = cfg_.ffn_dim, keys = p0 + n;
  const Tensor pos = positions_.flat(p0, n), key_pos = positions_.flat(0, keys);
  Buffer ids(be_, n, DType::I32);
  be_.upload(ids.flat(), tokens.data());
  // x [n, d]: the residual stream of the new tokens.
  Buffer x(be_, n * d), nrm(be_, n * d), rstd(be_, n), q(be_, n * qw), attn(be_, n * qw),
      lse(be_, H * n), h(be_, n * d), gate(be_, n * F), up(be_, n * F), act(be_, n * F);
  be_.embedding_forward(x.view({n, d}), ids.flat(), param("model.embed_tokens.weight"), 0);
  for (int l = 0; l < cfg_.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    be_.rmsnorm_forward(nrm.view({n, d}), rstd.flat(), x.view({n, d}),
                        param(p + "input_layernorm.weight"), cfg_.norm_eps);
    // q [n, qw]; k, v [n, kw] written straight into the cache rows p0 .. p0+n-1.
    const Tensor k = k_cache_[l].view({max_len_, kw}).rows_view(p0, n);
    const Tensor v = v_cache_[l].view({max_len_, kw}).rows_view(p0, n);
    be_.matmul(q.view({n, qw}), nrm.view({n, d}), false, param(p + "self_attn.q_proj.weight"),
               true);
    be_.matmul(k, nrm.view({n, d}), false, param(p + "self_attn.k_proj.weight"), true);
    be_.matmul(v, nrm.view({n, d}), false, param(p + "self_attn.v_proj.weight"), true);
    be_.rope(q.view({n, qw}), H, pos, cfg_.rope_theta, false);
    be_.rope(k, KV, pos, cfg_.rope_theta, false);
    // The new queries against every cached key, masked by position.
    be_.attention_forward(attn.view({n, qw}), lse.flat(), q.view({n, qw}),
                          k_cache_[l].view({max_len_, kw}).rows_view(0, keys),
                          v_cache_[l].view({max_len_, kw}).rows_view(0, keys), pos, key_pos,
                          AttnShape{1, n, keys, H, KV, int(hd)});
    // h = x + attn Wo^T; x = h + down(silu(gate(n2)) * up(n2)).
    be_.matmul(h.view({n, d}), attn.view({n, qw}), false, param(p + "self_attn.o_proj.weight"),
               true);
    be_.add(h.view({n, d}), x.view({n, d}));
    be_.rmsnorm_forward(nrm.view({n, d}), rstd.flat(), h.view({n, d}),
                        param(p + "post_attention_layernorm.weight"), cfg_.norm_eps);
    be_.matmul(gate.view({n, F}), nrm.view({n, d}), false, param(p + "mlp.gate_proj.weight"), true);
    be_.matmul(up.view({n, F}), nrm.view({n, d}), false, param(p + "mlp.up_proj.weight"), true);
    be_.swiglu_forward(act.view({n, F}), gate.view({n, F}), up.view({n, F}));
    be_.matmul(x.view({n, d}), act.view({n, F}), false, param(p + "mlp.down_proj.weight"), true);
    be_.add(x.view({n, d}), h.view({n, d}));
  }
  // The last token's logits [1, vocab] = rmsnorm(x_last) W_head^T.
  Buffer last(be_, d), logits(be_, cfg_.vocab), r1(be_, 1);
  be_.rmsnorm_forward(last.view({1, d}), r1.flat(), x.view({n, d}).rows_view(n - 1, 1),
                      param("model.norm.weight"), cfg_.norm_eps);
  be_.matmul(logits.view({1, cfg_.vocab}), last.view({1, d}), false, param("lm_head.weight"), true);
  std::vector<float> out(cfg_.vocab);
  be_.download(out.data(), logits.flat());
  out.resize(cfg_.real_vocab());  // the padding rows are not tokens
  // Finite weights can still overflow: no token can be drawn from logits that are not finite.
  const auto bad = std::find_if(out.begin(), out.end(), [](float x) { return !std::isfinite(x); });
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
    check(t >= 0 && t < cfg_.real_vocab(), "generate: prompt token ", t, " is outside the ",
          cfg_.real_vocab(), "-token vocabulary");
  max_len_ = int64_t(prompt.size()) + o.tokens;
  // The cache holds every position; positions are bounded as a training sequence's are.
  check(max_len_ <= kMaxSeqLen, "--tokens ", o.tokens, " after a prompt of ", prompt.size(),
        " tokens is ", max_len_, " positions, more than tetra's limit of ", kMaxSeqLen);
  const int64_t kw = int64_t(cfg_.kv_heads) * cfg_.head_dim();
  k_cache_.clear();
  v_cache_.clear();
  for (int l = 0; l < cfg_.layers; ++l) {
    k_cache_.emplace_back(be_, max_len_ * kw);
    v_cache_.emplace_back(be_, max_len_ * kw);
  }
  std::vector<int32_t> pos(max_len_);
  std::iota(pos.begin(), pos.end(), 0);
  positions_ = Buffer(be_, max_len_, DType::I32);
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

std::string printable(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

}  // namespace tetra
