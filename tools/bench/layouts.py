#!/usr/bin/env python3
"""Side-by-side measurements for the closing notes and for users: runs `tetra train` at
several layouts in one go and prints one table per question, with ratios to the first row.

    python3 tools/bench/layouts.py single dp tp pp zb ckpt     (any subset; default: all)

Each run writes --metrics to a temp file; the table reports the median of the steps after
the first (step 0 includes warm-up). Needs a built build/tetra (bash tools/setup.sh).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TETRA = os.path.join(ROOT, "build", "tetra")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")

# The model of the closing notes, tetra's bench preset (plan/preset.cpp): dim 512, 8 layers,
# 8 heads, seq 256, global batch 8.
DIM512 = ["--preset", "bench"]


def run(ranks, args, steps=4):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = ([] if ranks == 1 else ["mpirun", "-np", str(ranks)]) + [
            TETRA, "train", "--steps", str(steps), "--metrics", metrics] + args
        t0 = time.time()
        out = subprocess.run(cmd, env=ENV, capture_output=True, text=True)
        wall = time.time() - t0
        if out.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr}")
        rows = [json.loads(line) for line in open(metrics)]
    steady = rows[1:] if len(rows) > 1 else rows
    med = lambda key: statistics.median(r[key] for r in steady)
    return {"step_ms": med("step_ms"), "tok_s": med("tokens_per_s"), "mfu": med("mfu"),
            "comm": med("comm_share"), "bubble": med("bubble"),
            "formula": steady[0]["bubble_formula"], "loss": rows[-1]["loss"], "wall": wall,
            "at_costs": statistics.median(r.get("bubble_at_measured_costs", 0) for r in steady),
            "pass_ms": {k: [statistics.median(r["pass_ms"][k][c] for r in steady)
                            for c in range(len(v))]
                        for k, v in steady[0].get("pass_ms", {}).items()},
            "peak": max(r["peak_memory_bytes"] for r in rows),
            "stdout": out.stdout}


def table(title, header, rows):
    print(f"\n{title}")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for r in rows:
        print(" | ".join(str(x) for x in r))
    sys.stdout.flush()


def single():
    rows = []
    for name, args in [("default demo model, 1 rank", []), ("dim 512 model, 1 rank", DIM512)]:
        r = run(1, args, steps=6)
        rows.append([name, f"{r['tok_s']:.0f}", f"{100 * r['mfu']:.1f}%", f"{r['step_ms']:.1f}"])
    table("Single rank (tokens/s, MFU against the start-up GEMM probe)",
          ["run", "tokens/s", "MFU", "step ms"], rows)


def dp():
    rows, base = [], None
    for dp in (1, 2, 4):
        for zero in (1, 2, 3):
            r = run(dp, DIM512 + ["--dp", str(dp), "--zero", str(zero), "--micro-batch", "2"])
            base = base or r["step_ms"]
            rows.append([dp, zero, f"{r['step_ms']:.0f}", f"{r['step_ms'] / base:.2f}",
                         f"{100 * r['comm']:.1f}%", f"{r['tok_s']:.0f}"])
    table("Data parallelism on the dim-512 model (2 cores shared by all ranks)",
          ["DP", "ZeRO", "step ms", "x DP1", "comm share", "tokens/s"], rows)


def tp():
    rows, base = [], None
    for tp in (1, 2, 4):
        for sp in ([], ["--sp"]) if tp > 1 else ([],):
            r = run(tp, DIM512 + ["--tp", str(tp)] + sp)
            base = base or r["step_ms"]
            rows.append([tp, "on" if sp else "off", f"{r['step_ms']:.0f}",
                         f"{r['step_ms'] / base:.2f}", f"{100 * r['comm']:.1f}%"])
    table("Tensor parallelism on the dim-512 model", ["TP", "SP", "step ms", "x TP1", "comm share"],
          rows)


def pp():
    # Equal-cost stages: 8 blocks, 2 per stage; the embedding and a 256-row head are small
    # next to a block of width 256 and ffn 768.
    model = ["--dim", "256", "--layers", "8", "--heads", "8", "--kv-heads", "4", "--ffn-dim",
             "768", "--seq-len", "128", "--micro-batch", "1"]
    rows = []
    for sched, vpp in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2)):
        for m in (4, 8, 16):
            r = run(4, model + ["--pp", "4", "--schedule", sched, "--vpp", str(vpp),
                                "--global-batch", str(m)])
            rows.append([sched, vpp, m, f"{100 * r['bubble']:.1f}%", f"{100 * r['formula']:.1f}%",
                         f"{r['step_ms']:.0f}"])
    table("Pipeline bubble at PP 4 (idle / step)",
          ["schedule", "V", "m", "measured", "formula", "step ms"], rows)


def zb():
    # ZB-H1 and ZB-V beside 1F1B on pp()'s model, each m in one go (8 blocks: 4 per stage at
    # PP 2, 2 at PP 4; under zb-v's V two chunks of half a stage per rank, rank 0 holding the
    # embedding and the head). PP 2 gives each rank a core of its own (mpirun binds two ranks
    # to one core each); PP 4 shares the 2 cores among 4 ranks, whose waits then include
    # waiting for a core. Three bubbles, each the idle share of the step: measured (time
    # blocked in pipeline receives), the schedule's at the passes' measured costs (the
    # simulator run with each chunk's mean F, B, W, communication free), and the formula (F,
    # B, W of equal cost). Peak memory is the fullest rank's (the metrics' record).
    model = ["--dim", "256", "--layers", "8", "--heads", "8", "--kv-heads", "4", "--ffn-dim",
             "768", "--seq-len", "128", "--micro-batch", "1"]
    for pp, ms, title in (
            (2, (2, 4, 8), "PP 2, one rank per core"),
            (4, (4, 8, 16), "PP 4, oversubscribed: 4 ranks on 2 cores")):
        rows = []
        for m in ms:
            for sched in ("1f1b", "zb-h1", "zb-v"):
                r = run(pp, model + ["--pp", str(pp), "--schedule", sched, "--global-batch",
                                     str(m)], steps=6)
                passes = "/".join(f"{statistics.mean(r['pass_ms'][k]):.2f}"
                                  for k in ("F", "B", "W") if k in r["pass_ms"])
                rows.append([sched, m, f"{100 * r['bubble']:.1f}%",
                             f"{100 * r['at_costs']:.1f}%", f"{100 * r['formula']:.1f}%",
                             passes, f"{r['step_ms']:.0f}", f"{r['peak'] / 2**20:.2f}",
                             f"{r['loss']:.4f}"])
        table(f"Zero-bubble ZB-H1 and ZB-V against 1F1B, {title} (bubble: idle / step; "
              "pass ms: mean over chunks, F/B/W, 1f1b's B the whole backward)",
              ["schedule", "m", "measured", "at measured costs", "formula", "pass ms",
               "step ms", "peak MiB (fullest rank)", "loss"], rows)


def ckpt():
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "ck")
        r = run(1, DIM512 + ["--ckpt-dir", d, "--ckpt-every", "2"], steps=2)
        saved = [l for l in r["stdout"].splitlines() if l.startswith("checkpoint:")]
        size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(d) for f in fs)
        t0 = time.time()
        r2 = run(1, DIM512 + ["--ckpt-dir", d], steps=3)
        resumed = [l for l in r2["stdout"].splitlines() if l.startswith("resumed")]
        table("Checkpoint of the dim-512 model (1 rank)", ["what", "value"],
              [["write", saved[-1] if saved else "?"], ["size on disk", f"{size / 2**20:.1f} MiB"],
               ["resume", resumed[0] if resumed else "?"]])


if __name__ == "__main__":
    parts = sys.argv[1:] or ["single", "dp", "tp", "pp", "zb", "ckpt"]
    for p in parts:
        globals()[p]()
