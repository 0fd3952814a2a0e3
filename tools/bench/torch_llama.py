#!/usr/bin/env python3
"""PyTorch training the same Llama as tetra, for tools/bench/gpu.sh and tools/bench/cpu.py: the
fair comparison.

The model: token embedding, L blocks of [RMSNorm (fp32 statistics), attention with grouped KV
heads and rotate-half RoPE from an fp64 table, residual, RMSNorm, SwiGLU MLP, residual], final
RMSNorm, untied LM head, no biases. AdamW (betas 0.9, 0.95, eps 1e-8, weight decay 0.1 on 2-D
tensors); clip 1.0; mean cross-entropy over all tokens; the micro-batch and global batch given
(gradient accumulation between); random tokens already on the device; no activation
checkpointing, no CUDA graphs. Warm-up (and compilation) excluded.

On a GPU (--device cuda): fp32 master weights under bf16 autocast, fused AdamW, attention
F.scaled_dot_product_attention(is_causal=True, enable_gqa=True), eager or under torch.compile;
CUDA-event timing over the measured steps. On the CPU (--device cpu): fp32 throughout, AdamW
with foreach (fused is CUDA's), attention as scaled_dot_product_attention where this torch has
it with enable_gqa, else (Debian 12's torch 1.13) the same math composed of eager ops (K and V
repeated over their query heads, masked softmax); torch.set_num_threads(--threads) and wall-clock
timing per step. --ddp trains under DistributedDataParallel over gloo, one process per rank
started by the caller (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment), each rank
taking global-batch / WORLD_SIZE sequences; its gradients are views into DDP's buckets
(gradient_as_bucket_view, which saves a copy of every gradient a step: DDP over two one-thread
ranks of the CPU benchmark's model 1,784-1,797 ms a step against 1,855-1,869 without; a bigger
bucket_cap_mb, 100, and static_graph changed nothing or were slower).

MFU with tetra's formula, F = 6 N + 12 L d S per token (N: parameters in matrix products)
against the peak. Prints one JSON line: tokens_per_s, mfu, step_ms (the median of the measured
steps), step_ms_mean, peak_memory_bytes (CUDA), params_matmul, mode, device, torch; with --json
FILE also writes it to FILE alone, for the benchmark scripts to read apart from what PyTorch and
Inductor print. Under --ddp only rank 0 prints and writes.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def rope_table(seq, hd, theta):
    inv = theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = torch.outer(torch.arange(seq, dtype=torch.float64), inv)
    return ang.cos().float(), ang.sin().float()


def rotate(x, cos, sin):  # x [B, H, S, hd], rotate-half
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def sdpa_gqa():
    """Whether this torch's scaled_dot_product_attention takes enable_gqa (2.5 on)."""
    try:
        q = torch.zeros(1, 2, 1, 2)
        F.scaled_dot_product_attention(q, q[:, :1], q[:, :1], is_causal=True, enable_gqa=True)
        return True
    except (AttributeError, TypeError):
        return False


SDPA_GQA = sdpa_gqa()


def attend(q, k, v):  # q [B, H, S, hd], k, v [B, KV, S, hd]: causal softmax(q k^T / sqrt(hd)) v
    if SDPA_GQA:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    S = q.shape[2]
    mask = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
    return s.masked_fill(mask, float("-inf")).softmax(-1) @ v


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        hd = a.dim // a.heads
        self.h, self.kv, self.hd = a.heads, a.kv_heads, hd
        self.n1, self.n2 = RMSNorm(a.dim), RMSNorm(a.dim)
        self.q = nn.Linear(a.dim, a.heads * hd, bias=False)
        self.k = nn.Linear(a.dim, a.kv_heads * hd, bias=False)
        self.v = nn.Linear(a.dim, a.kv_heads * hd, bias=False)
        self.o = nn.Linear(a.heads * hd, a.dim, bias=False)
        self.gate = nn.Linear(a.dim, a.ffn_dim, bias=False)
        self.up = nn.Linear(a.dim, a.ffn_dim, bias=False)
        self.down = nn.Linear(a.ffn_dim, a.dim, bias=False)

    def forward(self, x, cos, sin):
        B, S, _ = x.shape
        n = self.n1(x)
        q = self.q(n).view(B, S, self.h, self.hd).transpose(1, 2)
        k = self.k(n).view(B, S, self.kv, self.hd).transpose(1, 2)
        v = self.v(n).view(B, S, self.kv, self.hd).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        a = attend(q, k, v)
        x = x + self.o(a.transpose(1, 2).reshape(B, S, -1))
        n = self.n2(x)
        return x + self.down(F.silu(self.gate(n)) * self.up(n))


