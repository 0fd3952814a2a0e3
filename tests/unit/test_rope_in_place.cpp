// RoPE in place on the fused projection's qkv and attention reading q, k, v from it
// (Fusion::RopeInPlace), on the CPU backends: rope_qkv against rope_split_qkv and
// rope_merge_qkv, and attention under AttnLayout::Qkv and QInQkv against packed copies, bit for
// bit in fp32 (CPU, guarded CPU) and under the mixed-precision wrapper on bf16 tensors (the
// same fp32 arithmetic on the same widened values, rounded once); copy_columns.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../support/host_io.hpp"
#include "backend/backend.hpp"
#include "parallel/cp.hpp"
#include "util/bf16.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

// A backend and the dtype of the activations it is tested with.
struct Subject {
  std::unique_ptr<Backend> be;
  DType t;
  std::string name;
};
std::vector<Subject> subjects() {
  std::vector<Subject> v;
  v.push_back({make_cpu_backend(2), DType::F32, "cpu"});
  v.push_back({make_guarded_cpu_backend(2), DType::F32, "guarded-cpu"});
  v.push_back({make_mixed_precision_backend(make_cpu_backend(2)), DType::BF16, "bf16 wrapper"});
  return v;
}

// Columns [c0, c0 + w) of the rows of x [rows, cols], packed.
Floats columns(const Floats& x, int64_t cols, int64_t c0, int64_t w) {
  Floats out;
  for (size_t r = 0; r < x.size() / size_t(cols); ++r)
    out.insert(out.end(), x.begin() + r * cols + c0, x.begin() + r * cols + c0 + w);
  return out;
}
// The rows of a [rows, wa] | b [rows, wb] | c [rows, wc], side by side.
Floats beside(const Floats& a, int64_t wa, const Floats& b, int64_t wb, const Floats& c,
              int64_t wc) {
  Floats out;
  for (size_t r = 0; r < a.size() / size_t(wa); ++r) {
    out.insert(out.end(), a.begin() + r * wa, a.begin() + (r + 1) * wa);
    out.insert(out.end(), b.begin() + r * wb, b.begin() + (r + 1) * wb);
    out.insert(out.end(), c.begin() + r * wc, c.begin() + (r + 1) * wc);
  }
  return out;
}

}  // namespace

TEST_CASE("rope in place: rope_qkv rotates qkv's q and k columns as rope_split_qkv does") {
  const int64_t T = 12, H = 4, KV = 2, hd = 16, qw = H * hd, kw = KV * hd, W = qw + 2 * kw;
  std::vector<int32_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = int32_t(3 * t + 40000 * (t % 2));
  const Floats x = randn(T * W, 1), g = randn(T * W, 2);
  for (Subject& sub : subjects()) {
    CAPTURE(sub.name);
    Backend& be = *sub.be;
    Io io(be);
    const Tensor p = io.ints(pos), qkv = io.put(x, {T, W}, sub.t);
    const Tensor q = io.put(Floats(T * qw), {T, qw}, sub.t),
                 k = io.put(Floats(T * kw), {T, kw}, sub.t),
                 v = io.put(Floats(T * kw), {T, kw}, sub.t);
    be.rope_split_qkv(q, k, v, qkv, int(H), int(KV), p, Rope{10000.0});
    be.rope_qkv(qkv, int(H), int(KV), p, Rope{10000.0}, false);
    const Floats rotated = io.get(qkv);
    CHECK(same_bits(columns(rotated, W, 0, qw), io.get(q)));
    CHECK(same_bits(columns(rotated, W, qw, kw), io.get(k)));
    CHECK(same_bits(columns(rotated, W, qw + kw, kw), io.get(v)));
    // The columns really turned (v's did not).
    CHECK_FALSE(same_bits(columns(rotated, W, 0, qw + kw),
                          columns(io.get(io.put(x, {T, W}, sub.t)), W, 0, qw + kw)));
    // Backward: rope_merge_qkv of (dq | dk | dv) is rope_qkv's inverse on them side by side.
    const Tensor dq = io.put(columns(g, W, 0, qw), {T, qw}, sub.t),
                 dk = io.put(columns(g, W, qw, kw), {T, kw}, sub.t),
                 dv = io.put(columns(g, W, qw + kw, kw), {T, kw}, sub.t);
    const Tensor merged = io.put(Floats(T * W), {T, W}, sub.t), dqkv = io.put(g, {T, W}, sub.t);
    be.rope_merge_qkv(merged, dq, dk, dv, int(H), int(KV), p, Rope{10000.0});
    be.rope_qkv(dqkv, int(H), int(KV), p, Rope{10000.0}, true);
    CHECK(same_bits(io.get(dqkv), io.get(merged)));
    const Tensor odd = io.put(Floats(T * 12), {T, 12}, sub.t);  // not H + 2 KV heads of even width
    CHECK_THROWS_AS(be.rope_qkv(odd, int(H), int(KV), p, Rope{10000.0}, false), Error);
  }
}

