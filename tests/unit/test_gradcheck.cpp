// Gradient checks of the fp32 CPU backend and the layer code. Every analytic gradient is
// compared with central finite differences of an independent double-precision reference
// forward written below with plain loops (the math of docs/design.md's conventions): op by op
// (embedding, RMSNorm, RoPE, grouped-query causal attention, SwiGLU, vocab-parallel cross-entropy)
// and for a whole tiny model run through ZeroParams + ModelChunk exactly as the trainer runs it.
// Inputs and weights are random with O(1) activations (not the 0.02 init, whose gradients are
// tiny).
//
// Error measure (check_grad): with g the fp32 analytic gradient and f the double central
// difference (step 1e-5), every entry of every checked tensor must satisfy
//   |g_i - f_i| <= 1e-3 * max(|f_i|, rms(f)) + 1e-8,
// rms(f) being the root mean square of f over that tensor. fp32 rounding uses under 1/500
// of this budget, while a wrong sign, a transposition, a causal mask off by one or a wrong
// KV head exceeds it by orders of magnitude.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/backend.hpp"
#include "backend/fusions.hpp"
#include "model/config.hpp"
#include "parallel/mpi_comm.hpp"
#include "parallel/tp.hpp"
#include "parallel/zero.hpp"
#include "transformer/chunk.hpp"

using namespace tetra;

namespace {

using Vec = std::vector<double>;
using Floats = std::vector<float>;
using I32 = std::vector<int32_t>;

// ---- Double-precision reference ops: row-major, token-major [T, width] like the backend. ----

// y [T, out] = x [T, in] W^T, W [out, in].
Vec ref_linear(const Vec& x, const Vec& W, int64_t T, int64_t in, int64_t out) {
  Vec y(T * out, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) y[t * out + o] += x[t * in + i] * W[o * in + i];
  return y;
}

// y [T, d] = x / sqrt(mean_row(x^2) + 1e-5) * w, w [d].
Vec ref_rmsnorm(const Vec& x, const Vec& w, int64_t T, int64_t d) {
  Vec y(T * d);
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += x[t * d + i] * x[t * d + i];
    const double r = 1.0 / std::sqrt(ss / double(d) + 1e-5);
    for (int64_t i = 0; i < d; ++i) y[t * d + i] = x[t * d + i] * r * w[i];
  }
  return y;
}

// Rotate-half RoPE of x [T, H*hd] at positions pos [T]: for i < hd/2 and angle a =
// pos * rope.inv_freq(i, hd) (theta^(-2i/hd), or Llama 3's scaling of it: test_backend_ops holds
// the frequencies to transformers'), (x_i, x_{i+hd/2}) -> (x_i cos a - x_{i+hd/2} sin a,
// x_{i+hd/2} cos a + x_i sin a), in every head.
Vec ref_rope(Vec x, const I32& pos, int64_t H, int64_t hd, const Rope& rope) {
  const int64_t half = hd / 2;
  for (size_t t = 0; t < pos.size(); ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const double a = pos[t] * rope.inv_freq(i, hd);
        double* xh = &x[(t * H + h) * hd];
        const double x1 = xh[i], x2 = xh[i + half];
        xh[i] = x1 * std::cos(a) - x2 * std::sin(a);
        xh[i + half] = x2 * std::cos(a) + x1 * std::sin(a);
      }
  return x;
}

// The fused projection's qkv [T, (H + 2 KV) hd] (columns q | k | v) with its q and k columns
// rotated (ref_rope: they are H + KV adjacent heads) and its v columns as they are.
Vec ref_rope_qkv(const Vec& x, const I32& pos, int64_t H, int64_t KV, int64_t hd,
                 const Rope& rope) {
  const int64_t T = int64_t(pos.size()), W = (H + 2 * KV) * hd, qk = (H + KV) * hd;
  Vec rows;  // [T, qk]
  for (int64_t t = 0; t < T; ++t) rows.insert(rows.end(), &x[t * W], &x[t * W + qk]);
  rows = ref_rope(rows, pos, H + KV, hd, rope);
  Vec y = x;
  for (int64_t t = 0; t < T; ++t) std::copy_n(&rows[t * qk], qk, &y[t * W]);
  return y;
}

