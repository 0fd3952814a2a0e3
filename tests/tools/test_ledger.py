#!/usr/bin/env python3
"""The GPU step ledger (tools/bench/ledger.py) against counts made here independently:
- its GEMMs' FLOPs add up to 6 N per token, N from model/config.cpp's formula, exactly;
- its attention FLOPs are the causal count (forward 4 B H hd S(S+1)/2, backward 2.5 times that);
- turning any fusion off, from any set of fusions on, never makes the predicted step faster,
  and the plain column (every fusion off, host waits) is slower than the fused one;
- the plain column's host waits are those of the one-GPU benchmark (review item 5);
- --measured reads tetra's category line (and a bench.txt row) and prints per-step values with
  their ratios beside the categories;
- the 350m prediction prints a tokens/s and an MFU for both columns.

Usage: test_ledger.py LEDGER. Exits 0 when every check holds, else 1."""

import importlib.util
import itertools
import os
import re
import subprocess
import sys
import tempfile

SHAPES = {
    "350m": dict(dim=1024, layers=24, heads=16, kv_heads=8, ffn_dim=2816, seq_len=1024,
                 vocab=32000, micro_batch=8, global_batch=8),
    "124m": dict(dim=768, layers=12, heads=12, kv_heads=12, ffn_dim=2048, seq_len=1024,
                 vocab=32000, micro_batch=8, global_batch=8),
    # padded vocabulary, GQA 4:1, three micro-batches a step, a sequence not a tile multiple
    "odd": dict(dim=384, layers=3, heads=6, kv_heads=2, ffn_dim=1000, seq_len=200, vocab=1000,
                micro_batch=2, global_batch=6),
}