TEST_CASE("rope in place: copy_columns moves a block of columns between rows of two widths") {
  const int64_t T = 5, A = 10, B = 7;
  const Floats src = randn(T * A, 3), dst0 = randn(T * B, 4);
  for (Subject& sub : subjects()) {
    CAPTURE(sub.name);
    Io io(*sub.be);
    const Tensor s = io.put(src, {T, A}, sub.t), d = io.put(dst0, {T, B}, sub.t);
    sub.be->copy_columns(d, 2, s, 5, 4);
    const Floats got = io.get(d), want_src = io.get(s),
                 before = io.get(io.put(dst0, {T, B}, sub.t));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < B; ++c) {
        const bool moved = c >= 2 && c < 6;
        CHECK(got[t * B + c] == (moved ? want_src[t * A + 5 + c - 2] : before[t * B + c]));
      }
    CHECK_THROWS_AS(sub.be->copy_columns(d, 4, s, 0, 4), Error);  // past dst's row
  }
}

namespace {

// One attention call, forward and backward, under `layout` against the packed call on copies:
// B sequences; CP rank `rank` of `cp` (CpChunks) or CP 1 (Causal). Under Qkv q, k, v are one
// qkv [B S, W]; under QInQkv q is qkv [B Sq, W] and k, v are packed.
void check_layout(Subject& sub, AttnLayout layout, int cp, int rank) {
  const int64_t B = 2, S = 16, Sq = S / cp, Sk = S, H = 4, KV = 2, hd = 8;
  const int64_t qw = H * hd, kw = KV * hd, W = qw + 2 * kw;
  Backend& be = *sub.be;
  Io io(be);
  const DType t = sub.t;
  AttnShape s{B, Sq, Sk, int(H), int(KV), int(hd)};
  std::vector<int32_t> keys(Sk);
  for (int32_t j = 0; j < Sk; ++j) keys[j] = j;
  const std::vector<int32_t> mine = cp == 1 ? keys : cp_positions(S, cp, rank);
  if (cp == 1)
    s.mask = AttnMask::Causal;
  else
    s.mask = AttnMask::CpChunks, s.cp = cp, s.cp_rank = rank;
  const Tensor qp = io.ints(mine), kp = io.ints(keys);
  // The fused buffers and their packed columns. Under QInQkv, k and v of the rank's own tokens
  // sit in qkv unused, the keys (all CP ranks') are packed.
  const Floats qkv_h = randn(B * Sq * W, 10), dout_h = randn(B * Sq * qw, 11);
  const Floats q_h = columns(qkv_h, W, 0, qw);
  const Floats k_h = layout == AttnLayout::Qkv ? columns(qkv_h, W, qw, kw) : randn(B * Sk * kw, 12);
  const Floats v_h =
      layout == AttnLayout::Qkv ? columns(qkv_h, W, qw + kw, kw) : randn(B * Sk * kw, 13);
  const Tensor q = io.put(q_h, {B * Sq, qw}, t), k = io.put(k_h, {B * Sk, kw}, t),
               v = io.put(v_h, {B * Sk, kw}, t), dout = io.put(dout_h, {B * Sq, qw}, t);
  const Tensor out = io.put(Floats(B * Sq * qw), {B * Sq, qw}, t),
               lse = io.put(Floats(B * H * Sq), {1, B * H * Sq}, DType::F32);
  const Tensor dq = io.put(Floats(B * Sq * qw), {B * Sq, qw}, t),
               dk = io.put(Floats(B * Sk * kw), {B * Sk, kw}, t),
               dv = io.put(Floats(B * Sk * kw), {B * Sk, kw}, t);
  be.attention_forward(out, lse, q, k, v, {qp, kp, {}, {}}, s);
  be.attention_backward(dq, dk, dv, dout, q, k, v, out, lse, {qp, kp, {}, {}}, s);

  AttnShape f = s;
  f.layout = layout;
  const Floats stale = randn(B * Sq * W, 14);  // dqkv before: every column to be written, or kept
  const Tensor qkv = io.put(qkv_h, {B * Sq, W}, t), dqkv = io.put(stale, {B * Sq, W}, t);
  const Tensor out2 = io.put(Floats(B * Sq * qw), {B * Sq, qw}, t),
               lse2 = io.put(Floats(B * H * Sq), {1, B * H * Sq}, DType::F32);
  if (layout == AttnLayout::Qkv) {
    be.attention_forward(out2, lse2, qkv, qkv, qkv, {qp, kp, {}, {}}, f);
    be.attention_backward(dqkv, dqkv, dqkv, dout, qkv, qkv, qkv, out2, lse2, {qp, kp, {}, {}}, f);
    CHECK(same_bits(io.get(dqkv), beside(io.get(dq), qw, io.get(dk), kw, io.get(dv), kw)));
  } else {
    const Tensor dk2 = io.put(Floats(B * Sk * kw), {B * Sk, kw}, t),
                 dv2 = io.put(Floats(B * Sk * kw), {B * Sk, kw}, t);
    be.attention_forward(out2, lse2, qkv, k, v, {qp, kp, {}, {}}, f);
    be.attention_backward(dqkv, dk2, dv2, dout, qkv, k, v, out2, lse2, {qp, kp, {}, {}}, f);
    const Floats got = io.get(dqkv), kept = io.get(io.put(stale, {B * Sq, W}, t));
    CHECK(same_bits(columns(got, W, 0, qw), io.get(dq)));
    CHECK(same_bits(columns(got, W, qw, 2 * kw), columns(kept, W, qw, 2 * kw)));  // left alone
    CHECK(same_bits(io.get(dk2), io.get(dk)));
    CHECK(same_bits(io.get(dv2), io.get(dv)));
  }
  CHECK(same_bits(io.get(out2), io.get(out)));
  CHECK(same_bits(io.get(lse2), io.get(lse)));
  // A tensor of the packed width under a fused layout is refused.
  CHECK_THROWS_AS(be.attention_forward(out2, lse2, q, k, v, {qp, kp, {}, {}}, f), Error);
}

}  // namespace