// Grouped-query causal attention over B sequences. q [B*Sq, H*hd], k, v [B*Sk, KV*hd] with
// Sq = qpos.size(), Sk = kpos.size(); query i (global position qpos[i]) sees key j when
// kpos[j] <= qpos[i] and, given documents qdoc [B*Sq] and kdoc [B*Sk], when both are of one
// document; query head h reads KV head h / (H/KV); scale 1/sqrt(hd). -> [B*Sq, H*hd].
Vec ref_attention(const Vec& q, const Vec& k, const Vec& v, const I32& qpos, const I32& kpos,
                  int64_t B, int64_t H, int64_t KV, int64_t hd, const I32& qdoc = {},
                  const I32& kdoc = {}) {
  const int64_t Sq = int64_t(qpos.size()), Sk = int64_t(kpos.size());
  Vec out(B * Sq * H * hd, 0.0), p(Sk);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / KV);
      for (int64_t i = 0; i < Sq; ++i) {
        const double* qi = &q[((b * Sq + i) * H + h) * hd];
        const auto masked = [&](int64_t j) {
          return kpos[j] > qpos[i] || (!qdoc.empty() && qdoc[b * Sq + i] != kdoc[b * Sk + j]);
        };
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < Sk; ++j) {
          if (masked(j)) continue;
          double s = 0;
          for (int64_t c = 0; c < hd; ++c) s += qi[c] * k[((b * Sk + j) * KV + g) * hd + c];
          p[j] = s / std::sqrt(double(hd));
          mx = std::max(mx, p[j]);
        }
        for (int64_t j = 0; j < Sk; ++j) {
          p[j] = masked(j) ? 0.0 : std::exp(p[j] - mx);
          sum += p[j];
        }
        double* o = &out[((b * Sq + i) * H + h) * hd];
        for (int64_t j = 0; j < Sk; ++j)
          for (int64_t c = 0; c < hd; ++c) o[c] += p[j] / sum * v[((b * Sk + j) * KV + g) * hd + c];
      }
    }
  return out;
}

// h = silu(g) * u, elementwise.
Vec ref_swiglu(const Vec& g, const Vec& u) {
  Vec h(g.size());
  for (size_t i = 0; i < g.size(); ++i) h[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return h;
}

// Sum over rows t of logsumexp(logits[t, :]) - logits[t, target[t]]; logits [T, V].
// Rows of V logits of which the first `valid` are tokens (all of them when valid < 0).
double ref_ce_sum(const Vec& logits, const I32& targets, int64_t V, int64_t valid = -1) {
  if (valid < 0) valid = V;
  double loss = 0;
  for (size_t t = 0; t < targets.size(); ++t) {
    const double* l = &logits[t * V];
    const double mx = *std::max_element(l, l + valid);
    double s = 0;
    for (int64_t j = 0; j < valid; ++j) s += std::exp(l[j] - mx);
    loss += mx + std::log(s) - l[targets[t]];
  }
  return loss;
}

double dot(const Vec& a, const Vec& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

// Mean cross-entropy of the whole model over B sequences of cfg.seq_len tokens (tokens,
// targets [B*S]) at positions 0..S-1; P maps Hugging Face tensor names to weights.
double ref_model_loss(const ModelConfig& c, const std::map<std::string, Vec>& P, const I32& tokens,
                      const I32& targets, int64_t B) {
  const int64_t S = c.seq_len, T = B * S, d = c.dim, hd = c.head_dim(), H = c.heads,
                KV = c.kv_heads, F = c.ffn_dim, V = c.vocab;
  I32 seq(S), tok_pos(T);
  std::iota(seq.begin(), seq.end(), 0);
  for (int64_t t = 0; t < T; ++t) tok_pos[t] = int32_t(t % S);
  const Vec& E = P.at("model.embed_tokens.weight");
  Vec x(T * d);
  for (int64_t t = 0; t < T; ++t) std::copy_n(&E[tokens[t] * d], d, &x[t * d]);
  for (int l = 0; l < c.layers; ++l) {
    auto W = [&](const std::string& n) -> const Vec& {
      return P.at("model.layers." + std::to_string(l) + "." + n + ".weight");
    };
    const Vec n1 = ref_rmsnorm(x, W("input_layernorm"), T, d);
    const Vec q =
        ref_rope(ref_linear(n1, W("self_attn.q_proj"), T, d, H * hd), tok_pos, H, hd, c.rope());
    const Vec k =
        ref_rope(ref_linear(n1, W("self_attn.k_proj"), T, d, KV * hd), tok_pos, KV, hd, c.rope());
    const Vec v = ref_linear(n1, W("self_attn.v_proj"), T, d, KV * hd);
    const Vec a = ref_attention(q, k, v, seq, seq, B, H, KV, hd);
    Vec h = ref_linear(a, W("self_attn.o_proj"), T, H * hd, d);
    for (int64_t i = 0; i < T * d; ++i) h[i] += x[i];
    const Vec n2 = ref_rmsnorm(h, W("post_attention_layernorm"), T, d);
    const Vec act = ref_swiglu(ref_linear(n2, W("mlp.gate_proj"), T, d, F),
                               ref_linear(n2, W("mlp.up_proj"), T, d, F));
    x = ref_linear(act, W("mlp.down_proj"), T, F, d);
    for (int64_t i = 0; i < T * d; ++i) x[i] += h[i];
  }
  const Vec n = ref_rmsnorm(x, P.at("model.norm.weight"), T, d);
  return ref_ce_sum(ref_linear(n, P.at("lm_head.weight"), T, d, V), targets, V) / double(T);
}

// ---- fp32 side and the comparison. ----

Floats randn(std::mt19937& rng, int64_t n, double stdev = 1.0, double mean = 0.0) {
  std::normal_distribution<double> dist(mean, stdev);
  Floats v(n);
  for (float& x : v) x = float(dist(rng));
  return v;
}
I32 randint(std::mt19937& rng, int64_t n, int lo, int hi) {  // uniform in [lo, hi)
  std::uniform_int_distribution<int> dist(lo, hi - 1);
  I32 v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}
Vec to_double(const Floats& v) {
  return Vec(v.begin(), v.end());
}

template <typename E>  // float or int32_t
Buffer upload(Backend& be, const std::vector<E>& host) {
  Buffer b(be, int64_t(host.size()), std::is_same_v<E, float> ? DType::F32 : DType::I32);
  be.upload(b.flat(), host.data());
  return b;
}
Floats download(Backend& be, const Tensor& t) {
  Floats v(t.numel());
  be.download(v.data(), t);
  return v;
}

// Forward values: max |got - want| <= rtol * max |want|.
void check_close(const char* what, const Floats& got, const Vec& want, double rtol = 1e-5) {
  REQUIRE(got.size() == want.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  CHECK_MESSAGE(err <= rtol * scale, what, ": max error ", err, " at scale ", scale);
}

// Central differences of f() with respect to every entry of x (f reads x; each entry is
// perturbed in place and restored), compared with the analytic gradient got under the
// measure in the header.
void check_grad(const std::string& what, Vec& x, const std::function<double()>& f,
                const Floats& got) {
  REQUIRE_MESSAGE(got.size() == x.size(), what);
  const double h = 1e-5;
  Vec fd(x.size());
  double ss = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double up = f();
    x[i] = x0 - h;
    const double down = f();
    x[i] = x0;
    fd[i] = (up - down) / (2 * h);
    ss += fd[i] * fd[i];
  }
  const double rms = std::sqrt(ss / double(x.size()));
  CHECK_MESSAGE(rms > 1e-6, what, ": the gradient is ~0, so the check would be vacuous");
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double ratio = std::abs(got[i] - fd[i]) / (1e-3 * std::max(std::abs(fd[i]), rms) + 1e-8);
    if (ratio > worst) worst = ratio, at = i;
  }
  CHECK_MESSAGE(worst <= 1.0, what, ": entry ", at, " analytic ", got[at], " numeric ", fd[at],
                " (rms ", rms, ", ", worst, "x the tolerance)");
}

std::unique_ptr<Comm> self_comm(const char* name) {
  return make_mpi_comm(MPI_COMM_SELF, name);
}

}  // namespace

