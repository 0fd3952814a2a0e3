// The CUDA backend against the CPU backend (the ground truth): every op runs on the same
// seeded random inputs on both, and the outputs must agree within fp32 tolerances:
//   max_i |cpu_i - cuda_i| <= tol * max_i |cpu_i|,
// tol = 1e-5 for elementwise and row ops, 1e-4 for GEMMs and attention (different summation
// orders). Each op also runs twice on the CUDA backend and the two runs must agree bit for bit
// (every CUDA reduction has a fixed order). Attention covers grouped-query heads, head_dim above
// the kernels' 128-thread tile, more keys than one tile, and context-parallel positions: local
// queries holding two chunks of the sequence and gathered keys in rank order (not monotonic).
//
// Built only with the CUDA backend; on a machine without a GPU every case says so and passes.
#ifdef TETRA_HAVE_CUDA
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../support/cuda_compare.hpp"
#include "../support/test_util.hpp"
#include "backend/backend.hpp"
#include "util/bf16.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

Outputs run_elementwise(Backend& be) {
  Inputs in(be);
  const int64_t n = 1003;
  const Tensor a = in.f32(randn(n, 1), {n}), b = in.f32(randn(n, 2), {n}),
               dh = in.f32(randn(n, 3), {n}), out = in.zeros({n});
  Outputs o;
  be.fill(out, 0.25f);
  o.push_back({"fill", get(be, out)});
  be.add3(out, a, b);
  o.push_back({"add3", get(be, out)});
  be.add(out, a);
  o.push_back({"add", get(be, out)});
  be.copy(out, b);
  o.push_back({"copy", get(be, out)});
  // The fused [T, 2F] gate | up that the block's MLP reads (T = 17, F = 59).
  const Tensor gu = in.f32(randn(2 * n, 9, 2.f), {17, 118}), dgu = in.zeros({17, 118}),
               h = in.zeros({17, 59});
  be.swiglu_fused_forward(h, gu);
  o.push_back({"swiglu_fused_forward", get(be, h)});
  be.swiglu_fused_backward(dgu, dh.flat(0, 17 * 59).reshape({17, 59}), gu);
  o.push_back({"swiglu_fused_backward", get(be, dgu)});
  // Several sum_squares chunks (and a ragged last one); also an empty tensor.
  const int64_t big = 3 * 16384 * 4 + 17;
  o.push_back({"sum_squares", {be.sum_squares(in.f32(randn(big, 4, 3.f), {big}))}});
  o.push_back({"sum_squares small", {be.sum_squares(a)}});
  o.push_back({"sum_squares empty", {be.sum_squares(a.flat(0, 0))}});
  // CP's key order, 3 ranks and 5 sequences of blocks of 7 (f32) and of 1 (i32).
  const Tensor src = in.f32(randn(6 * 5 * 7, 5), {6 * 5 * 7}), dst = in.zeros({6 * 5 * 7});
  be.cp_zigzag(dst, src, 3, 5, true);
  o.push_back({"cp_zigzag f32 to global", get(be, dst)});
  be.cp_zigzag(src, dst, 3, 5, false);
  o.push_back({"cp_zigzag f32 back", get(be, src)});
  const Tensor isrc = in.i32(iota(0, 2 * 2 * 3), {12}), idst = in.i32(Ints(12, -1), {12});
  be.cp_zigzag(idst, isrc, 2, 3, true);
  o.push_back({"cp_zigzag i32", get(be, idst)});
  return o;
}

