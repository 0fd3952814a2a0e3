// The CPU backend's promise that the thread count changes no bit: every op on 1, 2 and 3
// threads, at sizes above its parallel threshold (backend/cpu/cpu_parallel.hpp; ragged bands
// and row blocks) and below it, compared bit for bit; and the tiled product (BLAS or Eigen
// tiles, backend/cpu/cpu_gemm.cpp) against a product in double, every transpose, alpha and
// beta, and beta = 0 overwriting NaN. And the backend's blocks: one of 2 MiB or more starts on
// a huge page (so the kernel can back it with them), and a freed block is handed out again.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../support/host_io.hpp"
#include "backend/backend.hpp"
#include "backend/cpu/cpu_parallel.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

// The outputs of every op of the backend on inputs of one size class, in one list.
std::vector<Floats> run_ops(int threads, bool big) {
  auto be = make_cpu_backend(threads);
  Io io(*be);
  std::vector<Floats> out;
  // Products: [m, k] x [k, n] with every transpose; big: bands of 240, 288, 240 and 333 rows.
  const int64_t m = big ? 1101 : 20, n = big ? 520 : 24, k = big ? 77 : 16;
  CHECK(parallel_macs(m * n * k) == big);
  const Floats a = randn(m * k, 1), b = randn(k * n, 2), c0 = randn(m * n, 3);
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      const Tensor A = ta ? io.put(a, {k, m}) : io.put(a, {m, k});
      const Tensor B = tb ? io.put(b, {n, k}) : io.put(b, {k, n});
      const Tensor C = io.put(c0, {m, n});
      be->matmul(C, A, ta, B, tb, 0.75f, 0.5f);
      out.push_back(io.get(C));
    }
  // One thread computes a product in one call, more threads in the cut's bands of rows: at the
  // smallest bands the cut makes (4 of 48 rows, 1.06e6 multiply-adds each), a last band longer
  // than the others (48 and 49 rows), and bands of 48, 96, 48 and 108 rows, k longer than the
  // BLAS's block of k. (A band starting off a multiple of 12 rows, or a cut of the columns,
  // gives other bits with OpenBLAS's Haswell kernel, which Zen runs.)
  if (big)
    for (const auto& [pm, pn, pk] :
         {std::array<int64_t, 3>{192, 22, 1000}, {97, 65, 2000}, {300, 260, 700}}) {
      CHECK(parallel_macs(pm * pn * pk));
      const Floats pa = randn(pm * pk, 14), pb = randn(pk * pn, 15);
      for (const bool ta : {false, true})
        for (const bool tb : {false, true}) {
          const Tensor A = ta ? io.put(pa, {pk, pm}) : io.put(pa, {pm, pk});
          const Tensor B = tb ? io.put(pb, {pn, pk}) : io.put(pb, {pk, pn});
          const Tensor C = io.zeros({pm, pn});
          be->matmul(C, A, ta, B, tb, 1.f, 0.f);
          out.push_back(io.get(C));
        }
    }
  // Rows of width d (T d elements), attention over B x H x S x S x hd multiply-adds.
  const int64_t T = big ? 480 : 24, d = big ? 232 : 16, H = 4, KV = 2, hd = big ? 40 : 4;
  CHECK(parallel_elements(T * d) == big);
  const Tensor x = io.put(randn(T * d, 4), {T, d}), w = io.put(randn(d, 5), {d});
  const Tensor y = io.zeros({T, d}), rstd = io.zeros({T}), dx = io.zeros({T, d}),
               dw = io.zeros({d}), dy = io.put(randn(T * d, 6), {T, d});
  be->rmsnorm_forward(y, rstd, x, w, 1e-5f);
  be->rmsnorm_backward_residual(dx, dw, dy, x, w, rstd, y);
  for (const Tensor& t : {y, rstd, dx, dw}) out.push_back(io.get(t));
  be->add3(y, x, dy);
  be->add(y, dx);
  out.push_back(io.get(y));
  const double ss = be->sum_squares(y);
  Floats ss_bits(2);
  std::memcpy(ss_bits.data(), &ss, sizeof ss);
  out.push_back(ss_bits);
  // Embedding: tokens of a vocabulary of 50, half of them in the shard [10, 35).
  std::vector<int32_t> tok(T);
  for (int64_t t = 0; t < T; ++t) tok[t] = int32_t((t * 7) % 50);
  const Tensor toks = io.ints(tok), table = io.put(randn(25 * d, 7), {25, d});
  const Tensor emb = io.zeros({T, d}), dtable = io.zeros({25, d});
  be->embedding_forward(emb, toks, table, 10);
  be->embedding_backward(dtable, toks, dy, 10);
  out.push_back(io.get(emb));
  out.push_back(io.get(dtable));
  // SwiGLU on a fused [T, 2F].
  const Tensor gu = io.put(randn(T * 2 * d, 8), {T, 2 * d}), h = io.zeros({T, d}),
               dgu = io.zeros({T, 2 * d});
  be->swiglu_fused_forward(h, gu);
  be->swiglu_fused_backward(dgu, dy, gu);
  out.push_back(io.get(h));
  out.push_back(io.get(dgu));
  // Cross-entropy over d columns (the last 3 padding), fused and in pieces.
  std::vector<int32_t> target(T);
  for (int64_t t = 0; t < T; ++t) target[t] = int32_t((t * 5) % (d - 3));
  const Tensor tg = io.ints(target), logits = io.put(randn(T * d, 9), {T, d}),
               lg2 = io.put(randn(T * d, 9), {T, d}), mx = io.zeros({T}), st = io.zeros({T, 2});
  be->ce_fused(logits, mx, st, tg, d - 3, 0.5f);
  for (const Tensor& t : {logits, mx, st}) out.push_back(io.get(t));
  be->ce_row_max(mx, lg2, d - 3);
  be->ce_stats(st, lg2, mx, tg, 0, d - 3);
  be->ce_backward(lg2, mx, st, tg, 0, d - 3, 0.5f);
  for (const Tensor& t : {lg2, mx, st}) out.push_back(io.get(t));
  // RoPE in place on a fused q|k|v, then causal attention on it (2 sequences).
  const int64_t S = T / 2, W = (H + 2 * KV) * hd;
  std::vector<int32_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = int32_t(t % S);
  const Tensor p = io.ints(pos), qkv = io.put(randn(T * W, 10), {T, W});
  CHECK(parallel_elements(T * (H + KV) * hd) == big);
  be->rope_qkv(qkv, int(H), int(KV), p, Rope{10000.0}, false);
  out.push_back(io.get(qkv));
  const Tensor q = io.zeros({T, H * hd}), kk = io.zeros({T, KV * hd}), v = io.zeros({T, KV * hd});
  be->rope_split_qkv(q, kk, v, qkv, int(H), int(KV), p, Rope{10000.0});
  AttnShape s{2, S, S, int(H), int(KV), int(hd), AttnMask::Causal};
  CHECK(parallel_macs(2 * H * S * S * hd) == big);
  const Tensor seq = io.ints(std::vector<int32_t>(pos.begin(), pos.begin() + S));
  const Tensor o = io.zeros({T, H * hd}), lse = io.zeros({2 * H * S}),
               dout = io.put(randn(T * H * hd, 11), {T, H * hd});
  be->attention_forward(o, lse, q, kk, v, {seq, seq, {}, {}}, s);
  const Tensor dq = io.zeros({T, H * hd}), dk = io.zeros({T, KV * hd}), dv = io.zeros({T, KV * hd});
  be->attention_backward(dq, dk, dv, dout, q, kk, v, o, lse, {seq, seq, {}, {}}, s);
  for (const Tensor& t : {o, lse, dq, dk, dv}) out.push_back(io.get(t));
  // AdamW over two segments with a bf16 copy; the copy read back through a cast.
  const int64_t N = T * d;
  const Tensor param = io.put(randn(N, 12), {N}), grad = io.put(randn(N, 13), {N}),
               mom = io.zeros({N}), var = io.zeros({N}), copy = io.zeros({N}, DType::BF16),
               wide = io.zeros({N});
  const AdamWSegment segs[] = {{0, N / 3, 0.1f}, {N / 3, N, 0.f}};
  be->adamw(param, grad, mom, var, {1e-3f, 0.9f, 0.95f, 1e-8f, 0.8f, 1}, segs, copy);
  be->cast(wide, copy);
  for (const Tensor& t : {param, mom, var, wide}) out.push_back(io.get(t));
  return out;
}

