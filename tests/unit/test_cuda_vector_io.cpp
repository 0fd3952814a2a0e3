// The GPU fusions vector_io and embedding_spread (backend/fusions.hpp) against the kernels they
// replace: each op run with the switch on and off on one device must give the same bits (the
// same per-element math, the same order of every sum); the vector path must be the one taken
// where the tensors allow it, the scalar one where they do not (a pointer off the vector's
// alignment, a width that vectors do not divide); and the spread embedding backward against
// the CPU's bf16 reference, as test_cuda_bf16.cpp holds the plain one. Without a GPU every case
// says so and passes.
#ifdef TETRA_HAVE_CUDA
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "../support/cuda_compare.hpp"
#include "backend/backend.hpp"
#include "backend/cuda/vector_io.hpp"
#include "backend/fusions.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

constexpr DType kB = DType::BF16;

// Runs f on one GPU backend with the fusion `name` off, then on (the others as TETRA_UNFUSED
// sets them): every output must have the same bits.
void same_bits_both_ways(const char* name, const std::function<Outputs(Backend&)>& f) {
  const char* env = std::getenv("TETRA_UNFUSED");
  const std::string others = env ? env : "";
  auto gpu = make_cuda_backend(0);
  set_unfused(others + "," + name);
  const Outputs off = f(*gpu);
  set_unfused(others);
  const Outputs on = f(*gpu);
  REQUIRE(off.size() == on.size());
  for (size_t o = 0; o < off.size(); ++o) {
    const std::vector<double>&a = off[o].second, &b = on[o].second;
    REQUIRE(a.size() == b.size());
    CHECK_MESSAGE(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0, off[o].first,
                  ": ", name, " on and off differ");
  }
}

// Elementwise ops over [T, F]; `skew` elements of offset put every tensor off the 16-byte
// alignment (the scalar path), F = 137 leaves whole vectors short (the same).
Outputs run_elementwise(Backend& be, int64_t F, int64_t skew) {
  Inputs in(be);
  const int64_t T = 6, n = T * F;
  auto b16 = [&](const Floats& h) { return in.bf16(h, {n + skew}).flat(skew, n); };
  auto f32 = [&](const Floats& h) { return in.f32(h, {n + skew}).flat(skew, n); };
  const Tensor a = b16(randn(n + skew, 1)), b = b16(randn(n + skew, 2)),
               out = b16(Floats(n + skew, 0.f)), acc = f32(randn(n + skew, 5)),
               acc2 = f32(randn(n + skew, 6)), wide = f32(Floats(n + skew, 0.f));
  const Tensor gu = in.bf16(randn(2 * n, 4, 2.f), {T, 2 * F}),
               dgu = in.bf16(Floats(2 * n, 0.f), {T, 2 * F}), dh = in.bf16(randn(n, 3), {T, F}),
               h = in.bf16(Floats(n, 0.f), {T, F});
  Outputs o;
  be.fill(out, 0.3f);
  o.push_back({"fill bf16", get(be, out)});
  be.fill(wide, -2.5f);
  o.push_back({"fill fp32", get(be, wide)});
  be.add3(out, a, b);
  o.push_back({"add3", get(be, out)});
  be.add(out, a);
  o.push_back({"add bf16", get(be, out)});
  be.add(acc, a);
  o.push_back({"add fp32 += bf16", get(be, acc)});
  be.add(acc, acc2);
  o.push_back({"add fp32", get(be, acc)});
  be.cast(out, acc);
  o.push_back({"cast fp32 -> bf16", get(be, out)});
  be.cast(wide, out);
  o.push_back({"cast bf16 -> fp32", get(be, wide)});
  be.swiglu_fused_forward(h, gu);
  o.push_back({"swiglu_fused_forward", get(be, h)});
  be.swiglu_fused_backward(dgu, dh, gu);
  o.push_back({"swiglu_fused_backward", get(be, dgu)});
  return o;
}

Outputs run_rows(Backend& be, int64_t d, int64_t V) {
  Inputs in(be);
  const int64_t T = 40, rows = 50, start = 20, valid = V - 37;
  const Tensor tokens = in.i32(randint(T, 11, 0, 90), {T}),
               table = in.bf16(randn(rows * d, 12), {rows, d}),
               out = in.bf16(Floats(T * d, 0.f), {T, d}),
               table32 = in.f32(randn(rows * d, 13), {rows, d}),
               out32 = in.f32(Floats(T * d, 0.f), {T, d});
  be.embedding_forward(out, tokens, table, start);
  be.embedding_forward(out32, tokens, table32, start);
  Ints tgt = randint(T, 14, 0, 2000);
  tgt[0] = int32_t(start);
  const Tensor logits = in.bf16(randn(T * V, 15, 3.f), {T, V}), targets = in.i32(tgt, {T}),
               row_max = in.zeros({T}), stats = in.zeros({T, 2});
  be.ce_row_max(row_max, logits, valid);
  be.ce_stats(stats, logits, row_max, targets, start, valid);
  be.ce_backward(logits, row_max, stats, targets, start, valid, 1.f / float(T));
  return {{"embedding_forward bf16", get(be, out)},
          {"embedding_forward fp32", get(be, out32)},
          {"ce_backward", get(be, logits)}};
}

