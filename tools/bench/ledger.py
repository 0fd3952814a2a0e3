#!/usr/bin/env python3
"""A model of one tetra training step on one H200 in bf16, printed as a ledger: every kernel,
GEMM and cuDNN attention call the step makes (one GPU: TP = CP = PP = DP = 1, ZeRO 1, no
recomputation, as tools/bench/gpu.sh runs it), with its calls per step, FLOPs, bytes read and
written, and its time at the H200's bandwidth and peak; totals per category, the step time,
tokens/s and the predicted MFU, for the plain path and the fused path of [22/29] side by side.

    python3 tools/bench/ledger.py                       the 350m benchmark model
    python3 tools/bench/ledger.py --model 124m
    python3 tools/bench/ledger.py --dim 2048 --layers 16 --heads 16 --kv-heads 4 ...
    python3 tools/bench/ledger.py --unfused classifier,vector_io   fused column with those off
    python3 tools/bench/ledger.py --measured gpu_bench/350m.timing.txt  (or bench.txt)

The calls are those of transformer/block.cpp, transformer/chunk.cpp, parallel/tp.cpp,
parallel/zero.cpp, optim/, train/trainer.cpp and backend/cuda/ at main 6fae71e (the plain path).
The fused column models the switches of backend/fusions.hpp as the issue describes them, and
item 3 (groups of one take no communicator, NCCL without host waits); the plain column has
NCCL communicators of size 1 with a host wait per call. A step has no casts (AdamW writes
the bf16 copy of the weights itself). Every rate below is stated with its source in
assumptions() and printed in the output's header; none was fitted to a measurement.
Nothing here has been checked against a GPU: --measured puts a device run's per-category
times beside the prediction. Standard library only.
"""

import argparse
import math
import re
import sys

FUSIONS = ("rope_in_place", "norm_residual", "classifier", "vector_io", "wgrad_beta0",
           "grad_alias", "embedding_spread")
PRESETS = {"350m": dict(dim=1024, layers=24, heads=16, kv_heads=8, ffn_dim=2816),
           "124m": dict(dim=768, layers=12, heads=12, kv_heads=12, ffn_dim=2048)}
COMMON = dict(seq_len=1024, vocab=32000, micro_batch=8, global_batch=8)
CATEGORIES = ("GEMM", "attention", "norm", "rope", "swiglu", "residual", "CE", "embedding",
              "optimizer", "copies", "host waits")

PEAK = 989e12           # H200 SXM dense bf16 (H100/H200 SXM datasheet), MFU's denominator
HBM = 4.8e12            # H200 SXM HBM3e, bytes/s
SMS = 132               # H200 SXM streaming multiprocessors
GEMM_CEIL = 788e12      # cuBLASLt bf16 at 8192^3 (measured, shared/gpu/README.md)
TILE = (128, 256)       # cuBLASLt's Hopper bf16 CTA tile for large problems
K_RAMP = 256            # k-equivalent of a tile's pipeline fill and epilogue (4 stages of 64)
ATTN_FWD = 373e12       # cuDNN, H100 SXM5, bf16, hd 64, seq 1k, no mask (FlashAttention-3
ATTN_BWD = 348e12       # paper, Shah et al. 2024, figs. 5-6): compute-bound, H200 has the same
ATTN_TILE = 128         # query/key tile: causal diagonal tiles are computed whole
BW_SCALAR = 0.45        # 2-byte loads, one element a thread: 2-2.5 TB/s (review P1)
BW_VECTOR = 0.85        # 16-byte loads (and memcpy, cuBLAS/cuDNN I/O): STREAM-type copies
FLOOR = 2.5e-6          # per launch: a kernel is never shorter (launch, ramp, tail)
HOST_WAIT = 20e-6       # a host wait drains the queue: review item 5, 1.5-3 ms / ~105 waits
DEP_LOAD = 0.17e-6      # one dependent L2 load (~300 cycles at 1.98 GHz) + an L1 key load
LONGEST_RUN = 420       # longest run of one token in 8192 synthetic tokens (review: 300-540),
#                         scaled with the tokens of a micro-batch