// C = alpha op(A) op(B) + beta C0 in double, and each element's bound on an fp32 sum's rounding
// error, (k + 2) 2^-24 (|alpha| sum_l |a_il b_lj| + |beta c0|); A [m, k] (or [k, m] when ta),
// B [k, n] (or [n, k]).
struct Reference {
  std::vector<double> c, bound;
};
Reference reference(const Floats& a, bool ta, const Floats& b, bool tb, const Floats& c0, int64_t m,
                    int64_t n, int64_t k, double alpha, double beta) {
  Reference r{std::vector<double>(size_t(m * n)), std::vector<double>(size_t(m * n))};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, abs = 0;
      for (int64_t l = 0; l < k; ++l) {
        const double p =
            double(ta ? a[l * m + i] : a[i * k + l]) * double(tb ? b[j * k + l] : b[l * n + j]);
        s += p;
        abs += std::abs(p);
      }
      const double c = beta == 0 ? 0.0 : beta * c0[i * n + j];
      r.c[i * n + j] = alpha * s + c;
      r.bound[i * n + j] =
          double(k + 2) * std::ldexp(1.0, -24) * (std::abs(alpha) * abs + std::abs(c));
    }
  return r;
}

}  // namespace

TEST_CASE("cpu threads: every op gives the same bits on 1, 2 and 3 threads, large and small") {
  for (const bool big : {true, false}) {
    CAPTURE(big);
    const std::vector<Floats> one = run_ops(1, big);
    for (const int t : {2, 3}) {
      CAPTURE(t);
      const std::vector<Floats> other = run_ops(t, big);
      REQUIRE(other.size() == one.size());
      for (size_t i = 0; i < one.size(); ++i) {
        CAPTURE(i);
        CHECK(same_bits(one[i], other[i]));
      }
    }
  }
}