TEST_CASE("gradcheck: embedding lookup and its scatter-add, on a vocabulary shard") {
  auto be = make_cpu_backend(1);
  std::mt19937 rng(1);
  const int64_t rows = 12, start = 4, d = 6, T = 10;  // shard holds tokens 4..15
  const I32 tok = {4, 9, 9, 0, 15, 16, 4, 4, 11, 2};  // repeats and tokens outside the shard
  Floats table = randn(rng, rows * d), R = randn(rng, T * d);
  Buffer tb = upload(*be, table), tk = upload(*be, tok), out(*be, T * d), dt(*be, rows * d);
  be->embedding_forward(out.view({T, d}), tk.flat(), tb.view({rows, d}), start);
  Vec tab = to_double(table), r = to_double(R);
  auto lookup = [&] {
    Vec y(T * d, 0.0);
    for (int64_t t = 0; t < T; ++t)
      if (tok[t] >= start && tok[t] < start + rows)
        std::copy_n(&tab[(tok[t] - start) * d], d, &y[t * d]);
    return y;
  };
  check_close("embedding forward", download(*be, out.flat()), lookup());
  be->fill(dt.flat(), 0.f);
  be->embedding_backward(dt.view({rows, d}), tk.flat(), upload(*be, R).view({T, d}), start);
  auto L = [&] { return dot(lookup(), r); };
  check_grad("d table", tab, L, download(*be, dt.flat()));
}

TEST_CASE("gradcheck: rmsnorm dx and dw") {
  auto be = make_cpu_backend(1);
  std::mt19937 rng(2);
  const int64_t T = 5, d = 24;  // 24: not a multiple of the backend's 16-column blocks
  Floats X = randn(rng, T * d, 1.5, 0.3), Wt = randn(rng, d, 0.3, 1.0), R = randn(rng, T * d);
  Buffer xb = upload(*be, X), wb = upload(*be, Wt), y(*be, T * d), rstd(*be, T), dx(*be, T * d),
         dw(*be, d);
  be->rmsnorm_forward(y.view({T, d}), rstd.flat(), xb.view({T, d}), wb.flat(), 1e-5f);
  Vec x = to_double(X), w = to_double(Wt), r = to_double(R);
  check_close("rmsnorm forward", download(*be, y.flat()), ref_rmsnorm(x, w, T, d));
  be->fill(dx.flat(), 123.f);  // dx is overwritten
  be->fill(dw.flat(), 0.f);    // dw accumulates
  be->rmsnorm_backward(dx.view({T, d}), dw.flat(), upload(*be, R).view({T, d}), xb.view({T, d}),
                       wb.flat(), rstd.flat());
  auto L = [&] { return dot(ref_rmsnorm(x, w, T, d), r); };
  check_grad("rmsnorm dx", x, L, download(*be, dx.flat()));
  check_grad("rmsnorm dw", w, L, download(*be, dw.flat()));
}

