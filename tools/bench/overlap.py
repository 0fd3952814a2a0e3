#!/usr/bin/env python3
"""Communication hidden under compute (--overlap): DP 2 (ZeRO-1) and ZeRO-3 at DP 2, two ranks
bound to two cores (mpirun --bind-to core), one OpenMP thread a rank, overlap off and on side
by side in one run, the pairs alternated so that a change of the machine's load hits both.

    python3 tools/bench/overlap.py [--model bench|small] [--steps N] [--repeats R]

Per row, the medians of the steps after the first (step 0 warms up) over the repeats:
  step ms      the step time
  exposed      the time rank 0 spent in communication calls (comm_exposed_ms), share of step
  hidden       the time its queued collectives ran while it computed (comm_hidden_ms)
  hidden/all   hidden / (exposed + hidden): the part of the traffic the compute covered
  compute ms   step less exposed: what the communication thread costs the compute, on = off
and the step time ratio on/off. Needs a built build/tetra (bash tools/setup.sh); measure on a
quiet machine (uptime's load well under the core count) and say the load.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TETRA = os.path.join(ROOT, "build", "tetra")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")

MODELS = {
    # tetra's bench preset: dim 512, 8 layers, seq 256, global batch 8.
    "bench": ["--preset", "bench"],
    # A quarter of its compute per parameter: more of the step is communication.
    "small": ["--dim", "512", "--layers", "8", "--heads", "8", "--kv-heads", "8", "--ffn-dim",
              "1408", "--seq-len", "64", "--global-batch", "4"],
}


def run(args, steps):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = ["mpirun", "-np", "2", "--bind-to", "core", "--map-by", "core", "-x",
               "OMP_NUM_THREADS", TETRA, "train", "--steps", str(steps), "--metrics", metrics,
               "--dp", "2"] + args
        out = subprocess.run(cmd, env=ENV, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
        rows = [json.loads(line) for line in open(metrics)]
    return rows[1:] if len(rows) > 1 else rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=sorted(MODELS), default="bench")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    cases = [("DP 2 (ZeRO-1)", ["--zero", "1"]), ("ZeRO-3, DP 2", ["--zero", "3"])]
    steps = {}
    for _ in range(a.repeats):
        for name, args in cases:
            for overlap in ("off", "on"):
                rows = run(MODELS[a.model] + args + ["--overlap", overlap], a.steps)
                steps.setdefault((name, overlap), []).extend(rows)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    med = lambda rows, f: statistics.median(f(r) for r in rows)
    print(f"\nOverlap on the {a.model} model, 2 ranks on 2 cores, OMP_NUM_THREADS=1, "
          f"{a.repeats} x {a.steps - 1} timed steps")
    header = ["layout", "overlap", "step ms", "exposed", "hidden", "hidden/all", "compute ms",
              "step on/off"]
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for name, _ in cases:
        base = None
        for overlap in ("off", "on"):
            rows = steps[(name, overlap)]
            step = med(rows, lambda r: r["step_ms"])
            exposed = med(rows, lambda r: r["comm_exposed_ms"])
            hidden = med(rows, lambda r: r["comm_hidden_ms"])
            base = base or step
            print(" | ".join([name, overlap, f"{step:.1f}", f"{exposed:.1f} ms ({100 * exposed / step:.1f}%)",
                              f"{hidden:.1f} ms ({100 * hidden / step:.1f}%)",
                              f"{100 * hidden / max(exposed + hidden, 1e-9):.0f}%",
                              f"{step - exposed:.1f}", f"{step / base:.3f}"]))


if __name__ == "__main__":
    main()
