#!/usr/bin/env python3
"""tetra against PyTorch on the CPU, side by side in one run, and the table of ratios:

    python3 tools/bench/cpu.py [--steps 4] [--pairs 1] [--only one,core,ddp,gemm,loaded]
                               [--tetra PATH] [--python PY] [--torch-mode eager|compile]

The model of the closing notes (d 512, 8 layers, 8 heads of which 4 KV, FFN 1408, S 256,
vocabulary 256, 8 sequences a step; fp32, AdamW, clip 1.0), trained by tetra and by PyTorch
(tools/bench/torch_llama.py, the same Llama block), each row both sides back to back:
  one      one process, two threads (tetra OMP_NUM_THREADS=2; PyTorch set_num_threads(2))
                                                                                 goal >= 2.0x
  ddp      two ranks of one thread on cores 0 and 1 (tetra mpirun --bind-to core, DP 2;
           PyTorch DistributedDataParallel over gloo, each process under taskset)  goal >= 1.5x
  core     one thread on core 0 (taskset -c 0)                                   goal >= 1.2x
  gemm     tetra's start-up GEMM probe (1024^3 fp32, one thread on core 0) against
           OpenBLAS's sgemm of the same size through numpy and torch.mm on that core, the
           better of the two                                                     goal >= 0.9x
  loaded   a tiny model (d 64, 2 layers, S 32, 4 sequences) on one rank of two threads, its
           median step with a busy process on core 1 against without one         goal <= 3x
Ratios are PyTorch's step time over tetra's (above 1: tetra faster), the probe's rate over
OpenBLAS's, and the loaded step over the quiet one. Step times are medians of the measured steps
(tetra's first step, and PyTorch's warm-up step, are left out). With --pairs N each of the rows
one, ddp and core runs N pairs (tetra, then PyTorch, back to back), and the row gives each side's
median, the median of the pairs' ratios (which decides "met") and their range: this machine's
speed drifts by several per cent over minutes, which a single pair cannot tell from a change.

PyTorch at its best: the newest release from PyPI (tools/bench/torch_env.sh installs it into
build/torch-venv, about 5 GB with the CUDA libraries its wheel loads; its products are MKL's), eager
or with --torch-mode compile under torch.compile, with as many threads as the row gives it.
--python /usr/bin/python3 measures Debian 12's torch 1.13 instead (OpenBLAS's pthreads build,
through LD_LIBRARY_PATH; no torch.compile, no grouped-query SDPA, so attention is composed of
eager ops): on one process of two threads it gains only 3 % over one core on this model, so
ratios against it overstate tetra there. The GEMM rows compare tetra's probe with OpenBLAS
(numpy and torch.mm of Debian's Python) and with the measured PyTorch's torch.mm. Needs a built
build/tetra (bash tools/setup.sh), mpirun, Debian's python3-torch (tools/python_env.sh) and
libopenblas0-pthread. Measure on a quiet machine: the load average is printed before and after.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORCH_LLAMA = os.path.join(ROOT, "tools", "bench", "torch_llama.py")
PY = "/usr/bin/python3"  # Debian's, which sees python3-torch
BLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")

MODEL = {"dim": 512, "layers": 8, "heads": 8, "kv-heads": 4, "ffn-dim": 1408, "seq-len": 256,
         "vocab": 256, "global-batch": 8}
TINY = {"dim": 64, "layers": 2, "heads": 4, "kv-heads": 2, "ffn-dim": 176, "seq-len": 32,
        "vocab": 256, "global-batch": 4}


def flags(model, micro):
    out = []
    for k, v in model.items():
        out += [f"--{k}", str(v)]
    return out + ["--micro-batch", str(micro)]


def env(threads, **more):
    return dict(ENV, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                LD_LIBRARY_PATH=BLAS_DIR + ":" + os.environ.get("LD_LIBRARY_PATH", ""), **more)


def run(cmd, e, what):
    out = subprocess.run(cmd, env=e, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"cpu bench: {what} failed: {' '.join(cmd)}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out.stdout


def tetra(a, prefix, threads, model, micro, steps, extra=()):
    """tetra train's median step_ms over the steps after the first, and its stdout."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = prefix + [a.tetra, "train", "--steps", str(steps + 1), "--metrics", metrics]
        cmd += flags(model, micro) + list(extra)
        out = run(cmd, env(threads), "tetra")
        rows = [json.loads(line) for line in open(metrics)]
    return statistics.median(r["step_ms"] for r in rows[1:]), out