TEST_CASE("gradcheck: rope on the fused q|k|v, split and in place, backward as the inverse") {
  auto be = make_cpu_backend(1);
  std::mt19937 rng(3);
  const int64_t T = 6, H = 3, KV = 1, hd = 8, qw = H * hd, kw = KV * hd, W = qw + 2 * kw;
  const I32 pos = {0, 5, 2, 17, 100, 3};
  // Columns [c0, c0 + w) of the rows of x [T, W], packed [T, w].
  const auto columns = [&](const Floats& x, int64_t c0, int64_t w) {
    Floats out;
    for (int64_t t = 0; t < T; ++t)
      out.insert(out.end(), x.begin() + t * W + c0, x.begin() + t * W + c0 + w);
    return out;
  };
  // The default frequencies at two bases, and Llama 3's scaling (an original context of 400,
  // so that each of its three kinds of frequency is among hd/2 pairs: wavelengths 6.3, 167,
  // 4443 and 118142 against 100 and 400).
  for (const Rope rope : {Rope{10000.0}, Rope{500000.0}, Rope{500000.0, 8, 1, 4, 400}}) {
    CAPTURE(rope.theta);
    CAPTURE(rope.factor);
    Floats X = randn(rng, T * W), R = randn(rng, T * W);
    Buffer xb = upload(*be, X), pb = upload(*be, pos), q(*be, T * qw), k(*be, T * kw),
           v(*be, T * kw), dx(*be, T * W);
    Vec x = to_double(X), r = to_double(R);
    // The reference [T, W]: the q and k columns rotated, v's as they are.
    auto ref = [&] { return ref_rope_qkv(x, pos, H, KV, hd, rope); };
    auto L = [&] { return dot(ref(), r); };
    // Split (the default path): q | k | v side by side again is the reference; the backward
    // (rope_merge_qkv) of R's three column blocks is the gradient of L.
    be->rope_split_qkv(q.view({T, qw}), k.view({T, kw}), v.view({T, kw}), xb.view({T, W}), int(H),
                       int(KV), pb.flat(), rope);
    Floats split;
    const Floats hq = download(*be, q.flat()), hk = download(*be, k.flat()),
                 hv = download(*be, v.flat());
    for (int64_t t = 0; t < T; ++t) {
      split.insert(split.end(), hq.begin() + t * qw, hq.begin() + (t + 1) * qw);
      split.insert(split.end(), hk.begin() + t * kw, hk.begin() + (t + 1) * kw);
      split.insert(split.end(), hv.begin() + t * kw, hv.begin() + (t + 1) * kw);
    }
    check_close("rope_split_qkv forward", split, ref());
    be->fill(dx.flat(), 123.f);  // overwritten
    be->rope_merge_qkv(dx.view({T, W}), upload(*be, columns(R, 0, qw)).view({T, qw}),
                       upload(*be, columns(R, qw, kw)).view({T, kw}),
                       upload(*be, columns(R, qw + kw, kw)).view({T, kw}), int(H), int(KV),
                       pb.flat(), rope);
    check_grad("rope_merge_qkv dqkv", x, L, download(*be, dx.flat()));
    // In place (Fusion::RopeInPlace): rope_qkv, and its inverse on R as the backward.
    be->rope_qkv(xb.view({T, W}), int(H), int(KV), pb.flat(), rope, false);
    check_close("rope_qkv forward", download(*be, xb.flat()), ref());
    Buffer g = upload(*be, R);
    be->rope_qkv(g.view({T, W}), int(H), int(KV), pb.flat(), rope, true);
    check_grad("rope_qkv inverse dqkv", x, L, download(*be, g.flat()));
  }
}

