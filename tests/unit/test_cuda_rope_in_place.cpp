// RoPE in place on the fused qkv and attention reading q, k, v from it (Fusion::RopeInPlace) on
// the CUDA backend, against the CPU (test_rope_in_place.cpp holds the CPU to the split path bit
// for bit): rope_qkv and copy_columns; attention under AttnLayout::Qkv (CP 1) and QInQkv (CP
// chunks) through the fp32 kernels, and in bf16 through cuDNN (strided Q, K, V, dQ, dK, dV) and
// the GEMM fallback. Tolerances of cuda_compare.hpp; each GPU op also runs twice for bit
// equality. Without a GPU every case says so and passes.
#ifdef TETRA_HAVE_CUDA
#include <doctest/doctest.h>

#include <cstdlib>
#include <vector>

#include "../support/cuda_compare.hpp"
#include "backend/backend.hpp"
#include "parallel/cp.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

Outputs run_rope_qkv(Backend& be, DType t) {
  Inputs in(be);
  const int64_t T = 37, H = 8, KV = 2, hd = 64, W = (H + 2 * KV) * hd;
  Ints pos = randint(T, 81, 0, 4096);
  pos[0] = 40000;  // past the cos/sin table
  const Tensor p = in.i32(pos, {T}), qkv = in.act(t, randn(T * W, 82), {T, W}),
               dqkv = in.act(t, randn(T * W, 83), {T, W}),
               k = in.act(t, Floats(T * KV * hd, 0.f), {T, KV * hd});
  be.rope_qkv(qkv, int(H), int(KV), p, Rope{10000.0}, false);
  be.rope_qkv(dqkv, int(H), int(KV), p, Rope{10000.0}, true);
  be.copy_columns(k, 0, qkv, H * hd, KV * hd);
  return {{"rope_qkv", get(be, qkv)},
          {"rope_qkv inverse", get(be, dqkv)},
          {"copy_columns k", get(be, k)}};
}

struct Case {
  int64_t batch, S;
  int heads, kv_heads, head_dim, cp, rank;
};
AttnShape shape_of(const Case& c) {
  AttnShape s{c.batch, c.S / c.cp, c.S, c.heads, c.kv_heads, c.head_dim};
  if (c.cp == 1)
    s.mask = AttnMask::Causal, s.layout = AttnLayout::Qkv;
  else
    s.mask = AttnMask::CpChunks, s.cp = c.cp, s.cp_rank = c.rank, s.layout = AttnLayout::QInQkv;
  return s;
}

// Forward and backward with q (at CP 1 k, v too) in qkv and dq (dk, dv) written into dqkv.
Outputs run_attention(Backend& be, const Case& c, DType t) {
  Inputs in(be);
  const AttnShape s = shape_of(c);
  const int64_t B = c.batch, Sq = s.sq, Sk = s.sk;
  const int64_t qw = int64_t(c.heads) * c.head_dim, kw = int64_t(c.kv_heads) * c.head_dim;
  const int64_t W = qw + 2 * kw;
  const Ints qp = c.cp == 1 ? iota(0, int32_t(c.S)) : cp_positions(c.S, c.cp, c.rank);
  const Tensor qkv = in.act(t, randn(B * Sq * W, 91), {B * Sq, W}),
               dout = in.act(t, randn(B * Sq * qw, 92), {B * Sq, qw}),
               out = in.act(t, Floats(B * Sq * qw, 0.f), {B * Sq, qw}),
               lse = in.zeros({B * c.heads * Sq}), qpos = in.i32(qp, {Sq}),
               kpos = in.i32(iota(0, int32_t(Sk)), {Sk}),
               dqkv = in.act(t, randn(B * Sq * W, 93), {B * Sq, W});
  Outputs o;
  if (s.layout == AttnLayout::Qkv) {
    be.attention_forward(out, lse, qkv, qkv, qkv, {qpos, kpos, {}, {}}, s);
    be.attention_backward(dqkv, dqkv, dqkv, dout, qkv, qkv, qkv, out, lse, {qpos, kpos, {}, {}}, s);
  } else {
    const Tensor k = in.act(t, randn(B * Sk * kw, 94), {B * Sk, kw}),
                 v = in.act(t, randn(B * Sk * kw, 95), {B * Sk, kw}),
                 dk = in.act(t, Floats(B * Sk * kw, 0.f), {B * Sk, kw}),
                 dv = in.act(t, Floats(B * Sk * kw, 0.f), {B * Sk, kw});
    be.attention_forward(out, lse, qkv, k, v, {qpos, kpos, {}, {}}, s);
    be.attention_backward(dqkv, dk, dv, dout, qkv, k, v, out, lse, {qpos, kpos, {}, {}}, s);
    o.push_back({"dk", get(be, dk)});
    o.push_back({"dv", get(be, dv)});
  }
  o.push_back({"out", get(be, out)});
  o.push_back({"dqkv", get(be, dqkv)});  // under QInQkv its k, v columns as they were
  o.push_back({"lse", get(be, lse)});
  return o;
}
// The outputs but lse (bf16, held to the rounding tolerance) or lse alone (fp32).
std::function<Outputs(Backend&)> part(const Case& c, bool lse) {
  return [c, lse](Backend& be) {
    Outputs all = run_attention(be, c, DType::BF16), o;
    for (auto& x : all)
      if ((x.first == "lse") == lse) o.push_back(std::move(x));
    return o;
  };
}

