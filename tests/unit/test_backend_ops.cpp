// The ops that came with the native bf16 path, on the CPU backend (the reference the CUDA
// kernels are compared with on a GPU): each against the composition of older ops it replaces,
// or against the same arithmetic on the host (host_io.hpp), bit for bit in fp32, and under the
// mixed-precision wrapper (the bf16 reference) with one rounding per output; the shared per-element
// math (backend/op_math.hpp) against independent formulas; the attention mask hint against the
// positions it stands for.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "../support/host_io.hpp"
#include "backend/backend.hpp"
#include "backend/op_math.hpp"
#include "parallel/cp.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {}  // namespace

TEST_CASE("ops: sums of squares of many tensors in one call, each as alone") {
  for (auto& be : fp32_backends()) {
    Io io(*be);
    const Tensor a = io.put(randn(3 * 65536 + 11, 1), {3 * 65536 + 11}),
                 b = io.put(randn(7, 2), {7}), e = io.zeros({0});
    const std::vector<Tensor> xs = {a, e, b};
    std::vector<double> out(3);
    be->sum_squares(xs, out);
    CHECK(out[0] == be->sum_squares(a));
    CHECK(out[1] == 0.0);
    CHECK(out[2] == be->sum_squares(b));
  }
  // bf16 tensors through the wrapper: widened exactly, so the same sums as their fp32 values.
  auto mixed = make_mixed_precision_backend(make_cpu_backend(1));
  Io io(*mixed);
  const Floats h = randn(1000, 3);
  Floats rounded(h.size());
  for (size_t i = 0; i < h.size(); ++i) rounded[i] = bf16_to_float(float_to_bf16(h[i]));
  const std::vector<Tensor> xs = {io.put(h, {1000}, DType::BF16)};
  std::vector<double> out(1);
  mixed->sum_squares(xs, out);
  CHECK(out[0] == mixed->sum_squares(io.put(rounded, {1000})));
}

TEST_CASE("ops: matmul_add is the product, then C added; bf16 rounds once") {
  for (auto& be : fp32_backends()) {
    Io io(*be);
    const Tensor A = io.put(randn(37 * 53, 4), {37, 53}), B = io.put(randn(29 * 53, 5), {29, 53}),
                 C = io.put(randn(37 * 29, 6), {37, 29}), D = io.zeros({37, 29}),
                 E = io.zeros({37, 29});
    be->matmul_add(D, A, false, B, true, C);
    be->matmul(E, A, false, B, true);
    be->add(E, C);
    CHECK(same_bits(io.get(D), io.get(E)));
    CHECK_THROWS_AS(be->matmul_add(D, A, false, B, true, D), Error);  // C may not be D
  }
  // bf16: D = round(A B + C) in fp32, not round(round(A B) + C).
  auto mixed = make_mixed_precision_backend(make_cpu_backend(1));
  auto cpu = make_cpu_backend(1);
  Io io(*mixed), ref(*cpu);
  const Floats a = randn(16 * 64, 7), b = randn(64 * 24, 8), c = randn(16 * 24, 9, 50.f);
  const Tensor D = io.zeros({16, 24}, DType::BF16);
  mixed->matmul_add(D, io.put(a, {16, 64}, DType::BF16), false, io.put(b, {64, 24}, DType::BF16),
                    false, io.put(c, {16, 24}, DType::BF16));
  const Floats got = io.get(D);
  // The fp32 reference on the rounded inputs.
  const auto wide = [&](const Floats& x, std::initializer_list<int64_t> shape) {
    Floats r(x.size());
    for (size_t i = 0; i < x.size(); ++i) r[i] = bf16_to_float(float_to_bf16(x[i]));
    return ref.put(r, shape);
  };
  const Tensor Dr = ref.zeros({16, 24});
  cpu->matmul_add(Dr, wide(a, {16, 64}), false, wide(b, {64, 24}), false, wide(c, {16, 24}));
  const Floats exact = ref.get(Dr);
  const Tensor P = ref.zeros({16, 24});
  cpu->matmul(P, wide(a, {16, 64}), false, wide(b, {64, 24}), false);
  const Floats product = ref.get(P), cr = ref.get(wide(c, {16, 24}));
  int twice_differs = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i] == bf16_to_float(float_to_bf16(exact[i])));
    const float twice =
        bf16_to_float(float_to_bf16(bf16_to_float(float_to_bf16(product[i])) + cr[i]));
    twice_differs += twice != got[i];
  }
  CHECK(twice_differs > 0);  // the single rounding is observable on these inputs
}

