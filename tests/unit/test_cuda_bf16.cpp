// The CUDA backend's native bf16 path against the CPU's bf16 reference (the mixed-precision
// wrapper over the CPU backend: fp32 math on the same bf16 inputs, each output rounded once),
// each op run twice on the GPU for bit equality; and cuDNN's attention against the GEMM
// fallback on the device, within the tolerances of cuda_compare.hpp.
// Without a GPU every case says so and passes.
#ifdef TETRA_HAVE_CUDA
#include <doctest/doctest.h>

#include <cstdlib>
#include <vector>

#include "../support/cuda_compare.hpp"
#include "backend/backend.hpp"
#include "backend/cuda/attn_fallback.hpp"
#include "parallel/cp.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

constexpr DType kB = DType::BF16;

Outputs run_elementwise(Backend& be) {
  Inputs in(be);
  const int64_t T = 7, F = 143, n = T * F;
  const Tensor a = in.bf16(randn(n, 1), {T, F}), b = in.bf16(randn(n, 2), {T, F}),
               dh = in.bf16(randn(n, 3), {T, F}), out = in.bf16(Floats(n, 0.f), {T, F}),
               gu = in.bf16(randn(2 * n, 4, 2.f), {T, 2 * F}),
               dgu = in.bf16(Floats(2 * n, 0.f), {T, 2 * F}), acc = in.f32(randn(n, 5), {T, F});
  Outputs o;
  be.fill(out, 0.3f);
  o.push_back({"fill", get(be, out)});
  be.add3(out, a, b);
  o.push_back({"add3", get(be, out)});
  be.add(out, a);
  o.push_back({"add", get(be, out)});
  be.add(acc, a);  // fp32 += bf16
  o.push_back({"add fp32 += bf16", get(be, acc)});
  be.swiglu_fused_forward(out, gu);
  o.push_back({"swiglu_fused_forward", get(be, out)});
  be.swiglu_fused_backward(dgu, dh, gu);
  o.push_back({"swiglu_fused_backward", get(be, dgu)});
  return o;
}

Outputs run_sums_and_orders(Backend& be) {
  Inputs in(be);
  const int64_t big = 3 * 16384 * 4 + 17;
  const std::vector<Tensor> xs = {in.f32(randn(big, 6, 3.f), {big}), in.f32(Floats(), {0}),
                                  in.bf16(randn(1001, 7), {1001}), in.f32(randn(5, 8), {5})};
  std::vector<double> sums(xs.size());
  be.sum_squares(xs, sums);
  Outputs o{{"sum_squares of 4 tensors", sums}};
  // Each alone gives the same bits (checked here on whichever backend runs this).
  for (size_t i = 0; i < xs.size(); ++i) CHECK(be.sum_squares(xs[i]) == sums[i]);
  const int cp = 2;
  const int64_t batch = 3, block = 5 * 64;
  const Tensor src = in.bf16(randn(2 * cp * batch * block, 9), {2 * cp * batch * block}),
               dst = in.bf16(Floats(2 * cp * batch * block, 0.f), {2 * cp * batch * block});
  be.cp_zigzag(dst, src, cp, batch, true);
  o.push_back({"cp_zigzag to global", get(be, dst)});
  be.cp_zigzag(src, dst, cp, batch, false);
  o.push_back({"cp_zigzag back", get(be, src)});
  return o;
}

// The GEMMs of a bf16 step: activations (bf16 D), input gradients accumulated (bf16, beta 1),
// weight gradients (fp32 D, beta 1), the residual on the epilogue (matmul_add).
Outputs run_matmul(Backend& be, int64_t T, int64_t d, int64_t F) {
  Inputs in(be);
  const Tensor x = in.bf16(randn(T * d, 10), {T, d}), w = in.bf16(randn(F * d, 11, 0.05f), {F, d}),
               y = in.bf16(Floats(T * F, 0.f), {T, F}), dy = in.bf16(randn(T * F, 12), {T, F}),
               dx = in.bf16(randn(T * d, 13), {T, d}), dw = in.f32(randn(F * d, 14), {F, d}),
               res = in.bf16(randn(T * F, 15), {T, F}), yr = in.bf16(Floats(T * F, 0.f), {T, F});
  Outputs o;
  be.matmul(y, x, false, w, true);  // y = x W^T
  o.push_back({"matmul x W^T (bf16 D)", get(be, y)});
  be.matmul(dx, dy, false, w, false, 1.f, 1.f);  // dx += dy W
  o.push_back({"matmul dx += dy W (bf16, beta 1)", get(be, dx)});
  be.matmul(dw, dy, true, x, false, 1.f, 1.f);  // dW += dy^T x
  o.push_back({"matmul dW += dy^T x (fp32 D)", get(be, dw)});
  be.matmul_add(yr, x, false, w, true, res);
  o.push_back({"matmul_add x W^T + residual", get(be, yr)});
  return o;
}