TEST_CASE("cpu matmul: bands against a double product, every transpose, alpha and beta") {
  auto be = make_cpu_backend(2);
  Io io(*be);
  // Ragged bands (backend/cpu/cpu_gemm.cpp cuts C [2101, 70] into bands of 480, 528, 528 and
  // 565 rows), and a k of 0.
  for (const int64_t k : {int64_t(300), int64_t(0)}) {
    const int64_t m = 2101, n = 70;
    const Floats a = randn(m * k, 21), b = randn(k * n, 22);
    Floats c0 = randn(m * n, 23);
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const float beta : {0.f, 1.f, -0.5f}) {
          CAPTURE(k);
          CAPTURE(ta);
          CAPTURE(tb);
          CAPTURE(beta);
          Floats init = c0;
          if (beta == 0.f) init[5] = std::numeric_limits<float>::quiet_NaN();  // not read
          const Tensor A = ta ? io.put(a, {k, m}) : io.put(a, {m, k});
          const Tensor B = tb ? io.put(b, {n, k}) : io.put(b, {k, n});
          const Tensor C = io.put(init, {m, n});
          be->matmul(C, A, ta, B, tb, 1.5f, beta);
          const Floats got = io.get(C);
          const Reference want = reference(a, ta, b, tb, c0, m, n, k, 1.5, beta);
          int64_t outside = 0;
          for (size_t i = 0; i < got.size(); ++i)
            outside += !(std::abs(got[i] - want.c[i]) <= want.bound[i]);
          CHECK(outside == 0);
        }
  }
}

TEST_CASE("cpu blocks: huge-page aligned from 2 MiB, 64-byte aligned below, and reused") {
  auto be = make_cpu_backend(1);
  const uintptr_t huge = uintptr_t(2) << 20;
  const int64_t n = int64_t(huge / sizeof(float)) + 1;  // just over 2 MiB of fp32
  void* first = nullptr;
  {
    const Buffer big(*be, n);
    first = big.flat().ptr;
    CHECK(reinterpret_cast<uintptr_t>(first) % huge == 0);
    const Buffer small(*be, 1000);
    CHECK(reinterpret_cast<uintptr_t>(small.flat().ptr) % 64 == 0);
    CHECK(reinterpret_cast<uintptr_t>(small.flat().ptr) % huge != 0);
  }
  const Buffer again(*be, n);
  CHECK(again.flat().ptr == first);
}