TEST_CASE("ops: rope_split_qkv rotates q and k as the host does and copies v; merge inverts") {
  const int64_t T = 12, H = 4, KV = 2, hd = 16, qw = H * hd, kw = KV * hd, W = qw + 2 * kw;
  std::vector<int32_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = int32_t(3 * t + 1000 * (t % 2));
  const Floats x = randn(T * W, 10), g = randn(T * W, 11);
  // The host's split of x [T, W] into q | k | v, and its rotation of q and k.
  Floats hq(T * qw), hk(T * kw), hv(T * kw), gq(T * qw);
  for (int64_t t = 0; t < T; ++t) {
    std::copy(x.begin() + t * W, x.begin() + t * W + qw, hq.begin() + t * qw);
    std::copy(x.begin() + t * W + qw, x.begin() + t * W + qw + kw, hk.begin() + t * kw);
    std::copy(x.begin() + t * W + qw + kw, x.begin() + (t + 1) * W, hv.begin() + t * kw);
    std::copy(g.begin() + t * W, g.begin() + t * W + qw, gq.begin() + t * qw);
  }
  const Floats rq = host_rope(hq, qw, H, hd, pos, 10000.0, false),
               rk = host_rope(hk, kw, KV, hd, pos, 10000.0, false),
               iq = host_rope(gq, qw, H, hd, pos, 10000.0, true);
  for (auto& be : fp32_backends()) {
    Io io(*be);
    const Tensor qkv = io.put(x, {T, W}), p = io.ints(pos);
    const Tensor q = io.zeros({T, qw}), k = io.zeros({T, kw}), v = io.zeros({T, kw});
    be->rope_split_qkv(q, k, v, qkv, int(H), int(KV), p, Rope{10000.0});
    CHECK(same_bits(io.get(q), rq));
    CHECK(same_bits(io.get(k), rk));
    CHECK(same_bits(io.get(v), hv));
    // Backward: merge(split(x)) = x up to the rounding of the two rotations.
    const Tensor back = io.zeros({T, W});
    be->rope_merge_qkv(back, q, k, v, int(H), int(KV), p, Rope{10000.0});
    const Floats b = io.get(back);
    for (size_t i = 0; i < b.size(); ++i)
      CHECK(std::abs(b[i] - x[i]) <= 1e-5f * (1 + std::abs(x[i])));
    // And of a gradient: its q columns turned back by the host's inverse rotation.
    const Tensor dq = io.put(gq, {T, qw}), dqkv = io.zeros({T, W});
    be->rope_merge_qkv(dqkv, dq, k, v, int(H), int(KV), p, Rope{10000.0});
    const Floats d = io.get(dqkv);
    for (int64_t t = 0; t < T; ++t)
      CHECK(std::memcmp(&d[t * W], &iq[t * qw], qw * sizeof(float)) == 0);
  }
}

TEST_CASE("ops: SwiGLU on the fused gate|up output is the per-element math on each column") {
  const int64_t T = 9, F = 33;
  const Floats gu = randn(T * 2 * F, 11, 2.f), dh = randn(T * F, 12);
  // The host's h [T, F], dgate and dup [T, F] (op_math.hpp's functions, element by element).
  Floats h(T * F), dg(T * F), du(T * F);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < F; ++i) {
      const float g = gu[t * 2 * F + i], u = gu[t * 2 * F + F + i];
      h[t * F + i] = op::swiglu(g, u);
      op::swiglu_backward(dh[t * F + i], g, u, dg[t * F + i], du[t * F + i]);
    }
  for (auto& be : fp32_backends()) {
    Io io(*be);
    const Tensor fused = io.put(gu, {T, 2 * F}), dhv = io.put(dh, {T, F});
    const Tensor h1 = io.zeros({T, F}), dgu = io.zeros({T, 2 * F});
    be->swiglu_fused_forward(h1, fused);
    CHECK(same_bits(io.get(h1), h));
    be->swiglu_fused_backward(dgu, dhv, fused);
    const Floats a = io.get(dgu);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < F; ++i) {
        CHECK(a[t * 2 * F + i] == dg[t * F + i]);
        CHECK(a[t * 2 * F + F + i] == du[t * F + i]);
      }
  }
}