TEST_CASE("gradcheck: grouped-query causal attention dq, dk, dv under the global mask") {
  auto be = make_cpu_backend(1);
  std::mt19937 rng(4);
  const int64_t B = 2, H = 4, KV = 2, hd = 8;
  struct Case {
    const char* name;
    I32 qpos, kpos;
    I32 qdoc = {}, kdoc = {};  // --doc-mask: per sequence of the batch, [B*Sq] and [B*Sk]
  };
  const Case cases[] = {
      {"contiguous 0..7", {0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3, 4, 5, 6, 7}},
      {"CP rank 0 of 2: queries {0,1,6,7}, keys 0..7", {0, 1, 6, 7}, {0, 1, 2, 3, 4, 5, 6, 7}},
      {"CP rank 1 of 2: queries {2,3,4,5}, keys all-gathered in rank order",
       {2, 3, 4, 5},
       {0, 1, 6, 7, 2, 3, 4, 5}},
      // Documents: sequence 0 holds three (the third one token long), sequence 1 two.
      {"documents, contiguous 0..7",
       {0, 1, 2, 3, 4, 5, 6, 7},
       {0, 1, 2, 3, 4, 5, 6, 7},
       {0, 0, 0, 1, 1, 1, 1, 2, 0, 0, 0, 0, 0, 1, 1, 1},
       {0, 0, 0, 1, 1, 1, 1, 2, 0, 0, 0, 0, 0, 1, 1, 1}},
      {"documents, CP rank 1 of 2: queries {2,3,4,5}, keys 0..7",
       {2, 3, 4, 5},
       {0, 1, 2, 3, 4, 5, 6, 7},
       {0, 1, 1, 1, 0, 0, 0, 1},
       {0, 0, 0, 1, 1, 1, 1, 2, 0, 0, 0, 0, 0, 1, 1, 1}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const int64_t Sq = int64_t(c.qpos.size()), Sk = int64_t(c.kpos.size());
    AttnShape s{B, Sq, Sk, int(H), int(KV), int(hd)};
    s.documents = !c.qdoc.empty();
    Floats Q = randn(rng, B * Sq * H * hd), K = randn(rng, B * Sk * KV * hd),
           V = randn(rng, B * Sk * KV * hd), R = randn(rng, B * Sq * H * hd);
    Buffer qb = upload(*be, Q), kb = upload(*be, K), vb = upload(*be, V), rb = upload(*be, R);
    Buffer qp = upload(*be, c.qpos), kp = upload(*be, c.kpos);
    Buffer qd = s.documents ? upload(*be, c.qdoc) : Buffer(),
           kd = s.documents ? upload(*be, c.kdoc) : Buffer();
    const AttnPositions positions{qp.flat(), kp.flat(), s.documents ? qd.flat() : Tensor{},
                                  s.documents ? kd.flat() : Tensor{}};
    Buffer out(*be, B * Sq * H * hd), lse(*be, B * H * Sq), dq(*be, B * Sq * H * hd),
        dk(*be, B * Sk * KV * hd), dv(*be, B * Sk * KV * hd);
    const Tensor qv = qb.view({B * Sq, H * hd}), kv = kb.view({B * Sk, KV * hd}),
                 vv = vb.view({B * Sk, KV * hd}), ov = out.view({B * Sq, H * hd});
    be->attention_forward(ov, lse.flat(), qv, kv, vv, positions, s);
    Vec q = to_double(Q), k = to_double(K), v = to_double(V), r = to_double(R);
    auto attn = [&] {
      return ref_attention(q, k, v, c.qpos, c.kpos, B, H, KV, hd, c.qdoc, c.kdoc);
    };
    check_close("attention forward", download(*be, out.flat()), attn());
    for (Buffer* g : {&dq, &dk, &dv}) be->fill(g->flat(), 123.f);  // all three are overwritten
    be->attention_backward(dq.view({B * Sq, H * hd}), dk.view({B * Sk, KV * hd}),
                           dv.view({B * Sk, KV * hd}), rb.view({B * Sq, H * hd}), qv, kv, vv, ov,
                           lse.flat(), positions, s);
    auto L = [&] { return dot(attn(), r); };
    check_grad("attention dq", q, L, download(*be, dq.flat()));
    check_grad("attention dk", k, L, download(*be, dk.flat()));
    check_grad("attention dv", v, L, download(*be, dv.flat()));
  }
}

TEST_CASE("gradcheck: swiglu on the fused gate|up, dgate and dup") {
  auto be = make_cpu_backend(1);
  std::mt19937 rng(5);
  const int64_t T = 5, F = 8;
  Floats G = randn(rng, T * F, 2.0), U = randn(rng, T * F), R = randn(rng, T * F);
  Floats GU;  // [T, 2F]: each row's gate, then its up
  for (int64_t t = 0; t < T; ++t) {
    GU.insert(GU.end(), G.begin() + t * F, G.begin() + (t + 1) * F);
    GU.insert(GU.end(), U.begin() + t * F, U.begin() + (t + 1) * F);
  }
  Buffer gub = upload(*be, GU), h(*be, T * F), dgu(*be, 2 * T * F);
  be->swiglu_fused_forward(h.view({T, F}), gub.view({T, 2 * F}));
  Vec gu = to_double(GU), r = to_double(R);
  auto ref = [&] {
    Vec g, u;
    for (int64_t t = 0; t < T; ++t) {
      g.insert(g.end(), gu.begin() + 2 * t * F, gu.begin() + (2 * t + 1) * F);
      u.insert(u.end(), gu.begin() + (2 * t + 1) * F, gu.begin() + (2 * t + 2) * F);
    }
    return ref_swiglu(g, u);
  };
  check_close("swiglu forward", download(*be, h.flat()), ref());
  be->fill(dgu.flat(), 123.f);  // overwritten
  be->swiglu_fused_backward(dgu.view({T, 2 * F}), upload(*be, R).view({T, F}),
                            gub.view({T, 2 * F}));
  auto L = [&] { return dot(ref(), r); };
  check_grad("swiglu dgate|dup", gu, L, download(*be, dgu.flat()));
}

TEST_CASE("gradcheck: vocab-parallel cross-entropy, whole and in two vocabulary shards") {
  auto be = make_cpu_backend(1);
  auto tp = self_comm("tp");
  std::mt19937 rng(6);
  const int64_t T = 6, V = 20, half = V / 2;
  Floats Lg = randn(rng, T * V, 2.0);
  for (int64_t j = 0; j < V; ++j) Lg[3 * V + j] += 100.f;  // exp(100) overflows fp32
  const I32 tgt = {3, 0, 19, 10, 9, 3};
  Vec logits = to_double(Lg);
  auto L = [&] { return ref_ce_sum(logits, tgt, V) / double(T); };

  // Whole vocabulary through VocabParallelCrossEntropy with a TP group of one.
  Buffer lb = upload(*be, Lg), tb = upload(*be, tgt), mx(*be, T), st(*be, 2 * T);
  VocabParallelCrossEntropy::forward(*be, *tp, lb.view({T, V}), tb.flat(), mx.flat(), st.flat(), V);
  DeviceLoss loss;  // the statistics, as a step keeps them, summed into the loss
  loss.record(*be, mx.flat(), st.flat());
  CHECK(loss.take(*be) / double(T) == doctest::Approx(L()).epsilon(1e-6));
  VocabParallelCrossEntropy::backward(*be, *tp, lb.view({T, V}), tb.flat(), mx.flat(), st.flat(), V,
                                      float(1.0 / double(T)));
  check_grad("dlogits", logits, L, download(*be, lb.flat()));

  // The same from two shards of V/2 columns, reducing row_max (max) and stats (sum) by hand
  // as a TP group of two would.
  Buffer shard[2], m[2], s[2];
  for (int r = 0; r < 2; ++r) {
    Floats part(T * half);
    for (int64_t t = 0; t < T; ++t) std::copy_n(&Lg[t * V + r * half], half, &part[t * half]);
    shard[r] = upload(*be, part);
    m[r] = Buffer(*be, T);
    s[r] = Buffer(*be, 2 * T);
    be->ce_row_max(m[r].flat(), shard[r].view({T, half}), half);
  }
  Floats mx0 = download(*be, m[0].flat()), mx1 = download(*be, m[1].flat());
  for (int64_t t = 0; t < T; ++t) mx0[t] = std::max(mx0[t], mx1[t]);
  for (int r = 0; r < 2; ++r) be->upload(m[r].flat(), mx0.data());
  for (int r = 0; r < 2; ++r)
    be->ce_stats(s[r].flat(), shard[r].view({T, half}), m[r].flat(), tb.flat(), r * half, half);
  be->add(s[0].flat(), s[1].flat());
  be->copy(s[1].flat(), s[0].flat());
  Floats full = download(*be, st.flat()), split = download(*be, s[0].flat());
  for (int64_t i = 0; i < 2 * T; ++i) CHECK(split[i] == doctest::Approx(full[i]).epsilon(1e-6));
  Floats dl(T * V);
  for (int r = 0; r < 2; ++r) {
    be->ce_backward(shard[r].view({T, half}), m[r].flat(), s[r].flat(), tb.flat(), r * half, half,
                    float(1.0 / double(T)));
    const Floats part = download(*be, shard[r].flat());
    for (int64_t t = 0; t < T; ++t) std::copy_n(&part[t * half], half, &dl[t * V + r * half]);
  }
  check_grad("dlogits from two shards", logits, L, dl);
}

TEST_CASE("gradcheck: cross-entropy leaves the padded vocabulary out of the softmax") {
  // V = 20 columns in two shards of 10, of which the first `vocab` are tokens: 13 leaves 3
  // tokens in the second shard, 8 leaves it none (its local row maximum is -inf).
  auto be = make_cpu_backend(1);
  std::mt19937 rng(7);
  const int64_t T = 5, V = 20, half = V / 2;
  for (const int64_t vocab : {13, 8}) {
    CAPTURE(vocab);
    Floats Lg = randn(rng, T * V, 2.0);
    const I32 tgt = {0, 7, int32_t(vocab - 1), 3, 1};
    Vec logits = to_double(Lg);
    auto L = [&] { return ref_ce_sum(logits, tgt, V, vocab) / double(T); };
    Buffer tb = upload(*be, tgt), shard[2], m[2], s[2];
    Floats mx(T, -INFINITY);
    for (int r = 0; r < 2; ++r) {
      Floats part(T * half);
      for (int64_t t = 0; t < T; ++t) std::copy_n(&Lg[t * V + r * half], half, &part[t * half]);
      shard[r] = upload(*be, part);
      m[r] = Buffer(*be, T);
      s[r] = Buffer(*be, 2 * T);
      const int64_t valid = std::clamp(vocab - r * half, int64_t(0), half);
      be->ce_row_max(m[r].flat(), shard[r].view({T, half}), valid);
      const Floats local = download(*be, m[r].flat());
      for (int64_t t = 0; t < T; ++t) mx[t] = std::max(mx[t], local[t]);
    }
    Floats sum(2 * T, 0.f);
    for (int r = 0; r < 2; ++r) {
      const int64_t valid = std::clamp(vocab - r * half, int64_t(0), half);
      be->upload(m[r].flat(), mx.data());
      be->ce_stats(s[r].flat(), shard[r].view({T, half}), m[r].flat(), tb.flat(), r * half, valid);
      const Floats local = download(*be, s[r].flat());
      for (int64_t i = 0; i < 2 * T; ++i) sum[i] += local[i];
    }
    double loss = 0;
    for (int64_t t = 0; t < T; ++t) loss += std::log(double(sum[2 * t])) + mx[t] - sum[2 * t + 1];
    CHECK(loss / double(T) == doctest::Approx(L()).epsilon(1e-6));
    Floats dl(T * V);
    for (int r = 0; r < 2; ++r) {
      const int64_t valid = std::clamp(vocab - r * half, int64_t(0), half);
      be->upload(s[r].flat(), sum.data());
      be->ce_backward(shard[r].view({T, half}), m[r].flat(), s[r].flat(), tb.flat(), r * half,
                      valid, float(1.0 / double(T)));
      const Floats part = download(*be, shard[r].flat());
      for (int64_t t = 0; t < T; ++t) std::copy_n(&part[t * half], half, &dl[t * V + r * half]);
    }
    check_grad("dlogits, padding masked", logits, L, dl);  // the padding's gradient is 0
  }
}

namespace {

// A tiny model and a step's batch: G sequences as m micro-batches of b.
struct Tiny {
  ModelConfig cfg;
  int micro_batches = 2, b = 2;
  std::vector<UnitSpec> units;
  std::vector<Floats> weights;  // per unit, flat as ZeroParams::load takes them
  I32 tokens, targets;          // [G*S]
  Tiny() {
    cfg.vocab = 32, cfg.layers = 2, cfg.dim = 16, cfg.heads = 4, cfg.kv_heads = 2;
    cfg.ffn_dim = 24, cfg.seq_len = 8;
    cfg.validate();
    units = make_units(cfg, 1, 0);
    // O(1) activations: norm weights ~1, embedding N(0,1), matrices N(0, 1/in).
    std::mt19937 rng(7);
    for (const UnitSpec& u : units) {
      Floats w;
      for (const ParamInfo& p : u.params) {
        const bool norm = p.shape.size() == 1, embed = u.kind == UnitSpec::Kind::Embedding;
        const Floats v = norm    ? randn(rng, p.numel(), 0.2, 1.0)
                         : embed ? randn(rng, p.numel())
                                 : randn(rng, p.numel(), 1.0 / std::sqrt(double(p.shape[1])));
        w.insert(w.end(), v.begin(), v.end());
      }
      weights.push_back(std::move(w));
    }
    const int64_t n = int64_t(micro_batches) * b * cfg.seq_len;
    tokens = randint(rng, n, 0, int(cfg.vocab));
    targets = randint(rng, n, 0, int(cfg.vocab));
  }
  int64_t tokens_per_step() const { return int64_t(tokens.size()); }
};

struct StepOut {
  double loss = 0;            // mean over the step's tokens
  std::vector<Floats> grads;  // per unit
};

// One training step's forward and backward as the trainer runs it (ZeRO-1, every comm of
// size one, loss_scale = 1 / tokens), without the optimizer.
StepOut run_step(const Tiny& m, bool recompute) {
  auto be = make_cpu_backend(1);
  auto tp = self_comm("tp"), cp = self_comm("cp"), dp_cp = self_comm("dp_cp");
  ZeroParams params(*be, *dp_cp, m.units, 1);
  for (size_t u = 0; u < m.units.size(); ++u) params.load(int(u), m.weights[u]);
  std::vector<int> all(m.units.size());
  std::iota(all.begin(), all.end(), 0);
  const TensorParallel tpg{*tp, false};
  const ContextParallel cpg{*cp};
  ModelChunk chunk(*be, tpg, cpg, m.cfg, params, all, recompute);

  const int64_t S = m.cfg.seq_len, T = m.b * S;
  I32 seq(S), tok_pos(T);
  std::iota(seq.begin(), seq.end(), 0);
  for (int64_t t = 0; t < T; ++t) tok_pos[t] = int32_t(t % S);
  Buffer seq_pos = upload(*be, seq), key_pos = upload(*be, seq), token_pos = upload(*be, tok_pos);
  StepOut r;
  params.begin_step(m.micro_batches);
  for (int j = 0; j < m.micro_batches; ++j) {
    const I32 in(m.tokens.begin() + j * T, m.tokens.begin() + (j + 1) * T),
        out(m.targets.begin() + j * T, m.targets.begin() + (j + 1) * T);
    Buffer tok = upload(*be, in), tgt = upload(*be, out);
    MicroBatch mb;
    mb.tokens = tok.flat();
    mb.targets = tgt.flat();
    mb.pos = TokenPositions{m.b, S, token_pos.flat(), seq_pos.flat(), key_pos.flat(), {}, {}};
    const float scale = float(1.0 / double(m.tokens_per_step()));
    chunk.forward(j, mb, nullptr, scale);
    r.loss += chunk.take_loss();
    chunk.backward(j, mb, nullptr, scale, true);
  }
  r.loss /= double(m.tokens_per_step());
  for (size_t u = 0; u < m.units.size(); ++u)
    r.grads.push_back(params.gather_grads_to_host(int(u)));
  return r;
}

}  // namespace

TEST_CASE("gradcheck: whole tiny model, every parameter tensor, through ModelChunk") {
  const Tiny m;
  const StepOut got = run_step(m, false);

  std::map<std::string, Vec> P;
  for (size_t u = 0; u < m.units.size(); ++u)
    for (const ParamInfo& p : m.units[u].params)
      P[p.name] = Vec(m.weights[u].begin() + p.offset, m.weights[u].begin() + p.offset + p.numel());
  const int64_t G = m.micro_batches * m.b;
  auto loss = [&] { return ref_model_loss(m.cfg, P, m.tokens, m.targets, G); };
  CHECK(got.loss == doctest::Approx(loss()).epsilon(1e-5));

  int checked = 0;
  for (size_t u = 0; u < m.units.size(); ++u)
    for (const ParamInfo& p : m.units[u].params) {
      const Floats g(got.grads[u].begin() + p.offset, got.grads[u].begin() + p.offset + p.numel());
      check_grad(p.name, P[p.name], loss, g);  // every entry of every tensor
      ++checked;
    }
  CHECK(checked == 3 + 9 * m.cfg.layers);  // embedding, blocks, final norm + head
}

TEST_CASE("gradcheck: recompute full gives bitwise the same loss and gradients") {
  const Tiny m;
  const StepOut a = run_step(m, false), b = run_step(m, true);
  CHECK(a.loss == b.loss);
  REQUIRE(a.grads.size() == b.grads.size());
  for (size_t u = 0; u < a.grads.size(); ++u) {
    CAPTURE(m.units[u].name);
    REQUIRE(a.grads[u].size() == b.grads[u].size());
    CHECK(std::memcmp(a.grads[u].data(), b.grads[u].data(), a.grads[u].size() * sizeof(float)) ==
          0);
  }
}

TEST_CASE("gradcheck: RoPE in place and the norm's residual add give bitwise the split path") {
  // Fusion::RopeInPlace and Fusion::NormResidual against the ops they replace
  // (backend/fusions.hpp): the same fp32 arithmetic on the same values, with and without
  // recompute.
  const Tiny m;
  for (const char* fusion : {"rope_in_place", "norm_residual"}) {
    for (bool recompute : {false, true}) {
      CAPTURE(fusion);
      CAPTURE(recompute);
      set_unfused(fusion);
      const StepOut plain = run_step(m, recompute);
      set_unfused("");
      const StepOut fused = run_step(m, recompute);
      CHECK(plain.loss == fused.loss);
      REQUIRE(plain.grads.size() == fused.grads.size());
      for (size_t u = 0; u < plain.grads.size(); ++u) {
        CAPTURE(m.units[u].name);
        REQUIRE(plain.grads[u].size() == fused.grads[u].size());
        CHECK(std::memcmp(plain.grads[u].data(), fused.grads[u].data(),
                          plain.grads[u].size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("gradcheck: the fused classifier's loss and gradients against the three pieces") {
  // The online softmax rounds the sums of exponentials in another order (test_fused_ops.cpp
  // bounds it by 1e-5 relative); through the LM head and the blocks that stays the size of the
  // gradients' own rounding.
  const Tiny m;
  set_unfused("classifier");
  const StepOut plain = run_step(m, false);
  set_unfused("");
  const StepOut fused = run_step(m, false);
  CHECK(fused.loss == doctest::Approx(plain.loss).epsilon(1e-6));
  double worst = 0;
  for (size_t u = 0; u < plain.grads.size(); ++u) {
    CAPTURE(m.units[u].name);
    double mag = 0, err = 0;
    for (size_t i = 0; i < plain.grads[u].size(); ++i) {
      mag = std::max(mag, double(std::abs(plain.grads[u][i])));
      err = std::max(err, double(std::abs(fused.grads[u][i] - plain.grads[u][i])));
    }
    CHECK(err <= 1e-5 * mag);
    worst = std::max(worst, err / mag);
  }
  MESSAGE("fused classifier: max |fused - plain| / max |plain| over the units' gradients: ", worst);
}