class Llama(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed = nn.Embedding(a.vocab, a.dim)
        self.blocks = nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = RMSNorm(a.dim)
        self.head = nn.Linear(a.dim, a.vocab, bias=False)
        cos, sin = rope_table(a.seq_len, a.dim // a.heads, a.rope_theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x, self.cos, self.sin)
        logits = self.head(self.norm(x)).float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    p = argparse.ArgumentParser()
    for name, default in [("dim", 1024), ("layers", 24), ("heads", 16), ("kv-heads", 8),
                          ("ffn-dim", 2816), ("seq-len", 1024), ("vocab", 32000),
                          ("micro-batch", 8), ("global-batch", 8), ("steps", 25), ("warmup-steps", 5),
                          ("threads", 0)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--peak-tflops", type=float, default=989.0)
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--ddp", action="store_true", help="DistributedDataParallel over gloo (CPU)")
    p.add_argument("--json", metavar="FILE", help="also write the result to FILE")
    a = p.parse_args()
    dev = a.device
    cuda = dev == "cuda"
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    world, rank = 1, 0
    if a.ddp:
        torch.distributed.init_process_group("gloo")
        world, rank = torch.distributed.get_world_size(), torch.distributed.get_rank()
    if a.mode == "compile" and not hasattr(torch, "compile"):
        sys.exit(f"torch_llama: torch {torch.__version__} has no torch.compile")
    torch.manual_seed(0)
    model = Llama(a).to(dev)
    trained = (torch.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=True)
               if a.ddp else model)
    step_fn = torch.compile(trained) if a.mode == "compile" else trained
    decay = [q for q in model.parameters() if q.dim() == 2]
    rest = [q for q in model.parameters() if q.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8,
                            **({"fused": True} if cuda else {"foreach": True}))
    local = a.global_batch // world
    accum = local // a.micro_batch
    gen = torch.Generator(device=dev).manual_seed(1 + rank)
    data = torch.randint(0, a.vocab, (local, a.seq_len + 1), device=dev, generator=gen)

    def step():
        for j in range(accum):
            seqs = data[j * a.micro_batch:(j + 1) * a.micro_batch]
            if cuda:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = step_fn(seqs[:, :-1], seqs[:, 1:]) / accum
            else:
                loss = step_fn(seqs[:, :-1], seqs[:, 1:]) / accum
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(a.warmup_steps):
        step()
    times = []
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.steps):
            step()
        end.record()
        torch.cuda.synchronize()
        ms = mean = start.elapsed_time(end) / a.steps
    else:
        for _ in range(a.steps):
            t0 = time.perf_counter()
            step()
            times.append(1e3 * (time.perf_counter() - t0))
        ms, mean = statistics.median(times), statistics.mean(times)
    hd = a.dim // a.heads
    n_matmul = a.layers * (2 * a.dim * a.heads * hd + 2 * a.dim * a.kv_heads * hd
                           + 3 * a.dim * a.ffn_dim) + a.vocab * a.dim
    flops = 6 * n_matmul + 12 * a.layers * a.dim * a.seq_len
    tok_s = a.global_batch * a.seq_len / (ms / 1e3)
    result = json.dumps({"mode": a.mode, "device": dev, "ranks": world, "tokens_per_s": tok_s,
                         "step_ms": ms, "step_ms_mean": mean, "step_ms_all": times,
                         "mfu": tok_s * flops / (a.peak_tflops * 1e12),
                         "peak_memory_bytes": torch.cuda.max_memory_allocated() if cuda else 0,
                         "params_matmul": n_matmul, "torch": torch.__version__,
                         "threads": torch.get_num_threads(), "sdpa_gqa": SDPA_GQA})
    if a.ddp:
        torch.distributed.destroy_process_group()
    if rank == 0:
        print(result)
        if a.json:
            with open(a.json, "w") as f:
                f.write(result + "\n")


if __name__ == "__main__":
    sys.exit(main())