TEST_CASE("ops: cp_zigzag puts CP ranks' chunks in sequence order and back") {
  // 3 ranks, 2 sequences of 12 tokens, 2 values per token: rank r holds chunks r and 5 - r.
  const int cp = 3;
  const int64_t batch = 2, S = 12, w = 2;
  Floats gathered;  // [cp, batch, Sl, w] as an all-gather gives it: the token's position
  for (int r = 0; r < cp; ++r)
    for (int64_t b = 0; b < batch; ++b)
      for (int32_t p : cp_positions(S, cp, r))
        for (int64_t c = 0; c < w; ++c) gathered.push_back(float(1000 * b + 10 * p + c));
  for (auto& be : fp32_backends()) {
    Io io(*be);
    const Tensor src = io.put(gathered, {int64_t(gathered.size())}),
                 dst = io.zeros({int64_t(gathered.size())}),
                 back = io.zeros({int64_t(gathered.size())});
    be->cp_zigzag(dst, src, cp, batch, true);
    const Floats g = io.get(dst);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t p = 0; p < S; ++p)
        for (int64_t c = 0; c < w; ++c)
          CHECK(g[(b * S + p) * w + c] == float(1000 * b + 10 * p + c));
    be->cp_zigzag(back, dst, cp, batch, false);
    CHECK(same_bits(io.get(back), gathered));
  }
}

TEST_CASE("ops: AdamW writes the bf16 compute copy in the same pass") {
  const int64_t n = 777;
  for (auto& be : fp32_backends()) {
    Io io(*be);
    const Floats p0 = randn(n, 13);
    const Tensor p = io.put(p0, {n}), q = io.put(p0, {n}), m = io.zeros({n}), v = io.zeros({n}),
                 m2 = io.zeros({n}), v2 = io.zeros({n}), copy = io.zeros({n}, DType::BF16),
                 cast = io.zeros({n}, DType::BF16);
    for (int64_t step = 1; step <= 3; ++step) {
      const Tensor g = io.put(randn(n, uint32_t(20 + step), 0.1f), {n});
      const Backend::AdamW h{1e-2f, 0.9f, 0.95f, 1e-8f, 0.7f, step};
      const AdamWSegment all[] = {{0, n, 0.1f}};
      be->adamw(p, g, m, v, h, all, copy);
      be->adamw(q, g, m2, v2, h, all);
    }
    be->cast(cast, q);
    CHECK(same_bits(io.get(p), io.get(q)));
    CHECK(same_bits(io.get(copy), io.get(cast)));
    CHECK_FALSE(same_bits(io.get(copy), io.get(p)));  // the copy is really rounded
  }
}