Outputs run_embedding(Backend& be) {
  Inputs in(be);
  const int64_t T = 300, d = 96, V = 10, start = 20;
  Ints tok = randint(T, 21, 0, 40);
  for (int64_t t = 0; t < 60; ++t) tok[size_t(t)] = int32_t(start + 3);  // a long run of one token
  const Tensor tokens = in.i32(tok, {T}), table = in.bf16(randn(V * d, 22), {V, d}),
               out = in.bf16(Floats(T * d, 0.f), {T, d}), dout = in.bf16(randn(T * d, 24), {T, d}),
               dtable = in.f32(randn(V * d, 25), {V, d});
  be.embedding_forward(out, tokens, table, start);
  be.embedding_backward(dtable, tokens, dout, start);
  return {{"embedding_forward", get(be, out)},
          {"embedding_backward (fp32 dtable)", get(be, dtable)}};
}

// The bf16 outputs (y, dx: one rounding) or the fp32 ones (1/rms, dw accumulated: fp32 sums).
Outputs run_rmsnorm(Backend& be, int64_t T, int64_t d, bool rounded) {
  Inputs in(be);
  Floats w = randn(d, 31, 0.3f);
  for (float& x : w) x += 1.f;
  const Tensor x = in.bf16(randn(T * d, 32, 2.f), {T, d}), wt = in.bf16(w, {d}),
               y = in.bf16(Floats(T * d, 0.f), {T, d}), rstd = in.zeros({T}),
               dy = in.bf16(randn(T * d, 33), {T, d}), dx = in.bf16(Floats(T * d, 0.f), {T, d}),
               dw = in.f32(randn(d, 35), {d});
  be.rmsnorm_forward(y, rstd, x, wt, 1e-5f);
  be.rmsnorm_backward(dx, dw, dy, x, wt, rstd);
  if (rounded) return {{"rmsnorm y", get(be, y)}, {"rmsnorm dx", get(be, dx)}};
  return {{"rmsnorm rstd", get(be, rstd)}, {"rmsnorm dw (fp32, accumulated)", get(be, dw)}};
}

Outputs run_rope(Backend& be, DType t) {
  Inputs in(be);
  const int64_t T = 20, H = 4, KV = 2, hd = 64, qw = H * hd, kw = KV * hd, W = qw + 2 * kw;
  Ints pos = randint(T, 41, 0, 40000);  // some beyond the table of 32768 positions
  pos[0] = 0;
  const Tensor p = in.i32(pos, {T}), x = in.act(t, randn(T * W, 42), {T, W}),
               qkv = in.act(t, randn(T * W, 43), {T, W}),
               q = in.act(t, Floats(T * qw, 0.f), {T, qw}),
               k = in.act(t, Floats(T * kw, 0.f), {T, kw}),
               v = in.act(t, Floats(T * kw, 0.f), {T, kw}),
               back = in.act(t, Floats(T * W, 0.f), {T, W});
  be.rope_qkv(x, int(H), int(KV), p, Rope{500000.0}, false);
  be.rope_split_qkv(q, k, v, qkv, int(H), int(KV), p, Rope{10000.0});
  be.rope_merge_qkv(back, q, k, v, int(H), int(KV), p, Rope{10000.0});
  return {{"rope_qkv theta 500000", get(be, x)},
          {"rope_split_qkv q", get(be, q)},
          {"rope_split_qkv k", get(be, k)},
          {"rope_split_qkv v", get(be, v)},
          {"rope_merge_qkv", get(be, back)}};
}

Outputs run_cross_entropy(Backend& be) {
  Inputs in(be);
  const int64_t T = 9, V = 1000, start = 500, valid = V - 37;
  Ints tgt = randint(T, 61, 0, 2000);
  tgt[0] = int32_t(start);
  tgt[1] = int32_t(start + valid - 1);
  const Tensor logits = in.bf16(randn(T * V, 62, 3.f), {T, V}), targets = in.i32(tgt, {T}),
               row_max = in.zeros({T}), stats = in.zeros({T, 2});
  be.ce_row_max(row_max, logits, valid);
  be.ce_stats(stats, logits, row_max, targets, start, valid);
  Outputs o{{"ce_row_max", get(be, row_max)}, {"ce_stats", get(be, stats)}};
  be.ce_backward(logits, row_max, stats, targets, start, valid, 1.f / float(T));
  o.push_back({"ce_backward (bf16 in place)", get(be, logits)});
  return o;
}

