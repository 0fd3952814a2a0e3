#!/usr/bin/env python3
"""Checkpoint stalls, blocking against --ckpt-async, side by side in one run:

    python3 tools/bench/ckpt_async.py [demo] [large]       (default: both)

demo:  the demo (--preset demo, TP 2 x CP 2 x PP 2 x DP 2 on 16 ranks), a checkpoint every
       2 steps of 6.
large: one rank of a model of 25 M parameters (dim 512, 8 layers) whose checkpoint (each
       parameter's weight and two Adam moments in fp32, 300 MB) takes seconds to write and
       flush; a checkpoint every 2 steps.

For each mode the table gives the checkpoints' median time to install ("saved in", from the
copy to `latest` moved) and median stall (the time training stopped for them), both over the
checkpoints before the last (the end of a run waits for its checkpoint), the run's wall time,
and the ratios async / blocking. Needs a built build/tetra; say the machine's load with the
figures (it is printed first).
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TETRA = os.path.join(ROOT, "build", "tetra")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
SAVED = re.compile(r"checkpoint: step (\d+) saved to \S+ in ([0-9.]+) s \(stall ([0-9.]+) s\)")

# The bench preset's layers (dim 512, 8 layers, FFN 1536) on short sequences, so that its
# steps are short next to the write of its checkpoint.
LARGE = ["--dim", "512", "--layers", "8", "--heads", "8", "--kv-heads", "4", "--ffn-dim", "1536",
         "--seq-len", "64", "--global-batch", "2"]


def run(ranks, args, asynchronous):
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        cmd = (["mpirun", "--bind-to", "none", "-np", str(ranks)] if ranks > 1 else []) + [
            TETRA, "train", "--ckpt-dir", os.path.join(tmp, "ck"), "--keep", "1"] + args + (
            ["--ckpt-async"] if asynchronous else [])
        t0 = time.time()
        out = subprocess.run(cmd, env=ENV, capture_output=True, text=True)
        wall = time.time() - t0
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr}")
    saved = [(int(s), float(t), float(st)) for s, t, st in SAVED.findall(out.stdout)]
    periodic = saved[:-1] or saved  # the last one is waited for: the run ends with it
    return {"saved": statistics.median(t for _, t, _ in periodic),
            "stall": statistics.median(st for _, _, st in periodic),
            "last_stall": saved[-1][2], "n": len(saved), "wall": wall}


def compare(title, ranks, args):
    sync = run(ranks, args, False)
    asyn = run(ranks, args, True)
    print(f"\n{title}")
    print("mode | checkpoints | saved in (median) | stall (median) | last (waited) | run wall")
    print("--- | --- | --- | --- | --- | ---")
    for name, r in [("blocking", sync), ("--ckpt-async", asyn)]:
        print(f"{name} | {r['n']} | {r['saved']:.3f} s | {r['stall']:.3f} s | "
              f"{r['last_stall']:.3f} s | {r['wall']:.1f} s")
    ratio = asyn["stall"] / sync["stall"] if sync["stall"] > 0 else float("nan")
    print(f"async / blocking: stall {ratio:.3f}x, run wall {asyn['wall'] / sync['wall']:.2f}x")
    sys.stdout.flush()


def demo():
    compare("The demo, 16 ranks: a checkpoint every 2 steps of 6", 16,
            ["--preset", "demo", "--steps", "6", "--ckpt-every", "2"])


def large():
    compare("25 M parameters (a 300 MB checkpoint), 1 rank: a checkpoint every 2 steps of 8", 1,
            LARGE + ["--steps", "8", "--ckpt-every", "2", "--peak-tflops", "1"])


if __name__ == "__main__":
    print("load:", open("/proc/loadavg").read().split()[:3])
    for part in sys.argv[1:] or ["demo", "large"]:
        globals()[part]()