TEST_CASE("ops: AdamW over segments equals a call per segment and leaves the gaps alone") {
  const int64_t n = 600;
  // A unit's shard: a norm (no decay), two matrices, then padding; and a gap between the two.
  const AdamWSegment segments[] = {{0, 64, 0.f}, {64, 300, 0.1f}, {310, 590, 0.1f}};
  for (auto& be : fp32_backends()) {
    Io io(*be);
    const Floats p0 = randn(n, 14);
    const Tensor p = io.put(p0, {n}), q = io.put(p0, {n}), m = io.zeros({n}), v = io.zeros({n}),
                 m2 = io.zeros({n}), v2 = io.zeros({n}), copy = io.zeros({n}, DType::BF16);
    for (int64_t step = 1; step <= 3; ++step) {
      const Tensor g = io.put(randn(n, uint32_t(40 + step), 0.1f), {n});
      const Backend::AdamW h{1e-2f, 0.9f, 0.95f, 1e-8f, 0.7f, step};
      be->adamw(p, g, m, v, h, segments, copy);
      for (const AdamWSegment& s : segments) {
        const int64_t k = s.end - s.begin;
        const AdamWSegment one[] = {{0, k, s.weight_decay}};
        be->adamw(q.flat(s.begin, k), g.flat(s.begin, k), m2.flat(s.begin, k), v2.flat(s.begin, k),
                  h, one);
      }
    }
    const Floats got = io.get(p), want = io.get(q), c = io.get(copy);
    CHECK(same_bits(got, want));
    CHECK(same_bits(io.get(m), io.get(m2)));
    for (int64_t i : {int64_t(300), int64_t(309), int64_t(590), n - 1}) {
      CHECK(got[i] == p0[i]);  // between and after the segments: untouched
      CHECK(c[i] == 0.f);
    }
    CHECK(got[64] != p0[64]);
    // Decay differs between the segments: the norm's elements with decay would differ.
    const AdamWSegment decayed[] = {{0, 64, 0.1f}};
    const Tensor r = io.put(p0, {n}), m3 = io.zeros({n}), v3 = io.zeros({n});
    for (int64_t step = 1; step <= 3; ++step) {
      const Tensor g = io.put(randn(n, uint32_t(40 + step), 0.1f), {n});
      be->adamw(r, g, m3, v3, Backend::AdamW{1e-2f, 0.9f, 0.95f, 1e-8f, 0.7f, step}, decayed);
    }
    const Floats with_decay = io.get(r);
    CHECK_FALSE(same_bits(Floats(with_decay.begin(), with_decay.begin() + 64),
                          Floats(got.begin(), got.begin() + 64)));
  }
}

TEST_CASE("ops: the attention mask hint is checked against the positions") {
  auto be = make_cpu_backend(1);
  Io io(*be);
  const int64_t B = 2, S = 8, H = 2, KV = 1, hd = 4;
  std::vector<int32_t> seq(S), shifted(S);
  for (int32_t i = 0; i < S; ++i) seq[i] = i, shifted[i] = i + 1;
  const Tensor q = io.put(randn(B * S * H * hd, 30), {B * S, H * hd}),
               k = io.put(randn(B * S * KV * hd, 31), {B * S, KV * hd}),
               v = io.put(randn(B * S * KV * hd, 32), {B * S, KV * hd}), pos = io.ints(seq),
               bad = io.ints(shifted);
  AttnShape general{B, S, S, int(H), int(KV), int(hd)};
  AttnShape causal = general;
  causal.mask = AttnMask::Causal;
  const Tensor o1 = io.zeros({B * S, H * hd}), o2 = io.zeros({B * S, H * hd}),
               l1 = io.zeros({B * H * S}), l2 = io.zeros({B * H * S});
  be->attention_forward(o1, l1, q, k, v, {pos, pos, {}, {}}, general);
  be->attention_forward(o2, l2, q, k, v, {pos, pos, {}, {}}, causal);
  CHECK(same_bits(io.get(o1), io.get(o2)));  // the CPU masks by positions either way
  CHECK_THROWS_AS(be->attention_forward(o2, l2, q, k, v, {bad, pos, {}, {}}, causal), Error);
  CHECK_NOTHROW(be->attention_forward(o2, l2, q, k, v, {bad, pos, {}, {}}, general));
  // CP: rank 1 of 2 holds chunks 1 and 2 of 4; the keys are the sequence in order.
  AttnShape chunks{1, 4, 8, 1, 1, 4, AttnMask::CpChunks, 2, 1};
  const std::vector<int32_t> mine = cp_positions(8, 2, 1);
  CHECK_NOTHROW(check_attn_mask(chunks, mine.data(), seq.data()));
  chunks.cp_rank = 0;
  CHECK_THROWS_AS(check_attn_mask(chunks, mine.data(), seq.data()), Error);
  // Documents go with a shape that says so, one per token of every sequence: one document in
  // each sequence is the causal mask itself; documents missing, short or unasked are refused.
  std::vector<int32_t> zeros(B * S, 0);
  const Tensor docs = io.ints(zeros), short_docs = io.ints(seq);
  AttnShape with_docs = causal;
  with_docs.documents = true;
  const Tensor o3 = io.zeros({B * S, H * hd}), l3 = io.zeros({B * H * S});
  be->attention_forward(o3, l3, q, k, v, {pos, pos, docs, docs}, with_docs);
  CHECK(same_bits(io.get(o3), io.get(o1)));
  CHECK_THROWS_AS(be->attention_forward(o3, l3, q, k, v, {pos, pos, {}, {}}, with_docs), Error);
  CHECK_THROWS_AS(be->attention_forward(o3, l3, q, k, v, {pos, pos, short_docs, docs}, with_docs),
                  Error);
  CHECK_THROWS_AS(be->attention_forward(o3, l3, q, k, v, {pos, pos, docs, docs}, causal), Error);
}