Outputs run_adamw(Backend& be) {
  Inputs in(be);
  const int64_t n = 5000;
  const Tensor p = in.f32(randn(n, 71), {n}), m = in.zeros({n}), v = in.zeros({n}),
               copy = in.bf16(Floats(n, 0.f), {n});
  const AdamWSegment segments[] = {{0, 1000, 0.1f}, {1000, 1001, 0.f}, {1001, 4990, 0.1f}};
  Outputs o;
  for (int64_t step = 1; step <= 3; ++step) {
    const Tensor g = in.f32(randn(n, uint32_t(72 + step), 0.1f), {n});
    be.adamw(p, g, m, v, Backend::AdamW{1e-3f, 0.9f, 0.95f, 1e-8f, 0.5f, step}, segments, copy);
  }
  o.push_back({"adamw param", get(be, p)});
  o.push_back({"adamw bf16 copy", get(be, copy)});
  return o;
}

// Attention on bf16 with the mask hint: Causal (CP 1) or CpChunks (CP rank `rank` of `cp`), or
// General positions, which take the fallback.
struct Case {
  int64_t batch, S;
  int heads, kv_heads, head_dim, cp, rank;
  AttnMask mask;
};
Outputs run_attention(Backend& be, const Case& c, bool outputs_only) {
  Inputs in(be);
  const int64_t B = c.batch, Sq = c.S / c.cp, Sk = c.S;
  const int64_t qw = int64_t(c.heads) * c.head_dim, kw = int64_t(c.kv_heads) * c.head_dim;
  const AttnShape s{B, Sq, Sk, c.heads, c.kv_heads, c.head_dim, c.mask, c.cp, c.rank};
  const std::vector<int32_t> qp =
      c.cp == 1 ? iota(0, int32_t(c.S)) : cp_positions(c.S, c.cp, c.rank);
  const Tensor q = in.bf16(randn(B * Sq * qw, 51), {B * Sq, qw}),
               k = in.bf16(randn(B * Sk * kw, 52), {B * Sk, kw}),
               v = in.bf16(randn(B * Sk * kw, 53), {B * Sk, kw}),
               dout = in.bf16(randn(B * Sq * qw, 54), {B * Sq, qw}), qpos = in.i32(qp, {Sq}),
               kpos = in.i32(iota(0, int32_t(Sk)), {Sk}),
               out = in.bf16(Floats(B * Sq * qw, 0.f), {B * Sq, qw}),
               lse = in.zeros({B * c.heads * Sq}),
               dq = in.bf16(Floats(B * Sq * qw, 0.f), {B * Sq, qw}),
               dk = in.bf16(randn(B * Sk * kw, 56), {B * Sk, kw}),
               dv = in.bf16(randn(B * Sk * kw, 57), {B * Sk, kw});
  be.attention_forward(out, lse, q, k, v, {qpos, kpos, {}, {}}, s);
  be.attention_backward(dq, dk, dv, dout, q, k, v, out, lse, {qpos, kpos, {}, {}}, s);
  if (outputs_only)
    return {{"out", get(be, out)}, {"dq", get(be, dq)}, {"dk", get(be, dk)}, {"dv", get(be, dv)}};
  return {{"lse", get(be, lse)}};
}

}  // namespace

TEST_CASE("cuda bf16: elementwise ops and SwiGLU (split and fused)") {
  SKIP_WITHOUT_GPU();
  check_bf16_against_cpu(run_elementwise, kOneRounding);
}

TEST_CASE("cuda bf16: sums of squares of many tensors, CP key order") {
  SKIP_WITHOUT_GPU();
  check_bf16_against_cpu(run_sums_and_orders, kFp32);
}

TEST_CASE("cuda bf16: cuBLASLt GEMMs, bf16 and fp32 outputs, the residual epilogue") {
  SKIP_WITHOUT_GPU();
  // Odd sizes (views of 2-byte alignment) and a step-like shape.
  check_bf16_against_cpu([](Backend& be) { return run_matmul(be, 37, 53, 29); }, kOneRounding);
  check_bf16_against_cpu([](Backend& be) { return run_matmul(be, 512, 256, 704); }, kOneRounding);
}