Outputs run_matmul(Backend& be, int64_t m, int64_t k, int64_t n) {
  Inputs in(be);
  Outputs o;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const std::string tag = std::string("matmul ") + (ta ? "A^T" : "A") + (tb ? " B^T" : " B");
      const uint32_t seed = uint32_t(10 + 2 * ta + tb);
      const Tensor A = ta ? in.f32(randn(k * m, seed), {k, m}) : in.f32(randn(m * k, seed), {m, k});
      const Tensor B =
          tb ? in.f32(randn(n * k, seed + 7), {n, k}) : in.f32(randn(k * n, seed + 7), {k, n});
      const Tensor C = in.f32(randn(m * n, seed + 13), {m, n});
      be.matmul(C, A, ta, B, tb, 0.5f, 0.75f);  // C = 0.5 op(A) op(B) + 0.75 C
      o.push_back({tag + " alpha 0.5 beta 0.75", get(be, C)});
      be.matmul(C, A, ta, B, tb, 1.f, 1.f);  // accumulate
      o.push_back({tag + " beta 1", get(be, C)});
      be.fill(C, std::numeric_limits<float>::quiet_NaN());  // beta 0 must not read C
      be.matmul(C, A, ta, B, tb);
      o.push_back({tag + " beta 0 over NaN", get(be, C)});
    }
  return o;
}

Outputs run_embedding(Backend& be) {
  Inputs in(be);
  // A shard of 10 rows starting at 20 out of 40 tokens: about a quarter of the tokens hit it,
  // several more than once; the shard's first and last rows are hit on purpose.
  const int64_t T = 50, d = 300, V = 10, start = 20;
  Ints tok = randint(T, 21, 0, 40);
  tok[3] = int32_t(start);
  tok[7] = int32_t(start + V - 1);
  tok[9] = int32_t(start + V);
  const Tensor tokens = in.i32(tok, {T}), table = in.f32(randn(V * d, 22), {V, d}),
               out = in.f32(randn(T * d, 23), {T, d}), dout = in.f32(randn(T * d, 24), {T, d}),
               dtable = in.f32(randn(V * d, 25), {V, d});
  be.embedding_forward(out, tokens, table, start);
  be.embedding_backward(dtable, tokens, dout, start);
  return {{"embedding_forward", get(be, out)}, {"embedding_backward", get(be, dtable)}};
}

Outputs run_rmsnorm(Backend& be, int64_t T, int64_t d) {
  Inputs in(be);
  Floats w = randn(d, 31, 0.3f);
  for (float& x : w) x += 1.f;
  const Tensor x = in.f32(randn(T * d, 32, 2.f), {T, d}), wt = in.f32(w, {d}), y = in.zeros({T, d}),
               rstd = in.zeros({T}), dy = in.f32(randn(T * d, 33), {T, d}),
               dx = in.f32(randn(T * d, 34), {T, d}), dw = in.f32(randn(d, 35), {d});
  be.rmsnorm_forward(y, rstd, x, wt, 1e-5f);
  be.rmsnorm_backward(dx, dw, dy, x, wt, rstd);
  return {{"rmsnorm y", get(be, y)},
          {"rmsnorm rstd", get(be, rstd)},
          {"rmsnorm dx", get(be, dx)},
          {"rmsnorm dw (accumulated)", get(be, dw)}};
}

// In place on q|k|v (the q and k columns: H + KV = 3 heads of 64 turn).
Outputs run_rope(Backend& be) {
  Inputs in(be);
  const int64_t T = 20, H = 2, KV = 1, hd = 64, W = (H + 2 * KV) * hd;
  Ints pos = randint(T, 41, 0, 200000);
  pos[0] = 0;
  const Tensor p = in.i32(pos, {T}), x = in.f32(randn(T * W, 42), {T, W}),
               y = in.f32(randn(T * W, 43), {T, W});
  be.rope_qkv(x, int(H), int(KV), p, Rope{500000.0}, false);
  be.rope_qkv(y, int(H), int(KV), p, Rope{10000.0}, true);
  return {{"rope_qkv", get(be, x)}, {"rope_qkv inverse", get(be, y)}};
}

struct AttnCase {
  int64_t batch;
  int heads, kv_heads, head_dim;
  Ints q_pos, k_pos;
};