const std::vector<Case> kCases = {
    {2, 64, 8, 4, 16, 1, 0},   // gpu_check's SMALL model at CP 1: q, k, v in qkv
    {1, 256, 4, 1, 64, 1, 0},  // MQA, several tiles
    {2, 64, 4, 2, 32, 2, 1},   // CP rank 1 of 2: q in qkv, the gathered keys packed
    {1, 128, 6, 2, 64, 4, 2},  // CP rank 2 of 4
};

}  // namespace

TEST_CASE("cuda: rope_qkv in place on q|k|v and copy_columns, fp32 and bf16") {
  SKIP_WITHOUT_GPU();
  check_against_cpu([](Backend& be) { return run_rope_qkv(be, DType::F32); }, 1e-5);
  check_bf16_against_cpu([](Backend& be) { return run_rope_qkv(be, DType::BF16); }, kOneRounding);
}

TEST_CASE("cuda: attention on q, k, v strided in qkv, fp32 kernels") {
  SKIP_WITHOUT_GPU();
  for (const Case& c : kCases) {
    CAPTURE(c.S);
    CAPTURE(c.cp);
    check_against_cpu([&](Backend& be) { return run_attention(be, c, DType::F32); }, kFp32);
  }
}

TEST_CASE("cuda bf16: attention on q, k, v strided in qkv, cuDNN and the fallback") {
  SKIP_WITHOUT_GPU();
  auto gpu = make_cuda_backend(0);
  ::setenv("TETRA_ATTENTION", "fallback", 1);
  auto fallback = make_cuda_backend(0);
  ::unsetenv("TETRA_ATTENTION");
  for (const Case& c : kCases) {
    const std::string path = gpu->attention_path(shape_of(c), DType::BF16);
    CAPTURE(path);
    MESSAGE("strided attention S ", c.S, " cp ", c.cp, " rank ", c.rank, ": ", path);
#ifdef TETRA_HAVE_CUDNN
    CHECK(path.rfind("cudnn", 0) == 0);
#endif
    const bool cudnn = path.rfind("cudnn", 0) == 0;
    check_bf16_against_cpu(part(c, false), cudnn ? kFused : kOneRounding);
    check_bf16_against_cpu(part(c, true), kFp32);
    // The fallback on the device: one rounding from the CPU's bf16 reference.
    auto cpu = make_mixed_precision_backend(make_cpu_backend(1));
    check_outputs(*cpu, *fallback, part(c, false), kOneRounding);
  }
}

#endif  // TETRA_HAVE_CUDA