TEST_CASE("rope: Llama 3's frequencies are transformers'") {
  // transformers 4.46.3's _compute_llama3_parameters for head_dim 16, rope_theta 500000 and
  // rope_scaling {factor 8, low_freq_factor 1, high_freq_factor 4,
  // original_max_position_embeddings 512}, computed in float32: pairs 0 and 1 are kept
  // (wavelengths 6.3 and 32 below 512/4), pair 2 (167) is interpolated, pairs 3 to 7 (862 and
  // more, above 512/1) are divided by 8.
  const double want[8] = {1.0,
                          0.193922758102417,
                          0.02734413370490074,
                          0.0009115831344388425,
                          0.00017677668074611574,
                          3.428102354519069e-05,
                          6.647869668086059e-06,
                          1.289173155782919e-06};
  const Rope llama3{500000.0, 8, 1, 4, 512};
  const Rope plain{500000.0};
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    // Within the reference's float32 rounding: its interpolated pair takes six float32 ops
    // (the same formula in double ends 1.3e-7 from it there), the others one or two.
    CHECK(std::abs(llama3.inv_freq(i, 16) - want[i]) <= 4e-7 * want[i]);
    CHECK(plain.inv_freq(i, 16) == std::pow(500000.0, -2.0 * i / 16));
  }
  // The CPU backend rotates by them: cos and sin of the angle p f_i, in the q and the k head
  // of the fused projection's output q | k | v (one head each; v is left alone).
  auto be = make_cpu_backend(1);
  Io io(*be);
  const int64_t T = 3, hd = 16, W = 3 * hd;
  const std::vector<int32_t> pos = {0, 7, 300};
  std::vector<float> x(T * W, 0.f);
  for (int64_t r = 0; r < T; ++r)
    for (int64_t h = 0; h < 3; ++h) x[r * W + h * hd] = x[r * W + h * hd + 3] = 1.f;  // pairs 0, 3
  const Tensor t = io.put(x, {T, W});
  be->rope_qkv(t, 1, 1, io.ints(pos), llama3, false);
  const std::vector<float> y = io.get(t);
  for (int64_t r = 0; r < T; ++r) {
    for (int64_t h = 0; h < 2; ++h) {
      const float* yh = &y[r * W + h * hd];
      for (int i : {0, 3}) {  // (1, 0) at pair i turns to (cos a, sin a), a = pos f_i
        const double a = pos[r] * want[i];
        CHECK(std::abs(yh[i] - std::cos(a)) < 2e-6);
        CHECK(std::abs(yh[i + hd / 2] - std::sin(a)) < 2e-6);
      }
    }
    CHECK(std::equal(&y[r * W + 2 * hd], &y[r * W + W], &x[r * W + 2 * hd]));  // v
  }
}

TEST_CASE("op_math: exp_poly within an ulp of e^x, and its ends") {
  // Every 256th float from -87 to 88.72 (each float's bits stepped, so every exponent and many
  // mantissas), against e^x in double: within 1 ulp of the float nearest to it.
  double worst = 0;
  for (float x = -87.f; x <= 88.72f;) {
    const double e = std::exp(double(x));
    const float ef = float(e);
    const double ulp = double(std::nextafter(ef, INFINITY)) - double(ef);
    worst = std::max(worst, std::fabs(double(op::exp_poly(x)) - e) / ulp);
    uint32_t b = 0;
    std::memcpy(&b, &x, 4);
    b = x < 0 ? b - 256 : b + 256;  // toward +inf: a negative float's bits go down
    if (x < 0 && (b & 0x7fffffffu) < 256) b = 0;
    std::memcpy(&x, &b, 4);
  }
  CHECK(worst < 1.0);
  CHECK(op::exp_poly(0.f) == 1.f);
  CHECK(op::exp_poly(-87.5f) == 0.f);  // below the smallest normal result: 0
  CHECK(op::exp_poly(-INFINITY) == 0.f);
  CHECK(std::isinf(op::exp_poly(88.8f)));  // above FLT_MAX: inf
  CHECK(std::isinf(op::exp_poly(1e30f)));
  CHECK(std::isnan(op::exp_poly(NAN)));
  CHECK(std::isfinite(op::exp_poly(88.72f)));
}