Outputs run_attention(Backend& be, const AttnCase& c) {
  Inputs in(be);
  const int64_t B = c.batch, Sq = int64_t(c.q_pos.size()), Sk = int64_t(c.k_pos.size());
  const int64_t qw = int64_t(c.heads) * c.head_dim, kw = int64_t(c.kv_heads) * c.head_dim;
  const AttnShape s{B, Sq, Sk, c.heads, c.kv_heads, c.head_dim};
  const Tensor q = in.f32(randn(B * Sq * qw, 51), {B * Sq, qw}),
               k = in.f32(randn(B * Sk * kw, 52), {B * Sk, kw}),
               v = in.f32(randn(B * Sk * kw, 53), {B * Sk, kw}),
               dout = in.f32(randn(B * Sq * qw, 54), {B * Sq, qw}), qp = in.i32(c.q_pos, {Sq}),
               kp = in.i32(c.k_pos, {Sk}), out = in.zeros({B * Sq, qw}),
               lse = in.zeros({B * c.heads * Sq}),
               dq = in.f32(randn(B * Sq * qw, 55), {B * Sq, qw}),
               dk = in.f32(randn(B * Sk * kw, 56), {B * Sk, kw}),
               dv = in.f32(randn(B * Sk * kw, 57), {B * Sk, kw});
  be.attention_forward(out, lse, q, k, v, {qp, kp, {}, {}}, s);
  be.attention_backward(dq, dk, dv, dout, q, k, v, out, lse, {qp, kp, {}, {}}, s);
  return {{"attention out", get(be, out)},
          {"attention lse", get(be, lse)},
          {"attention dq", get(be, dq)},
          {"attention dk", get(be, dk)},
          {"attention dv", get(be, dv)}};
}

Outputs run_cross_entropy(Backend& be) {
  Inputs in(be);
  const int64_t T = 9, V = 1000, start = 500;
  Ints tgt = randint(T, 61, 0, 2000);
  tgt[0] = int32_t(start);
  tgt[1] = int32_t(start + V - 1);
  tgt[2] = int32_t(start + V);
  tgt[3] = int32_t(start - 1);
  const Tensor logits = in.f32(randn(T * V, 62, 3.f), {T, V}), targets = in.i32(tgt, {T}),
               row_max = in.zeros({T}), stats = in.zeros({T, 2});
  const int64_t valid = V - 37;  // the last columns pad the vocabulary
  be.ce_row_max(row_max, logits, valid);
  be.ce_stats(stats, logits, row_max, targets, start, valid);
  be.ce_backward(logits, row_max, stats, targets, start, valid, 1.f / float(T));
  return {{"ce_row_max", get(be, row_max)},
          {"ce_stats", get(be, stats)},
          {"ce_backward", get(be, logits)}};
}

// 20 segments (more than one launch takes), decay on every other, 10 elements between each
// that stay as they were.
Outputs run_adamw(Backend& be) {
  Inputs in(be);
  const int64_t n = 5000;
  const Tensor p = in.f32(randn(n, 71), {n}), m = in.zeros({n}), v = in.zeros({n});
  std::vector<AdamWSegment> segments;
  for (int64_t k = 0; k < 20; ++k) segments.push_back({k * 250, k * 250 + 240, k % 2 ? 0.1f : 0.f});
  Outputs o;
  for (int64_t step = 1; step <= 3; ++step) {
    const Tensor g = in.f32(randn(n, uint32_t(72 + step), 0.1f), {n});
    be.adamw(p, g, m, v, Backend::AdamW{1e-3f, 0.9f, 0.95f, 1e-8f, 0.5f, step}, segments);
    const std::string tag = "adamw step " + std::to_string(step);
    o.push_back({tag + " param", get(be, p)});
    o.push_back({tag + " m", get(be, m)});
    o.push_back({tag + " v", get(be, v)});
  }
  return o;
}

}  // namespace

TEST_CASE("cuda backend: elementwise ops, sum_squares, cp_zigzag, swiglu") {
  SKIP_WITHOUT_GPU();
  check_against_cpu(run_elementwise, 1e-5);
}