def assumptions():
    return [
        f"H200 SXM: {PEAK / 1e12:.0f} TFLOP/s dense bf16, {HBM / 1e12:.1f} TB/s HBM3e, {SMS} SMs; "
        "the GPU is never idle but at host waits (the host queues ahead of it)",
        f"GEMM: t = max(2mnk / rate, bytes / ({BW_VECTOR:.2f} HBM), floor); rate = "
        f"{GEMM_CEIL / 1e12:.0f} TFLOP/s (cuBLASLt, 8192^3) x wave(m, n) / wave(8192^2) x "
        f"ramp(k) / ramp(8192), wave = tiles / (waves x {SMS}) for {TILE[0]}x{TILE[1]} tiles, "
        f"ramp = k / (k + {K_RAMP}), never above the 8192^3 rate; split-K s <= 4 "
        "(k/s >= 1024) where it fills the SMs better, its fp32 partials written and read; "
        "wgrad_beta0: the first micro-batch's wgrads (and norm dw sums) write, only the "
        "embedding's gradient is filled",
        f"attention (cuDNN SDPA): causal FLOPs (fwd 4 B H hd S(S+1)/2, bwd 2.5x fwd) at "
        f"{ATTN_FWD / 1e12:.0f} / {ATTN_BWD / 1e12:.0f} TFLOP/s fwd / bwd (cuDNN, H100 SXM5, "
        f"hd 64, seq 1k: FlashAttention-3 paper) x causal tile efficiency ({ATTN_TILE}^2 "
        "tiles, the diagonal computed whole); the deterministic backward's dP workspace is not "
        "timed",
        f"memory-bound: bytes / (f x HBM); f = {BW_VECTOR:.2f} with 16-byte loads (vector_io; "
        f"STREAM-type copies reach 85-90 % on Hopper), f = min({BW_VECTOR:.2f}, {BW_SCALAR:.2f} "
        f"x bytes per element / 2) with one element a thread (review P1: 2-2.5 TB/s for bf16; "
        "Little's law doubles it for fp32)",
        f"floor {FLOOR * 1e6:.1f} us a launch; host wait {HOST_WAIT * 1e6:.0f} us (review: "
        "1.5-3 ms for ~105 waits); NCCL at one rank moves nothing in place, copies out of place; "
        "the 3 syncs of a step (sums of squares, loss, step end) in both columns",
        f"embedding backward (plain): serial over the longest run ({LONGEST_RUN:.0f} of 8192 "
        "tokens, review's simulation of the synthetic data, scaled with T) x d/128 columns a "
        f"thread, {DEP_LOAD * 1e6:.2f} us a dependent L2 load; spread: the run over column "
        "groups, 4 loads in flight",
        "MFU = tokens/s x (6N + 12 L d S) / peak, N = matmul parameters with the LM head "
        "(model/config.cpp); 12 L d S counts full S^2 attention, about 2x the causal FLOPs here",
    ]