// Segments that start and end off multiples of 4, a gap between two, padding at the end.
Outputs run_adamw(Backend& be, bool with_copy) {
  Inputs in(be);
  const int64_t n = 5003;
  const Tensor p = in.f32(randn(n, 71), {n}), m = in.zeros({n}), v = in.zeros({n}),
               copy = with_copy ? in.bf16(Floats(n, 0.f), {n}) : Tensor{};
  const AdamWSegment segments[] = {{3, 1000, 0.1f}, {1000, 1001, 0.f}, {1010, 4990, 0.1f}};
  for (int64_t step = 1; step <= 3; ++step) {
    const Tensor g = in.f32(randn(n, uint32_t(72 + step), 0.1f), {n});
    be.adamw(p, g, m, v, Backend::AdamW{1e-3f, 0.9f, 0.95f, 1e-8f, 0.5f, step}, segments, copy);
  }
  Outputs o{{"adamw param", get(be, p)}, {"adamw m", get(be, m)}, {"adamw v", get(be, v)}};
  if (with_copy) o.push_back({"adamw bf16 copy", get(be, copy)});
  return o;
}

// Long runs of one token (the longest 1500 rows), tokens outside the shard, a column count
// that leaves the last group of 128 short.
Outputs run_embedding_backward(Backend& be) {
  Inputs in(be);
  const int64_t T = 3000, d = 200, V = 10, start = 20;
  Ints tok = randint(T, 81, 0, 40);
  for (int64_t t = 0; t < T; t += 2) tok[size_t(t)] = int32_t(start + 3);
  for (int64_t t = 1; t < 200; t += 2) tok[size_t(t)] = int32_t(start + 9);
  const Tensor tokens = in.i32(tok, {T}), dout = in.bf16(randn(T * d, 82), {T, d}),
               dtable = in.f32(randn(V * d, 83), {V, d});
  be.embedding_backward(dtable, tokens, dout, start);
  return {{"embedding_backward (fp32 dtable)", get(be, dtable)}};
}

}  // namespace

TEST_CASE("cuda vector_io: elementwise ops, casts and SwiGLU give the scalar kernels' bits") {
  SKIP_WITHOUT_GPU();
  for (auto [F, skew] : {std::pair<int64_t, int64_t>{136, 0}, {136, 1}, {137, 0}}) {
    CAPTURE(F);
    CAPTURE(skew);
    same_bits_both_ways("vector_io", [&](Backend& be) { return run_elementwise(be, F, skew); });
  }
}

TEST_CASE("cuda vector_io: embedding rows, dlogits and AdamW give the scalar kernels' bits") {
  SKIP_WITHOUT_GPU();
  for (auto [d, V] : {std::pair<int64_t, int64_t>{96, 1024}, {100, 1001}}) {
    CAPTURE(d);
    same_bits_both_ways("vector_io", [&](Backend& be) { return run_rows(be, d, V); });
  }
  for (bool with_copy : {true, false})
    same_bits_both_ways("vector_io", [&](Backend& be) { return run_adamw(be, with_copy); });
}

TEST_CASE("cuda vector_io: the 16-byte path is taken where the tensors allow it, only there") {
  SKIP_WITHOUT_GPU();
  const char* env = std::getenv("TETRA_UNFUSED");
  const std::string others = env ? env : "";
  set_unfused(others + ",vector_io");  // off whatever the environment says, then on
  auto gpu = make_cuda_backend(0);
  Inputs in(*gpu);
  const auto s = static_cast<cudaStream_t>(gpu->stream());
  const Tensor x = in.bf16(Floats(1024, 1.f), {1024}), y = in.f32(Floats(1024, 1.f), {1024});
  CHECK_FALSE(cuda::try_vec_fill(s, x, 0.f));
  set_unfused(others);
  if (!fused(Fusion::VectorIo)) return;  // the environment turned it off
  CHECK(cuda::try_vec_fill(s, x, 0.f));
  CHECK(cuda::try_vec_add(s, y, x));                         // fp32 += bf16: 4 a vector
  CHECK_FALSE(cuda::try_vec_fill(s, x.flat(1, 1016), 0.f));  // 2 bytes off
  CHECK_FALSE(cuda::try_vec_fill(s, x.flat(0, 1020), 0.f));  // not whole vectors of 8
  CHECK(cuda::try_vec_fill(s, y.flat(0, 1020), 0.f));        // whole vectors of 4
  CHECK_FALSE(cuda::try_vec_add(s, y.flat(4, 1016), x.flat(2, 1016)));
  CHECK(cuda::try_vec_cast(s, x, y));
  const Tensor gu = in.bf16(Floats(4 * 2 * 136, 1.f), {4, 2 * 136}),
               h = in.bf16(Floats(4 * 136, 0.f), {4, 136}),
               gu_odd = in.bf16(Floats(4 * 2 * 132, 1.f), {4, 2 * 132}),
               h_odd = in.bf16(Floats(4 * 132, 0.f), {4, 132});
  CHECK(cuda::try_vec_swiglu_fused_forward(s, h, gu));
  CHECK_FALSE(cuda::try_vec_swiglu_fused_forward(s, h_odd, gu_odd));  // F = 132: up off 16 B
  gpu->synchronize();
  set_unfused(others);
}

TEST_CASE("cuda embedding_spread: the spread backward gives the plain kernel's bits") {
  SKIP_WITHOUT_GPU();
  same_bits_both_ways("embedding_spread", run_embedding_backward);
  check_bf16_against_cpu(run_embedding_backward, 1e-4);  // test_cuda_bf16's kFp32
}

#endif