TEST_CASE("cuda backend: cp_zigzag of bf16 blocks (2-byte words)") {
  SKIP_WITHOUT_GPU();
  std::vector<uint16_t> h(3 * 4 * 5);
  for (size_t i = 0; i < h.size(); ++i) h[i] = uint16_t(1000 + i);
  std::vector<std::vector<uint16_t>> results;
  for (int side = 0; side < 2; ++side) {
    auto be = side == 0 ? make_cpu_backend(1) : make_cuda_backend(0);
    Buffer src(*be, int64_t(h.size()), DType::BF16), dst(*be, int64_t(h.size()), DType::BF16);
    be->upload(src.flat(), h.data());
    be->cp_zigzag(dst.flat(), src.flat(), 2, 3, true);  // blocks of 5
    std::vector<uint16_t> out(h.size());
    be->download(out.data(), dst.flat());
    results.push_back(out);
  }
  CHECK(results[0] == results[1]);
}

TEST_CASE("cuda backend: matmul, every transpose, alpha and beta") {
  SKIP_WITHOUT_GPU();
  check_against_cpu([](Backend& be) { return run_matmul(be, 37, 53, 29); }, 1e-4);
  check_against_cpu([](Backend& be) { return run_matmul(be, 300, 513, 200); }, 1e-4);
}

TEST_CASE("cuda backend: embedding forward and backward on a vocabulary shard") {
  SKIP_WITHOUT_GPU();
  check_against_cpu(run_embedding, 1e-5);
}

TEST_CASE("cuda backend: rmsnorm forward and backward") {
  SKIP_WITHOUT_GPU();
  check_against_cpu([](Backend& be) { return run_rmsnorm(be, 33, 300); }, 1e-5);
  check_against_cpu([](Backend& be) { return run_rmsnorm(be, 5, 64); }, 1e-5);
}

TEST_CASE("cuda backend: rope in place on q|k|v, forward and inverse at large positions") {
  SKIP_WITHOUT_GPU();
  check_against_cpu(run_rope, 1e-5);
}

TEST_CASE("cuda backend: attention forward and backward") {
  SKIP_WITHOUT_GPU();
  SUBCASE("GQA, CP rank 0 of 2: query chunks 0 and 3, all keys in order") {
    const AttnCase c{2, 4, 2, 16, concat({iota(0, 4), iota(12, 16)}), iota(0, 16)};
    check_against_cpu([&](Backend& be) { return run_attention(be, c); }, 1e-4);
  }
  SUBCASE("GQA group 3, CP rank 1 of 2: keys gathered in rank order (not monotonic)") {
    const AttnCase c{3,
                     6,
                     2,
                     64,
                     concat({iota(4, 8), iota(8, 12)}),
                     concat({iota(0, 4), iota(12, 16), iota(4, 8), iota(8, 12)})};
    check_against_cpu([&](Backend& be) { return run_attention(be, c); }, 1e-4);
  }
  SUBCASE("MQA, head_dim 160, 300 keys (several tiles, several columns per thread)") {
    const AttnCase c{1, 2, 1, 160, iota(0, 300), iota(0, 300)};
    check_against_cpu([&](Backend& be) { return run_attention(be, c); }, 1e-4);
  }
  SUBCASE("MHA, head_dim 80, CP rank 1 of 4 with 150 keys") {
    // Sequence of 160 in 8 chunks of 20: rank 1 holds chunks 1 and 6; keys are all 160
    // positions gathered in rank order (chunks 0,7,1,6,2,5,3,4), truncated to 150 keys so
    // that the last tile is ragged.
    Ints keys;
    for (int ch : {0, 7, 1, 6, 2, 5, 3, 4}) keys = concat({keys, iota(20 * ch, 20 * ch + 20)});
    keys.resize(150);
    const AttnCase c{2, 3, 3, 80, concat({iota(20, 40), iota(120, 140)}), keys};
    check_against_cpu([&](Backend& be) { return run_attention(be, c); }, 1e-4);
  }
}