def load(path):
    spec = importlib.util.spec_from_file_location("ledger", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def matmul_params(c):
    """model/config.cpp's matmul_params(), with the vocabulary padded to 128 as tetra pads it."""
    d, hd = c["dim"], c["dim"] // c["heads"]
    vocab = (c["vocab"] + 127) // 128 * 128
    attn = 2 * d * c["heads"] * hd + 2 * d * c["kv_heads"] * hd
    return c["layers"] * (attn + 3 * d * c["ffn_dim"]) + vocab * d


def main():
    path = sys.argv[1]
    ledger = load(path)
    failures = []

    def expect(ok, what):
        if not ok:
            failures.append(what)

    for name, c in SHAPES.items():
        shape = ledger.Shape(**c)
        tokens = c["global_batch"] * c["seq_len"]
        hd = c["dim"] // c["heads"]
        causal = c["micro_batch"] * c["heads"] * hd * c["seq_len"] * (c["seq_len"] + 1) // 2
        micro_batches = c["global_batch"] // c["micro_batch"]
        for step in (ledger.plain(shape), ledger.fused(shape)):
            g = step.gemm_flops()
            expect(g == 6 * matmul_params(c) * tokens,
                   f"{name}: GEMM FLOPs {g} != 6 N tokens = {6 * matmul_params(c) * tokens}")
            want = c["layers"] * micro_batches * (4 * causal + 10 * causal)
            a = step.attention_flops()
            expect(a == want, f"{name}: attention FLOPs {a} != causal count {want}")
            expect(all(o.t > 0 and o.count > 0 for o in step.ops), f"{name}: an op without time")
        # Every subset of fusions on, each fusion of it turned off: never faster.
        for k in range(len(ledger.FUSIONS) + 1):
            for on in itertools.combinations(ledger.FUSIONS, k):
                t = ledger.Step(shape, set(on), True).total()
                for f in on:
                    off = ledger.Step(shape, set(on) - {f}, True).total()
                    expect(off >= t, f"{name}: {f} off makes {sorted(on)} faster: {off} < {t}")
        p, f = ledger.plain(shape), ledger.fused(shape)
        expect(p.total() > f.total(), f"{name}: plain {p.total()} not above fused {f.total()}")
        expect(ledger.Step(shape, ledger.FUSIONS, False).total() > f.total(),
               f"{name}: item 3 off is not slower")
        # Host waits of the one-GPU plain step: per micro-batch 2 a layer (qkv and gate_up
        # dgrad), the embedding, 2 of the CE, the head's dgrad; per step a reduce-scatter and an
        # all-gather a unit; 3 syncs (sums of squares, loss, step end). The fused: the 3 syncs.
        L = c["layers"]
        expect(p.waits() == micro_batches * (2 * L + 4) + 2 * (L + 2) + 3,
               f"{name}: plain has {p.waits()} host waits")
        expect(f.waits() == 3, f"{name}: fused has {f.waits()} host waits")

    def run(*args):
        r = subprocess.run([sys.executable, path, *args], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    # The 350m prediction: both columns' tokens/s and MFU.
    rc, out = run("--model", "350m")
    m = re.search(r"^MFU\s+([0-9.]+)%\s+([0-9.]+)%", out, re.M)
    expect(rc == 0 and m is not None, f"350m: no MFU line (rc {rc}):\n{out[-2000:]}")
    if m:
        plain_mfu, fused_mfu = float(m.group(1)), float(m.group(2))
        expect(0 < plain_mfu < fused_mfu < 100, f"350m: MFU plain {plain_mfu}, fused {fused_mfu}")
    expect(re.search(r"^tokens/s\s+\d+\s+\d+", out, re.M) is not None, "350m: no tokens/s line")

    # --measured: tetra's line sums over 24 synchronizations (one a step).
    line = ("tetra: cuda time by category over 24 synchronizations: gemm 600.0 ms, attention "
            "120.0 ms, other 240.0 ms (stream total 960.0 ms)\n")
    bench = ("350m  tetra              200000 tok/s  MFU  44.4%  HFU  44.4%  peak  20.00 GiB  "
             "[cudnn sdpa (9.19.0), forward and backward]\n"
             "350m  tetra split    gemm 60%  attention 10%  other 30%  of 400 ms stream time over "
             "10 steps (TETRA_CUDA_TIMING=1, warm-up included)\n")
    with tempfile.TemporaryDirectory(prefix="ledger_") as tmp:
        for text, want in ((line, {"gemm": 25.0, "attention": 5.0, "other": 10.0, "total": 40.0}),
                           (bench, {"gemm": 24.576, "attention": 4.096, "other": 12.288,
                                    "total": 40.96})):
            log = os.path.join(tmp, "log.txt")
            with open(log, "w") as fh:
                fh.write("some other output\n" + text)
            rc, out = run("--model", "350m", "--detail", "none", "--measured", log)
            expect(rc == 0, f"--measured exits {rc}:\n{out[-2000:]}")
            for key, value in want.items():
                row = re.search(rf"^{key}" + r"\s+([0-9.]+)" * 5, out, re.M)
                if not row:
                    expect(False, f"--measured: no row {key}:\n{out[-1500:]}")
                    continue
                got, pp, rp, pf, rf = (float(x) for x in row.groups())
                expect(abs(got - value) < 1e-3, f"--measured {key}: {got} != {value}")
                expect(abs(rp - value / pp) < 0.006 and abs(rf - value / pf) < 0.006,
                       f"--measured {key}: ratios {rp}, {rf} for {value} / {pp}, {pf}")
        with open(os.path.join(tmp, "empty.txt"), "w") as fh:
            fh.write("no categories here\n")
        rc, out = run("--measured", os.path.join(tmp, "empty.txt"))
        expect(rc == 1 and "nothing to compare" in out, f"--measured without a line: rc {rc}")
    rc, out = run("--unfused", "rope_in_place,nonsense")
    expect(rc == 2 and "nonsense" in out, f"an unknown fusion is not refused: rc {rc}")

    for f in failures:
        print("FAIL:", f)
    print(f"test_ledger: {'ok' if not failures else f'{len(failures)} failures'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
