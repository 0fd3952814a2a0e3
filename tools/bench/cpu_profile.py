#!/usr/bin/env python3
"""Where one step of the CPU benchmark's model goes on one thread, by op, from perf samples:

    python3 tools/bench/cpu_profile.py [--steps 4] [--tetra PATH] [--keep perf.data]

tetra trains tools/bench/cpu.py's model (d 512, 8 layers, FFN 1408, S 256, 8 sequences a step,
fp32, AdamW) on one thread; perf (linux-perf) samples the process from the end of the first step
to the end of the run, so that start-up and the first step's page faults are left out. Each
sampled function is put in a part of the step (the products' kernel and their packing in
OpenBLAS, each op of the CPU backend, the kernel's own time), and the table gives each part's
CPU milliseconds a step and share. Samples are CPU time, so the table holds on a loaded machine
too; the milliseconds are this machine's.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = ["--dim", "512", "--layers", "8", "--heads", "8", "--kv-heads", "4", "--ffn-dim", "1408",
         "--seq-len", "256", "--vocab", "256", "--global-batch", "8", "--micro-batch", "8"]
HZ = 1999
# (part, pattern of "dso [kind] symbol"), first match wins.
PARTS = [
    ("products: OpenBLAS kernel", r"sgemm_kernel|sgemm_small"),
    ("products: packing A and B", r"sgemm_.*copy"),
    ("products: C scaled by beta", r"sgemm_beta"),
    ("attention: softmax (exp, max)", r"exp_masked|masked_max|softmax_masked"),
    ("attention: the rest (dS, loops)", r"cpu_attention"),
    ("SwiGLU forward and backward", r"swiglu|expf"),
    ("RMSNorm backward", r"rmsnorm_grad"),
    ("RMSNorm forward", r"rmsnorm_forward"),
    ("RoPE", r"rotate|rope|sincos|__cos|__sin|pow"),
    ("AdamW", r"adamw"),
    ("gradient norm (sum_squares)", r"sum_squares"),
    ("memset (the BLAS zeroing C for beta = 0)", r"memset"),
    ("fill, add, copies", r"::fill|::add|memmove|memcpy|copy_columns|::copy"),
    ("cross-entropy, embedding", r"ce_|embedding"),
    ("operating system (scheduler, faults)", r"\[k\]"),
]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=4, help="steps, the first not sampled (default 4)")
    p.add_argument("--tetra", default=os.path.join(ROOT, "build", "tetra"))
    p.add_argument("--keep", help="keep perf's data file here")
    a = p.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    with tempfile.TemporaryDirectory() as tmp:
        metrics, data = os.path.join(tmp, "m.jsonl"), a.keep or os.path.join(tmp, "perf.data")
        run = subprocess.Popen([a.tetra, "train", "--steps", str(a.steps), "--metrics", metrics]
                               + MODEL, env=env, stdout=subprocess.DEVNULL)
        while run.poll() is None and not (os.path.exists(metrics) and os.path.getsize(metrics)):
            time.sleep(0.05)
        if run.poll() is not None:
            sys.exit(f"cpu_profile: tetra ended before its first step ({run.returncode})")
        perf = subprocess.Popen(["perf", "record", "-F", str(HZ), "-o", data, "-p", str(run.pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if run.wait() != 0:
            sys.exit(f"cpu_profile: tetra failed ({run.returncode})")
        perf.wait()
        steps = [json.loads(line)["step_ms"] for line in open(metrics)][1:]
        report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio",
                                 "--sort", "dso,sym", "-F", "sample,dso,sym"],
                                capture_output=True, text=True, check=True).stdout
    parts, total = collections.Counter(), 0
    for line in report.splitlines():
        m = re.match(r"\s*(\d+)\s+(\S+)\s+(\[.\])\s+(.*)", line)
        if not m:
            continue
        n, sym = int(m.group(1)), " ".join(m.group(2, 3, 4))
        total += n
        parts[next((name for name, rx in PARTS if re.search(rx, sym)), "other")] += n
    ms = lambda n: n / HZ / len(steps) * 1000
    print(f"steps 2-{a.steps} on one thread: {', '.join(f'{s:.0f}' for s in steps)} ms wall; "
          f"load average {os.getloadavg()[0]:.2f}\n")
    print("| part of a step | CPU ms a step | share |\n| --- | ---: | ---: |")
    for name, n in parts.most_common():
        print(f"| {name} | {ms(n):.0f} | {100 * n / total:.1f} % |")
    print(f"| all | {ms(total):.0f} | 100 % |")


if __name__ == "__main__":
    main()