TEST_CASE("cuda backend: vocab-parallel cross-entropy pieces") {
  SKIP_WITHOUT_GPU();
  check_against_cpu(run_cross_entropy, 1e-5);
}

TEST_CASE("cuda backend: adamw over three steps") {
  SKIP_WITHOUT_GPU();
  check_against_cpu(run_adamw, 1e-5);
}

TEST_CASE("cuda backend: errors become tetra::Error and leave the backend usable") {
  SKIP_WITHOUT_GPU();
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  // Node-local ranks beyond the GPU count share the GPUs round robin.
  CHECK(make_cuda_backend(count)->name().rfind("cuda:0 ", 0) == 0);
  auto be = make_cuda_backend(0);
  CHECK(be->device() == Device::CUDA);
  CHECK_THROWS_AS(Buffer(*be, int64_t(1) << 50), Error);  // 4 PiB
  Buffer x(*be, 1000);
  be->fill(x.flat(), 3.f);
  Floats h(1000);
  be->download(h.data(), x.flat());
  CHECK(h[999] == 3.f);
  CHECK(be->sum_squares(x.flat()) == doctest::Approx(9000.0));
}

TEST_CASE("cuda backend: bf16 casts round as the CPU's do; ops on bf16 tensors agree") {
  SKIP_WITHOUT_GPU();
  const std::vector<float> x = test::bf16_rounding_cases();
  std::vector<std::vector<uint16_t>> rounded;
  std::vector<std::vector<float>> products;
  for (int side = 0; side < 2; ++side) {
    auto be = make_mixed_precision_backend(side == 0 ? make_cpu_backend(1) : make_cuda_backend(0));
    const int64_t n = int64_t(x.size());
    Buffer f(*be, n), h(*be, n, DType::BF16);
    be->upload(f.flat(), x.data());
    be->cast(h.flat(), f.flat());
    std::vector<uint16_t> got(x.size());
    be->download(got.data(), h.flat());
    rounded.push_back(got);
    // C [8, 8] (fp32, accumulated) += A [8, 16] B [8, 16]^T, A and B bf16: the weight
    // gradient's shape of mixed precision.
    Buffer a(*be, 128, DType::BF16), b(*be, 128, DType::BF16), c(*be, 64);
    std::vector<uint16_t> ha(128), hb(128);
    for (int i = 0; i < 128; ++i) {
      ha[size_t(i)] = float_to_bf16(std::sin(0.37f * float(i)));
      hb[size_t(i)] = float_to_bf16(std::cos(0.11f * float(i)));
    }
    be->upload(a.flat(), ha.data());
    be->upload(b.flat(), hb.data());
    be->fill(c.flat(), 0.5f);
    be->matmul(c.view({8, 8}), a.view({8, 16}), false, b.view({8, 16}), true, 1.f, 1.f);
    std::vector<float> hc(64);
    be->download(hc.data(), c.flat());
    products.push_back(hc);
  }
  CHECK(rounded[0] == rounded[1]);
  for (size_t i = 0; i < x.size(); ++i) CHECK(rounded[1][i] == float_to_bf16(x[i]));
  for (size_t i = 0; i < 64; ++i) CHECK(std::abs(products[0][i] - products[1][i]) <= 1e-5f);
}

TEST_CASE("cuda backend: staging memory is pinned") {
  SKIP_WITHOUT_GPU();
  auto be = make_cuda_backend(0);
  void* p = be->host_alloc(4096);
  cudaPointerAttributes a{};
  REQUIRE(cudaPointerGetAttributes(&a, p) == cudaSuccess);
  CHECK(a.type == cudaMemoryTypeHost);  // page-locked, not pageable
  be->host_free(p);
}

#endif  // TETRA_HAVE_CUDA