class Shape:
    def __init__(self, dim, layers, heads, kv_heads, ffn_dim, seq_len, vocab, micro_batch,
                 global_batch):
        self.d, self.L, self.H, self.KV, self.F = dim, layers, heads, kv_heads, ffn_dim
        self.S, self.Vr, self.B = seq_len, vocab, micro_batch
        if dim % heads or heads % kv_heads or (dim // heads) % 2 or global_batch % micro_batch:
            raise SystemExit("ledger: heads must divide dim (even head_dim), kv-heads heads, "
                             "micro-batch global-batch")
        self.V = vocab if vocab > 1 << 24 else (vocab + 127) // 128 * 128  # padded_vocab()
        self.hd = dim // heads
        self.qw, self.kw = heads * self.hd, kv_heads * self.hd
        self.qkvw = self.qw + 2 * self.kw
        self.T = micro_batch * seq_len
        self.mbs = global_batch // micro_batch
        self.tokens = global_batch * seq_len

    def matmul_params(self):  # model/config.cpp: the N of 6N
        attn = self.d * self.qw * 2 + self.d * self.kw * 2
        return self.L * (attn + 3 * self.d * self.F) + self.V * self.d

    def block_params(self):
        return (self.matmul_params() - self.V * self.d) // self.L + 2 * self.d

    def flops_per_token(self):
        return 6 * self.matmul_params() + 12 * self.L * self.d * self.S

    def describe(self):
        return (f"dim {self.d}, {self.L} layers, {self.H} heads ({self.KV} KV, head_dim "
                f"{self.hd}), ffn {self.F}, seq {self.S}, vocab {self.Vr}"
                + (f" (padded to {self.V})" if self.V != self.Vr else "")
                + f"; micro-batch {self.B}, {self.mbs} micro-batch(es), {self.tokens} tokens "
                "a step")


class Op:
    """One kernel (or library call) of the step: `count` calls, each of `flops`, reading `rd`
    and writing `wr` bytes in `t` seconds."""

    def __init__(self, cat, name, count, flops, rd, wr, t):
        self.cat, self.name, self.count = cat, name, count
        self.flops, self.rd, self.wr, self.t = flops, rd, wr, t


def bandwidth(elem, vector):
    return (BW_VECTOR if vector else min(BW_VECTOR, BW_SCALAR * elem / 2)) * HBM


def gemm_time(m, n, k):
    """Seconds for one bf16 GEMM [m, k] x [k, n] by the rule in assumptions()."""
    def wave(units):
        return units / (math.ceil(units / SMS) * SMS)

    def ramp(kk):
        return kk / (kk + K_RAMP)

    ref = wave(math.ceil(8192 / TILE[0]) * math.ceil(8192 / TILE[1])) * ramp(8192)
    best = math.inf
    for tm, tn in (TILE, TILE[::-1]):
        tiles = math.ceil(m / tm) * math.ceil(n / tn)
        for s in range(1, 5):
            if s > 1 and k / s < 1024:
                break
            rate = GEMM_CEIL * min(1.0, wave(tiles * s) * ramp(k / s) / ref)
            partials = 2 * s * m * n * 4 / (BW_VECTOR * HBM) if s > 1 else 0
            best = min(best, 2 * m * n * k / rate + partials)
    return best


class Step:
    """The ledger of one step: fusions `on` (a set of FUSIONS), `comm_fix` for item 3."""

    def __init__(self, shape, on, comm_fix):
        self.s, self.on, self.comm_fix = shape, frozenset(on), comm_fix
        self.ops = []
        self.build()

    def fused(self, name):
        return name in self.on

    def add(self, cat, name, count, flops, rd, wr, t):
        if count > 0:
            self.ops.append(Op(cat, name, count, flops, rd, wr, t))

    def mem(self, cat, name, count, rd, wr, elem=2, launches=1, vector=None):
        vec = self.fused("vector_io") if vector is None else vector
        t = max(launches * FLOOR, (rd + wr) / bandwidth(elem, vec))
        self.add(cat, name, count, 0, rd, wr, t)

    def copy(self, name, count, nbytes, cat="copies"):
        """cudaMemcpyAsync: read and write at the vector rate."""
        self.add(cat, name, count, 0, nbytes, nbytes,
                 max(FLOOR, 2 * nbytes / bandwidth(4, True)))

    def gemm(self, name, count, m, n, k, out=2, c=0):
        """D [m, n] (out bytes an element) = A B (+ C, c bytes an element)."""
        rd, wr = 2 * (m * k + k * n) + c * m * n, out * m * n
        t = max(FLOOR, gemm_time(m, n, k), (rd + wr) / (BW_VECTOR * HBM))
        self.add("GEMM", f"{name} [{m}x{n}x{k}]", count, 2 * m * n * k, rd, wr, t)

    def wait(self, name, count, nccl=True):
        if not (nccl and self.comm_fix):
            self.add("host waits", name, count, 0, 0, 0, HOST_WAIT)

    def attention(self, count, backward):
        s = self.s
        fwd = 2 * s.B * s.H * s.hd * s.S * (s.S + 1)  # 4 B H hd S(S+1)/2
        n = math.ceil(s.S / ATTN_TILE)
        eff = s.S * (s.S + 1) / 2 / (n * (n + 1) / 2 * ATTN_TILE ** 2)
        io, lse = 2 * s.T * s.qkvw, 4 * s.B * s.H * s.S
        if not backward:
            self.add("attention", "cuDNN SDPA forward, causal", count, fwd, io,
                     2 * s.T * s.qw + lse, max(FLOOR, fwd / (ATTN_FWD * eff)))
            return
        # Reads q, k, v, out, dout, lse and its fp32 dq accumulator; writes dq, dk, dv and it.
        rd, wr = io + 8 * s.T * s.qw + lse, io + 4 * s.T * s.qw
        self.add("attention", "cuDNN SDPA backward, causal (recomputes QK^T)", count,
                 5 * fwd // 2, rd, wr, max(3 * FLOOR, 2.5 * fwd / (ATTN_BWD * eff)))

    def norm_backward(self, name, count, residual):
        s, td = self.s, 2 * self.s.T * self.s.d
        parts = math.ceil(s.T / 64)
        extra = td if residual else 0
        self.mem("norm", f"rmsnorm backward dx{' + residual' if residual else ''} ({name})",
                 count, 2 * td + 2 * s.d + 4 * s.T + extra, td)
        self.mem("norm", f"rmsnorm dw partials ({name})", count, 2 * td + 4 * s.T,
                 4 * parts * s.d)
        self.mem("norm", f"rmsnorm dw sum ({name})", count, 4 * parts * s.d + 4 * s.d, 4 * s.d,
                 elem=4)

    def build(self):
        self.step_start()
        self.forward()
        self.backward()
        self.step_end()

    def step_start(self):
        s, d, L = self.s, self.s.d, self.s.L
        # Step start: ZeroParams::begin_step fills every unit's fp32 gradients. Under
        # wgrad_beta0 the first micro-batch's GEMMs (and, modelled so, the norms' dw sums)
        # write their gradients, so only the embedding table, which the backward adds rows
        # into, is filled.
        if self.fused("wgrad_beta0"):
            self.mem("optimizer", "fill grads: embedding table", 1, 0, 4 * s.V * d, elem=4)
        else:
            self.mem("optimizer", "fill grads: embedding unit", 1, 0, 4 * s.V * d, elem=4)
            self.mem("optimizer", "fill grads: block unit", L, 0, 4 * s.block_params(), elem=4)
            self.mem("optimizer", "fill grads: head unit", 1, 0, 4 * (s.V * d + d), elem=4)
        self.copy("upload tokens, targets (pageable host)", 2 * s.mbs, 4 * s.T)

    def forward(self):
        s = self.s
        T, d, mb, n = s.T, s.d, s.mbs, s.L * s.mbs  # n: calls of a per-layer op
        td, tv, qk = 2 * T * d, 2 * T * s.V, 2 * T * (s.qw + s.kw)
        self.mem("embedding", "embedding forward (gather rows)", mb, 4 * T + td, td)
        self.wait("NCCL all-reduce: embedding (reduce_tokens at TP 1)", mb)
        self.mem("norm", "rmsnorm forward (input, post)", 2 * n, td + 2 * d, td + 4 * T)
        self.gemm("qkv forward", n, T, s.qkvw, d)
        if self.fused("rope_in_place"):
            self.mem("rope", "rope in place on q|k of qkv", n, qk, qk)
        else:
            self.mem("rope", "split q columns of qkv", n, 2 * T * s.qw, 2 * T * s.qw)
            self.mem("rope", "split k, v columns of qkv", 2 * n, 2 * T * s.kw, 2 * T * s.kw)
            self.mem("rope", "rope q", n, 2 * T * s.qw + 4 * T, 2 * T * s.qw)
            self.mem("rope", "rope k", n, 2 * T * s.kw + 4 * T, 2 * T * s.kw)
        self.attention(n, False)
        self.gemm("o forward + residual (epilogue)", n, T, d, s.qw, c=2)
        self.gemm("gate_up forward", n, T, 2 * s.F, d)
        self.mem("swiglu", "swiglu forward", n, 2 * 2 * T * s.F, 2 * T * s.F)
        self.gemm("down forward + residual (epilogue)", n, T, d, s.F, c=2)
        self.mem("norm", "rmsnorm forward (final)", mb, td + 2 * d, td + 4 * T)
        self.gemm("LM head forward", mb, T, s.V, d)
        if self.fused("classifier"):
            self.mem("CE", "fused classifier (softmax, loss, dlogits in place)", mb,
                     tv + 4 * T, tv + 8 * T)
        else:
            self.mem("CE", "ce row max", mb, tv, 4 * T)
            self.wait("NCCL all-reduce: CE row max", mb)
            self.mem("CE", "ce stats (sum of exp, target logit)", mb, tv + 8 * T, 8 * T)
            self.wait("NCCL all-reduce: CE stats", mb)
        self.copy("loss record (row max, stats: 4T and 8T bytes)", 2 * mb, 6 * T)

    def backward(self):
        s = self.s
        T, d, L, mb, n = s.T, s.d, s.L, s.mbs, s.L * s.mbs
        td, tv, qk = 2 * T * d, 2 * T * s.V, 2 * T * (s.qw + s.kw)
        if not self.fused("classifier"):
            self.mem("CE", "ce backward (dlogits in place)", mb, tv + 12 * T, tv)
        self.gemm("LM head dgrad", mb, T, d, s.V)
        self.wgrad("LM head wgrad", s.V, d, T)
        self.wait("NCCL all-reduce: head dgrad (reduce_tokens at TP 1)", mb)
        self.norm_backward("final", mb, False)
        self.gemm("down dgrad", n, T, s.F, d)
        self.wgrad("down wgrad", d, s.F, T, L)
        self.mem("swiglu", "swiglu backward", n, 2 * T * s.F + 2 * 2 * T * s.F, 2 * 2 * T * s.F)
        self.gemm("gate_up dgrad", n, T, d, 2 * s.F)
        self.wgrad("gate_up wgrad", 2 * s.F, d, T, L)
        self.wait("NCCL all-reduce: gate_up, qkv dgrad (reduce_tokens at TP 1)", 2 * n)
        self.norm_backward("post, input", 2 * n, self.fused("norm_residual"))
        if not self.fused("norm_residual"):
            self.mem("residual", "add residual gradient", 2 * n, 2 * td, td)
        self.gemm("o dgrad", n, T, s.qw, d)
        self.wgrad("o wgrad", d, s.qw, T, L)
        self.attention(n, True)
        if self.fused("rope_in_place"):
            self.mem("rope", "inverse rope in place on dq|dk of dqkv", n, qk, qk)
        else:
            self.mem("rope", "merge dq columns into dqkv", n, 2 * T * s.qw, 2 * T * s.qw)
            self.mem("rope", "merge dk, dv columns into dqkv", 2 * n, 2 * T * s.kw, 2 * T * s.kw)
            self.mem("rope", "inverse rope on dq|dk of dqkv", n, qk + 4 * T, qk)
        self.gemm("qkv dgrad", n, T, d, s.qkvw)
        self.wgrad("qkv wgrad", s.qkvw, d, T, L)
        self.embedding_backward(mb)

    def units(self):
        """(name, units of that kind, parameters of one) for the embedding, blocks, head."""
        s = self.s
        return (("embedding", 1, s.V * s.d), ("block", s.L, s.block_params()),
                ("head", 1, s.V * s.d + s.d))

    def step_end(self):
        s, L, mb, T = self.s, self.s.L, self.s.mbs, self.s.T
        # After each unit's last backward: the reduce-scatter over a data-parallel group of one.
        if not self.fused("grad_alias"):
            for name, cnt, x in self.units():
                self.copy(f"gradient shard copy, DP 1: {name} unit", cnt, 4 * x, cat="optimizer")
        self.wait("NCCL reduce-scatter of gradients (DP 1)", L + 2)
        # Gradient norm, loss, AdamW, the weights' all-gather, the step's sync.
        total = sum(cnt * x for _, cnt, x in self.units())
        segments = 1 + 9 * L + 2
        sets = math.ceil(segments / 64)
        self.mem("optimizer", "sum of squares partials", sets, 4 * total // sets,
                 8 * math.ceil(total / sets / 4096), elem=4)
        self.mem("optimizer", "sum of squares totals", sets, 8 * math.ceil(total / sets / 4096),
                 8 * 64, elem=4)
        self.copy("sums of squares to host", 1, 8 * segments)
        self.wait("sync: sums of squares download", 1, nccl=False)
        self.copy("loss parts into one buffer", mb, 12 * T)
        self.wait("sync: loss download", 1, nccl=False)
        # AdamW reads master, grad, m, v (fp32) and writes master, m, v and the bf16 copy.
        for name, cnt, x in self.units():
            self.mem("optimizer", f"AdamW: {name} unit", cnt, 16 * x, 14 * x, elem=4)
        self.wait("NCCL all-gather of weights (DP 1, in place)", L + 2)
        self.wait("sync: step end", 1, nccl=False)

    def wgrad(self, name, m, n, k, per_mb=1):
        """dW [m, n] fp32 += dy^T x: beta 0 on the first micro-batch under wgrad_beta0."""
        first = self.fused("wgrad_beta0")
        total = per_mb * self.s.mbs
        if first:
            self.gemm(name + " (beta 0)", per_mb, m, n, k, out=4)
        rest = total - (per_mb if first else 0)
        self.gemm(name + " (beta 1, fp32)", rest, m, n, k, out=4, c=4)

    def embedding_backward(self, mb):
        s, T = self.s, self.s.T
        self.mem("embedding", "embedding sort keys", mb, 4 * T, 8 * T, elem=4)
        self.mem("embedding", "CUB radix sort (t by token), 4 kernels", mb, 32 * T, 32 * T,
                 elem=4, launches=4, vector=True)
        rows = min(T, s.V)
        run = max(1.0, LONGEST_RUN * T / 8192)
        rd, wr = 2 * T * s.d + 8 * T + 4 * rows * s.d, 4 * rows * s.d
        if self.fused("embedding_spread"):
            chain = run * DEP_LOAD / 4
            t = max(FLOOR, chain, (rd + wr) / bandwidth(2, True))
            self.add("embedding", "embedding backward over (run, column group)", mb, 0, rd, wr, t)
        else:
            chain = run * math.ceil(s.d / 128) * DEP_LOAD
            t = max(FLOOR, chain, (rd + wr) / bandwidth(2, self.fused("vector_io")))
            self.add("embedding", "embedding backward, a block a run (serial)", mb, 0, rd, wr, t)

    def total(self, cat=None):
        return sum(o.count * o.t for o in self.ops if cat is None or o.cat == cat)

    def gemm_flops(self):
        return sum(o.count * o.flops for o in self.ops if o.cat == "GEMM")

    def attention_flops(self):
        return sum(o.count * o.flops for o in self.ops if o.cat == "attention")

    def waits(self):
        return sum(o.count for o in self.ops if o.cat == "host waits")

    def launches(self):
        return sum(o.count for o in self.ops if o.cat != "host waits")

    def tokens_per_s(self):
        return self.s.tokens / self.total()

    def mfu(self):
        return self.tokens_per_s() * self.s.flops_per_token() / PEAK


TUNABLE = ("PEAK", "HBM", "GEMM_CEIL", "K_RAMP", "ATTN_FWD", "ATTN_BWD", "BW_SCALAR",
           "BW_VECTOR", "FLOOR", "HOST_WAIT", "DEP_LOAD", "LONGEST_RUN")


def plain(shape):
    return Step(shape, (), False)


def fused(shape, unfused=()):
    return Step(shape, set(FUSIONS) - set(unfused), True)


def print_ledger(step, title, out):
    out.write(f"\n== {title}: {step.launches()} launches, {step.waits()} host waits a step ==\n")
    out.write(f"{'kernel':58} {'calls':>6} {'GFLOP':>8} {'MB read':>9} {'MB written':>10} "
              f"{'us/call':>9} {'ms/step':>8}\n")
    for cat in CATEGORIES:
        ops = [o for o in step.ops if o.cat == cat]
        if not ops:
            continue
        out.write(f"{cat}\n")
        for o in ops:
            out.write(f"  {o.name[:56]:56} {o.count:6d} {o.flops / 1e9:8.2f} {o.rd / 1e6:9.2f} "
                      f"{o.wr / 1e6:10.2f} {o.t * 1e6:9.1f} {o.count * o.t * 1e3:8.3f}\n")
        flops = sum(o.count * o.flops for o in ops)
        rate = f"  ({flops / step.total(cat) / 1e12:.0f} TFLOP/s)" if flops else ""
        out.write(f"  {'total ' + cat + rate:56} {sum(o.count for o in ops):6d} "
                  f"{flops / 1e9:8.0f} {sum(o.count * o.rd for o in ops) / 1e6:9.0f} "
                  f"{sum(o.count * o.wr for o in ops) / 1e6:10.0f} {'':9} "
                  f"{step.total(cat) * 1e3:8.3f}\n")
    out.write(f"  {'step':56} {'':6} {'':8} {'':9} {'':10} {'':9} {step.total() * 1e3:8.3f}\n")


def print_summary(p, f, unfused, out):
    out.write(f"\n== plain and fused, ms a step ==\n{'category':14} {'plain':>9} {'fused':>9} "
              f"{'gain':>9}\n")
    for cat in CATEGORIES:
        a, b = p.total(cat) * 1e3, f.total(cat) * 1e3
        out.write(f"{cat:14} {a:9.3f} {b:9.3f} {a - b:9.3f}\n")
    a, b = p.total() * 1e3, f.total() * 1e3
    out.write(f"{'step':14} {a:9.3f} {b:9.3f} {a - b:9.3f}\n")
    out.write(f"{'tokens/s':14} {p.tokens_per_s():9.0f} {f.tokens_per_s():9.0f}\n")
    out.write(f"{'MFU':14} {100 * p.mfu():8.1f}% {100 * f.mfu():8.1f}%\n")
    out.write(f"(fused: {fusions_line(unfused)}; plain: every fusion off, NCCL groups of one "
              "with host waits)\n")
    out.write("\n== each change's gain: the fused step with it off, minus the fused step ==\n")
    for name in FUSIONS:
        if name in unfused:
            out.write(f"{name:18} (off in the fused column)\n")
            continue
        off = fused(f.s, set(unfused) | {name})
        out.write(f"{name:18} {1e3 * (off.total() - f.total()):+8.3f} ms\n")
    no_item3 = Step(f.s, f.on, False)
    out.write(f"{'item 3 (comm)':18} {1e3 * (no_item3.total() - f.total()):+8.3f} ms "
              f"({no_item3.waits() - f.waits()} host waits)\n")


def fusions_line(unfused):
    if not unfused:
        return "all fusions on"
    if set(unfused) == set(FUSIONS):
        return "every fusion off"
    return "on except " + ", ".join(sorted(unfused))


MEASURED_LOG = re.compile(r"cuda time by category over (\d+) synchronizations: gemm ([0-9.]+) ms, "
                          r"attention ([0-9.]+) ms, other ([0-9.]+) ms \(stream total ([0-9.]+)")
# tools/bench/gpu.sh's bench.txt: the headline row (a run without timing events) and the split
# row of the shorter timed run.
MEASURED_ROW = re.compile(r"^(\S+)\s+tetra\s+([0-9.]+) tok/s", re.M)
MEASURED_SPLIT = re.compile(r"^(\S+)\s+tetra split\s+gemm (\d+)%\s+attention (\d+)%\s+other (\d+)%",
                            re.M)


def parse_measured(text, tokens_per_step, model=None):
    """Measured ms a step {gemm, attention, other, total} and where they came from: tetra's
    TETRA_CUDA_TIMING line (backend/cuda/category_times.hpp, sums over its synchronizations, one
    a step) or, from tools/bench/gpu.sh's bench.txt, its tetra row's tok/s and the split row's
    shares."""
    m = MEASURED_LOG.search(text)
    if m:
        syncs = int(m.group(1))
        g, a, o, t = (float(x) / syncs for x in m.groups()[1:])
        return {"gemm": g, "attention": a, "other": o, "total": t}, f"{syncs} synchronizations"
    rows = [r for r in MEASURED_ROW.finditer(text) if model is None or r.group(1) == model]
    splits = [r for r in MEASURED_SPLIT.finditer(text) if rows and r.group(1) == rows[0].group(1)]
    if rows and splits:
        r = rows[0]
        step = 1e3 * tokens_per_step / float(r.group(2))
        g, a, o = (int(x) / 100 * step for x in splits[0].groups()[1:])
        return ({"gemm": g, "attention": a, "other": o, "total": step},
                f"bench.txt row {r.group(1)}: tok/s and shares")
    return None, "no category line found"


def print_measured(p, f, text, model, out):
    got, source = parse_measured(text, p.s.tokens, model)
    out.write(f"\n== measured (ms a step, {source}) beside predicted ==\n")
    if got is None:
        out.write("nothing to compare: the file has neither tetra's 'cuda time by category' line "
                  "nor a bench.txt tetra row\n")
        return False
    out.write(f"{'category':10} {'measured':>9} {'plain':>9} {'ratio':>6} {'fused':>9} "
              f"{'ratio':>6}\n")
    for key in ("gemm", "attention", "other", "total"):
        def predicted(step):
            if key == "gemm":
                return step.total("GEMM") * 1e3
            if key == "attention":
                return step.total("attention") * 1e3
            rest = step.total() - step.total("GEMM") - step.total("attention")
            return (rest if key == "other" else step.total()) * 1e3
        a, b = predicted(p), predicted(f)
        out.write(f"{key:10} {got[key]:9.3f} {a:9.3f} {got[key] / a:6.2f} {b:9.3f} "
                  f"{got[key] / b:6.2f}\n")
    out.write("(other = stream total - gemm - attention: every other kernel and the GPU's idle "
              "time, with the timing events themselves)\n")
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(PRESETS), default="350m")
    for flag in ("dim", "layers", "heads", "kv-heads", "ffn-dim", "seq-len", "vocab",
                 "micro-batch", "global-batch"):
        ap.add_argument("--" + flag, type=int)
    ap.add_argument("--unfused", default="", metavar="LIST",
                    help="fusions off in the fused column (TETRA_UNFUSED's names, or all)")
    ap.add_argument("--detail", choices=("fused", "plain", "both", "none"), default="fused",
                    help="which column's kernels to list (default fused)")
    ap.add_argument("--measured", metavar="FILE", help="a tetra log or gpu.sh's bench.txt")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override an assumption, e.g. HOST_WAIT=1e-5 (the constants above "
                    "main() in this file)")
    a = ap.parse_args(argv)
    for item in a.set:
        key, _, value = item.partition("=")
        if key not in TUNABLE:
            ap.error(f"--set {key}: not one of {', '.join(TUNABLE)}")
        globals()[key] = float(value)
    names = [n for n in a.unfused.split(",") if n]
    unfused = set(FUSIONS) if names == ["all"] else set(names)
    bad = unfused - set(FUSIONS)
    if bad:
        ap.error(f"unknown fusion {', '.join(sorted(bad))} (known: {', '.join(FUSIONS)}, all)")
    cfg = dict(PRESETS[a.model], **COMMON)
    for key in cfg:
        if getattr(a, key) is not None:
            cfg[key] = getattr(a, key)
    shape = Shape(**cfg)
    p, f = plain(shape), fused(shape, unfused)
    out = sys.stdout
    name = a.model if cfg == dict(PRESETS[a.model], **COMMON) else "custom"
    out.write(f"tetra step ledger, one H200 SXM, bf16: {name} ({shape.describe()})\n"
              f"N = {shape.matmul_params()} matmul parameters, "
              f"{shape.flops_per_token() / 1e9:.3f} GFLOP a token (6N + 12 L d S)\n"
              "assumptions:\n")
    for line in assumptions():
        out.write(f"  - {line}\n")
    if a.detail in ("plain", "both"):
        print_ledger(p, "plain", out)
    if a.detail in ("fused", "both"):
        print_ledger(f, f"fused ({fusions_line(unfused)})", out)
    print_summary(p, f, unfused, out)
    if a.measured:
        with open(a.measured, errors="replace") as fh:
            if not print_measured(p, f, fh.read(), name if name in PRESETS else None, out):
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