def torch(a, prefixes, threads, model, micro, steps):
    """torch_llama.py's median step (rank 0's under DDP): one process per prefix."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t.json")
        cmd = [a.python, TORCH_LLAMA, "--device", "cpu", "--threads", str(threads), "--steps",
               str(steps), "--warmup-steps", "1", "--peak-tflops", "1", "--mode", a.torch_mode,
               "--json", out]
        cmd += flags(model, micro)
        if len(prefixes) == 1:
            run(prefixes[0] + cmd, env(threads), "PyTorch")
        else:
            procs = []
            for r, p in enumerate(prefixes):
                e = env(threads, RANK=str(r), WORLD_SIZE=str(len(prefixes)),
                        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + os.getpid() % 1000))
                procs.append(subprocess.Popen(p + cmd + ["--ddp"], env=e, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True))
            for p in procs:
                o, err = p.communicate()
                if p.returncode != 0:
                    sys.exit(f"cpu bench: PyTorch DDP failed:\n{o[-2000:]}\n{err[-2000:]}")
        return json.load(open(out))


def load():
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def gemm(a):
    """tetra's probe and OpenBLAS's sgemm at 1024^3 on core 0, one thread, in GFLOP/s."""
    _, out = tetra(a, ["taskset", "-c", "0"], 1, TINY, 4, 1)
    probe = float(re.search(r"peak: ([0-9.]+) GFLOP/s", out).group(1))
    code = """
import time, numpy as np, torch
torch.set_num_threads(1)
n = 1024
a, b = np.random.rand(n, n).astype(np.float32), np.random.rand(n, n).astype(np.float32)
ta, tb = torch.from_numpy(a), torch.from_numpy(b)
def best(f):
    f(); t = 1e9; t0 = time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        s = time.perf_counter(); f(); t = min(t, time.perf_counter() - s)
    return 2 * n**3 / t / 1e9