TEST_CASE("op_math: the shared formulas against independent ones") {
  // SwiGLU's derivative against central differences in double.
  for (float g : {-6.f, -1.3f, -0.2f, 0.f, 0.7f, 2.5f, 9.f}) {
    const float u = 0.8f, dh = 1.5f;
    float dg = 0, du = 0;
    op::swiglu_backward(dh, g, u, dg, du);
    const auto f = [&](double gg, double uu) { return gg / (1 + std::exp(-gg)) * uu; };
    const double e = 1e-4;
    CHECK(dg == doctest::Approx(dh * (f(g + e, u) - f(g - e, u)) / (2 * e)).epsilon(1e-4));
    CHECK(du == doctest::Approx(dh * f(g, 1.0)).epsilon(1e-6));
    CHECK(op::swiglu(g, u) == doctest::Approx(f(g, u)).epsilon(1e-6));
  }
  // A rotation and its inverse; the rotation keeps the norm.
  float x1 = 0.3f, x2 = -1.7f;
  const double a = 0.9;
  op::rope_rotate(x1, x2, float(std::cos(a)), float(std::sin(a)));
  CHECK(x1 * x1 + x2 * x2 == doctest::Approx(0.09 + 2.89).epsilon(1e-6));
  op::rope_rotate(x1, x2, float(std::cos(a)), -float(std::sin(a)));
  CHECK(x1 == doctest::Approx(0.3).epsilon(1e-6));
  CHECK(x2 == doctest::Approx(-1.7).epsilon(1e-6));
  // AdamW's first step from zero moments moves by lr * g / (|g| + eps) after the decay.
  const op::AdamCoeffs c = op::adamw_coeffs(1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.f, 1);
  float p = 2.f, m = 0, v = 0;
  op::adamw_update(p, 0.5f, m, v, c);
  CHECK(p == doctest::Approx(2.0 * (1 - 1e-3) - 1e-2 * 0.5 / (0.5 + 1e-8)).epsilon(1e-6));
  // The cross-entropy gradient: softmax minus the target's one.
  const float inv = 1.f / (std::exp(0.f) + std::exp(-1.f));
  CHECK(op::ce_grad(0.f, 0.f, inv, 1.f, true) == doctest::Approx(1 / (1 + std::exp(-1.0)) - 1));
  CHECK(op::ce_grad(-1.f, 0.f, inv, 1.f, false) ==
        doctest::Approx(std::exp(-1.0) / (1 + std::exp(-1.0))));
  // RMSNorm's dx for a row of one element: y = x / sqrt(x^2 + eps) w has dy/dx = w eps / (x^2 +
  // eps)^1.5.
  const float x = 0.4f, w = 1.3f, eps = 1e-2f;
  const float r = op::rmsnorm_rstd(x * x, 1.f, eps);
  const float mean = 1.f * w * x * r;  // dy = 1
  CHECK(op::rmsnorm_dx(1.f, w, x, r, mean) ==
        doctest::Approx(w * eps / std::pow(x * x + eps, 1.5)).epsilon(1e-5));
}

TEST_CASE("ops: make_backend makes each device's backend, the one place backends are made") {
  CHECK(make_backend("cpu", 1)->device() == Device::CPU);
  CHECK(make_backend("guarded-cpu", 1)->device() == Device::Guarded);
  CHECK_THROWS_WITH_AS(make_backend("tpu", 1), doctest::Contains("device 'tpu': not a backend"),
                       Error);
#ifndef TETRA_HAVE_CUDA
  CHECK_THROWS_WITH_AS(make_backend("cuda", 1), doctest::Contains("no CUDA backend"), Error);
#endif
}