TEST_CASE("rope in place: attention on q, k, v in qkv equals attention on packed copies") {
  for (Subject& sub : subjects()) {
    CAPTURE(sub.name);
    SUBCASE("Qkv: CP 1, dq, dk, dv written into one dqkv") {
      check_layout(sub, AttnLayout::Qkv, 1, 0);
    }
    SUBCASE("QInQkv: CP 2 ranks' chunks against gathered keys") {
      check_layout(sub, AttnLayout::QInQkv, 2, 0);
      check_layout(sub, AttnLayout::QInQkv, 2, 1);
    }
    SUBCASE("QInQkv: CP 1 (decoding's cached keys)") {
      check_layout(sub, AttnLayout::QInQkv, 1, 0);
    }
  }
}

TEST_CASE("rope in place: the layouts' strides and column offsets") {
  AttnShape s{2, 16, 16, 8, 2, 4};
  const AttnStrides packed = attn_strides(s);
  CHECK((packed.q == 32 && packed.kv == 8 && packed.k_col == 0 && packed.v_col == 0));
  s.layout = AttnLayout::Qkv;
  const AttnStrides qkv = attn_strides(s);
  CHECK((qkv.q == 48 && qkv.kv == 48 && qkv.q_col == 0 && qkv.k_col == 32 && qkv.v_col == 40));
  s.layout = AttnLayout::QInQkv;
  const AttnStrides q_only = attn_strides(s);
  CHECK((q_only.q == 48 && q_only.kv == 8 && q_only.k_col == 0 && q_only.v_col == 0));
}