print(best(lambda: a @ b), best(lambda: torch.mm(ta, tb)))
"""
    np_rate, torch_rate = map(float, run(["taskset", "-c", "0", PY, "-c", code], env(1),
                                         "OpenBLAS probe").split())
    best_rate = float(run(["taskset", "-c", "0", a.python, "-c", code], env(1),
                          "PyTorch probe").split()[1])
    return probe, np_rate, torch_rate, best_rate


def loaded(a, steps):
    """The tiny model's median step on two threads, quiet and with core 1 busy."""
    quiet, _ = tetra(a, [], 2, TINY, 4, steps)
    busy = subprocess.Popen(["taskset", "-c", "1", sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        heavy, _ = tetra(a, [], 2, TINY, 4, steps)
    finally:
        busy.kill()
        busy.wait()
    return quiet, heavy


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=4, help="measured steps per run (default 4)")
    p.add_argument("--pairs", type=int, default=1,
                   help="tetra-PyTorch pairs per row of one, ddp and core (default 1)")
    p.add_argument("--only", default="one,ddp,core,gemm,loaded", help="rows to run")
    p.add_argument("--tetra", default=os.path.join(ROOT, "build", "tetra"))
    p.add_argument("--python", help="the Python whose torch is measured (default: "
                   "tools/bench/torch_env.sh's, which it installs if missing)")
    p.add_argument("--torch-mode", choices=["eager", "compile"], default="eager",
                   help="PyTorch eager or under torch.compile (2.0 on; warm-up step excluded)")
    a = p.parse_args()
    if a.pairs < 1:
        p.error("--pairs must be at least 1")
    rows = a.only.split(",")
    if a.python is None:
        a.python = run(["bash", os.path.join(ROOT, "tools", "bench", "torch_env.sh")], ENV,
                       "torch_env.sh").strip()
    version, has_compile, blas = run(
        [a.python, "-c", "import re, torch; print(torch.__version__, hasattr(torch, 'compile'), "
         "re.search('BLAS_INFO=([a-z]+)', torch.__config__.show()).group(1))"],
        env(1), "import torch").split()
    if a.torch_mode == "compile" and has_compile != "True":
        p.error(f"torch {version} has no torch.compile")
    if a.torch_mode == "compile":
        compile_note = "its first step, the compilation, excluded"
    else:
        compile_note = ("torch.compile exists but is not used" if has_compile == "True"
                        else "no torch.compile")
    print(f"tetra {a.tetra} | PyTorch {version} {a.torch_mode} ({compile_note}), its BLAS {blas}"
          f" | tetra's OpenBLAS from {BLAS_DIR} | {os.cpu_count()} cores | {load()}")
    table = []
    def pairs(name, tetra_run, torch_run, goal):
        runs = [(tetra_run(), torch_run()) for _ in range(a.pairs)]
        t = statistics.median(x for x, _ in runs)
        r = statistics.median(y for _, y in runs)
        ratios = sorted(y / x for x, y in runs)
        table.append((name, t, r, statistics.median(ratios), ratios, goal))

    if "one" in rows:
        pairs("one process, 2 threads", lambda: tetra(a, [], 2, MODEL, 8, a.steps)[0],
              lambda: torch(a, [[]], 2, MODEL, 8, a.steps)["step_ms"], 2.0)
    if "ddp" in rows:
        pairs("DP 2 x 1 thread (DDP gloo)",
              lambda: tetra(a, ["mpirun", "-np", "2", "--bind-to", "core"], 1, MODEL, 4, a.steps,
                            ["--dp", "2"])[0],
              lambda: torch(a, [["taskset", "-c", "0"], ["taskset", "-c", "1"]], 1, MODEL, 4,
                            a.steps)["step_ms"], 1.5)
    if "core" in rows:
        pairs("one core, 1 thread", lambda: tetra(a, ["taskset", "-c", "0"], 1, MODEL, 8, a.steps)[0],
              lambda: torch(a, [["taskset", "-c", "0"]], 1, MODEL, 8, a.steps)["step_ms"], 1.2)
    spread = " | pairs' ratios" if a.pairs > 1 else ""
    print(f"\n| run | tetra ms/step | PyTorch ms/step | PyTorch / tetra{spread} | goal | met |")
    print("| --- | ---: | ---: | ---: |" + (" --- |" if spread else "") + " --- | --- |")
    for name, t, r, ratio, ratios, goal in table:
        span = f" | {ratios[0]:.2f}-{ratios[-1]:.2f}x of {len(ratios)}" if spread else ""
        print(f"| {name} | {t:.0f} | {r:.0f} | {ratio:.2f}x{span} | >= {goal} | "
              f"{'yes' if ratio >= goal else 'no'} |")
    if "gemm" in rows:
        probe, np_rate, torch_rate, best_rate = gemm(a)
        ref = max(np_rate, torch_rate)
        print("\n| GEMM 1024^3 fp32, 1 thread, core 0 | GFLOP/s |\n| --- | ---: |")
        print(f"| tetra's probe (its product: one OpenBLAS sgemm on one thread) | {probe:.1f} |")
        print(f"| OpenBLAS: numpy | {np_rate:.1f} |\n| OpenBLAS: torch.mm | {torch_rate:.1f} |")
        print(f"| PyTorch {version}: torch.mm ({blas}) | {best_rate:.1f} |")
        print(f"| tetra / OpenBLAS | {probe / ref:.2f}x (goal >= 0.90: "
              f"{'yes' if probe >= 0.9 * ref else 'no'}) |")
        print(f"| tetra / PyTorch {version} | {probe / best_rate:.2f}x |")
    if "loaded" in rows:
        quiet, heavy = loaded(a, max(20, 5 * a.steps))
        print("\n| tiny model, 1 rank x 2 threads | ms/step |\n| --- | ---: |")
        print(f"| quiet | {quiet:.2f} |\n| core 1 busy | {heavy:.2f} |")
        print(f"| busy / quiet | {heavy / quiet:.2f}x (goal <= 3: "
              f"{'yes' if heavy <= 3 * quiet else 'no'}) |")
    print(f"\n{load()}")


if __name__ == "__main__":
    main()