TEST_CASE("cuda bf16: embedding forward, and backward by sorted runs of tokens") {
  SKIP_WITHOUT_GPU();
  check_bf16_against_cpu(run_embedding, kFp32);
}

TEST_CASE("cuda bf16: rmsnorm forward and backward (dw from per-block partials)") {
  SKIP_WITHOUT_GPU();
  for (auto [T, d] : {std::pair<int64_t, int64_t>{33, 300}, {200, 64}, {5, 1024}}) {
    check_bf16_against_cpu([&](Backend& be) { return run_rmsnorm(be, T, d, true); }, kOneRounding);
    check_bf16_against_cpu([&](Backend& be) { return run_rmsnorm(be, T, d, false); }, kFp32);
  }
}

TEST_CASE("cuda: rope from the table, split from and merged into q|k|v, fp32 and bf16") {
  SKIP_WITHOUT_GPU();
  check_against_cpu([](Backend& be) { return run_rope(be, DType::F32); }, 1e-5);
  check_bf16_against_cpu([](Backend& be) { return run_rope(be, kB); }, kOneRounding);
}

TEST_CASE("cuda bf16: cross-entropy pieces on bf16 logits") {
  SKIP_WITHOUT_GPU();
  check_bf16_against_cpu(run_cross_entropy, kOneRounding);
}

TEST_CASE("cuda: AdamW writes the fp32 master and the bf16 copy in one pass") {
  SKIP_WITHOUT_GPU();
  check_bf16_against_cpu(run_adamw, 1e-5);
}

TEST_CASE("cuda bf16: attention, cuDNN or the fallback, against the CPU and each other") {
  SKIP_WITHOUT_GPU();
  const std::vector<Case> cases = {
      {2, 64, 8, 4, 16, 1, 0, AttnMask::Causal},     // gpu_check's SMALL model
      {1, 256, 4, 1, 64, 1, 0, AttnMask::Causal},    // MQA, several tiles
      {2, 64, 4, 2, 32, 2, 0, AttnMask::CpChunks},   // CP rank 0 of 2: chunks 0 and 3
      {2, 64, 4, 2, 32, 2, 1, AttnMask::CpChunks},   // CP rank 1 of 2: chunks 1 and 2
      {1, 128, 6, 2, 64, 4, 2, AttnMask::CpChunks},  // CP rank 2 of 4
      {2, 48, 4, 2, 16, 1, 0, AttnMask::General}};   // no hint: the fallback
  auto gpu = make_cuda_backend(0);
  for (const Case& c : cases) {
    const AttnShape s{c.batch,    c.S / c.cp, c.S,  c.heads, c.kv_heads,
                      c.head_dim, c.mask,     c.cp, c.rank};
    const std::string path = gpu->attention_path(s, kB);
    CAPTURE(path);
    MESSAGE("attention S ", c.S, " cp ", c.cp, " rank ", c.rank, ": ", path);
    // Both passes through cuDNN, or each pass said on its own (Attention::path).
    const bool fused = path.starts_with("cudnn sdpa (") && path.ends_with(", forward and backward");
#ifdef TETRA_HAVE_CUDNN
    if (c.mask != AttnMask::General) CHECK(fused);
#endif
    if (!fused) CHECK(path.starts_with("forward "));
    check_bf16_against_cpu([&](Backend& be) { return run_attention(be, c, true); },
                           fused ? kFused : kOneRounding);
    check_bf16_against_cpu([&](Backend& be) { return run_attention(be, c, false); }, kFp32);
    if (!fused) continue;
    // cuDNN against the fallback, both on the device (TETRA_ATTENTION=fallback makes a backend
    // whose attention takes the GEMMs).
    ::setenv("TETRA_ATTENTION", "fallback", 1);
    auto fallback = make_cuda_backend(0);
    ::unsetenv("TETRA_ATTENTION");
    CHECK(fallback->attention_path(s, kB) ==
          "forward cuda fallback (batched GEMMs): TETRA_ATTENTION=fallback; "
          "backward cuda fallback (batched GEMMs): TETRA_ATTENTION=fallback");
    check_outputs(
        *fallback, *gpu, [&](Backend& be) { return run_attention(be, c, true); }, kFused);
  }
}

#endif  // TETRA_HAVE_CUDA
