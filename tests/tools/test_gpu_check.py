#!/usr/bin/env python3
"""The GPU check's plans and its failure paths, without a GPU (tools/gpu_check.sh):
- --dry-run: both planned commands' phase limits add up within their budgets (540 s and
  300 s, the summed limits recounted here from the phases printed), and racecheck, layouts,
  nccl and errors are in neither;
- with an nvidia-smi that fails, `first` and `second` FAIL at their build phase and stop;
- with stand-ins for the binaries and compute-sanitizer: an op suite that saw no GPU FAILs, a
  bf16 run that fails FAILs, a sanitizer that refuses the device says SKIP;
- with a stand-in tetra whose losses match: the bf16 phase PASSes only with a GPU's BF16 peak
  and cuDNN attention in both the forward and the backward;
- tools/gpu_unpack.py, which unpacks the bundle a device run carries packed: modes and links
  kept, a stamp that skips the second unpack, the folder replaced by a newer pack, and one line
  with exit 1 for a pack of two folders or a file that is no tar.xz.
No other row says PASS here. Usage: test_gpu_check.py SOURCE_DIR. Exits 0 when all hold."""

import os
import re
import stat
import subprocess
import sys
import tarfile
import tempfile

BUDGETS = {"first": 540, "second": 300}
ONLY_WHEN_NAMED = {"racecheck", "layouts", "nccl", "errors"}


def script(path, text):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)


def rows(report):
    """{phase: result} of a gpu_check.txt table."""
    out = {}
    for line in open(report).read().splitlines()[2:]:
        name, result = line.split()[:2]
        out[name] = result
    return out


def check_unpack(src, expect):
    """tools/gpu_unpack.py on packs made here."""
    unpack = os.path.join(src, "tools", "gpu_unpack.py")

    def run(pack, dest):
        r = subprocess.run([sys.executable, unpack, pack, dest], capture_output=True, text=True)
        return r.returncode, r.stdout.strip()

    def pack(root, name):
        path = os.path.join(root, name)
        with tarfile.open(path, "w:xz") as t:
            t.add(os.path.join(root, "src", ".gpu"), arcname=".gpu")
        return path

    with tempfile.TemporaryDirectory(prefix="gpu_unpack_") as tmp:
        bundle = os.path.join(tmp, "src", ".gpu", "bin")
        os.makedirs(bundle)
        script(os.path.join(bundle, "tetra"), "echo tetra\n")
        os.symlink("tetra", os.path.join(bundle, "link"))
        first = pack(tmp, "a.tar.xz")
        dest = os.path.join(tmp, "dest")
        os.makedirs(dest)
        rc, out = run(first, dest)
        got = os.path.join(dest, ".gpu", "bin")
        expect(f"unpack: exit 0 ({out})",
               rc == 0 and out.endswith(f"unpacked into {dest}/.gpu"))
        expect("unpack: the executable keeps its mode",
               os.access(os.path.join(got, "tetra"), os.X_OK))
        expect("unpack: the link stays a link", os.readlink(os.path.join(got, "link")) == "tetra")
        rc, out = run(first, dest)
        expect(f"unpack: a second call finds the stamp ({out})", rc == 0 and "already" in out)

        open(os.path.join(got, "stale"), "w").close()
        stamp = os.path.join(dest, ".gpu", ".unpacked")
        expect("unpack: the stamp is written", os.path.exists(stamp))
        if os.path.exists(stamp):
            os.utime(stamp, (0, 0))  # older than the pack made next
        second = pack(tmp, "b.tar.xz")
        rc, out = run(second, dest)
        expect(f"unpack: a newer pack replaces the folder ({out})",
               rc == 0 and not os.path.exists(os.path.join(got, "stale")))

        two = os.path.join(tmp, "two.tar.xz")
        with tarfile.open(two, "w:xz") as t:
            t.add(os.path.join(tmp, "src", ".gpu"), arcname=".gpu")
            t.add(first, arcname="other")
        rc, out = run(two, dest)
        expect(f"unpack: a pack of two folders, exit 1 ({out})",
               rc == 1 and len(out.splitlines()) == 1 and "not one folder" in out)
        rc, out = run(os.path.join(src, "README.md"), dest)
        expect(f"unpack: not a tar.xz, exit 1 ({out})",
               rc == 1 and len(out.splitlines()) == 1 and out.startswith("gpu_unpack: cannot"))


def main():
    src = sys.argv[1]
    check = os.path.join(src, "tools", "gpu_check.sh")
    failures = []

    def expect(what, ok):
        if not ok:
            failures.append(what)

    dry = subprocess.run(["bash", check, "--dry-run"], capture_output=True, text=True)
    expect(f"--dry-run exits 0 (got {dry.returncode}: {dry.stdout}{dry.stderr})",
           dry.returncode == 0)
    plans, cmd = {}, None
    for line in dry.stdout.splitlines():
        m = re.match(r"(first|second): .*\(budget (\d+) s\)", line)
        if m:
            cmd = m.group(1)
            plans[cmd] = {"budget": int(m.group(2)), "phases": {}}
            expect(f"{cmd}'s budget is {BUDGETS[cmd]} s", int(m.group(2)) == BUDGETS[cmd])
            continue
        m = re.match(r"  (\w+) +(\d+) s", line)
        if m and cmd and m.group(1) != "sum":
            plans[cmd]["phases"][m.group(1)] = int(m.group(2))
        if line.startswith("only when named"):
            cmd = None
    expect("both commands are planned", set(plans) == set(BUDGETS))
    for cmd, plan in plans.items():
        total = sum(plan["phases"].values())
        expect(f"{cmd}: limits {total} s within {plan['budget']} s", total <= plan["budget"])
        expect(f"{cmd}: none of {ONLY_WHEN_NAMED} by default",
               not ONLY_WHEN_NAMED & set(plan["phases"]))
    expect("first builds, runs the ops and bf16",
           {"build", "ops", "bf16"} <= set(plans.get("first", {}).get("phases", {})))
    expect("second runs the benchmark", "bench" in plans.get("second", {}).get("phases", {}))

    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        fake = os.path.join(tmp, "bin")
        os.makedirs(fake)
        script(os.path.join(fake, "nvidia-smi"), "echo 'NVIDIA-SMI has failed' >&2; exit 9\n")
        env = {k: v for k, v in os.environ.items() if k not in ("OUT", "TETRA", "UNIT_TESTS")}
        env["PATH"] = fake + os.pathsep + env["PATH"]

        for cmd, first_phase in (("first", "build"), ("second", "bins")):
            out = os.path.join(tmp, cmd)
            r = subprocess.run(["bash", check, out, cmd], capture_output=True, text=True, env=env)
            got = rows(os.path.join(out, "gpu_check.txt"))
            expect(f"{cmd} without a GPU exits non-zero", r.returncode != 0)
            expect(f"{cmd} without a GPU: only {first_phase}, FAIL (got {got})",
                   list(got) == [first_phase] and got[first_phase].startswith("FAIL"))

        # Stand-ins: an op suite whose GPU tests skip, a tetra that fails, a sanitizer that
        # refuses the device.
        script(os.path.join(tmp, "unit_tests"),
               "echo 'MESSAGE: no GPU: skipped'; echo '[doctest] Status: SUCCESS!'\n")
        script(os.path.join(tmp, "tetra"), "echo 'tetra: error: no CUDA device' >&2; exit 2\n")
        script(os.path.join(fake, "compute-sanitizer"),
               "echo '========= Error: Target device not supported'; exit 1\n")
        out = os.path.join(tmp, "phases")
        os.makedirs(out)
        with open(os.path.join(out, "binaries.sh"), "w") as f:
            f.write(f"TETRA={tmp}/tetra\nT={tmp}/unit_tests\n")
        r = subprocess.run(["bash", check, out, "ops", "bf16", "memcheck", "racecheck"],
                           capture_output=True, text=True, env=env)
        got = rows(os.path.join(out, "gpu_check.txt"))
        expect(f"stand-ins exit non-zero ({r.stdout})", r.returncode != 0)
        expect(f"ops FAILs when the GPU tests skip (got {got})",
               got.get("ops", "").startswith("FAIL"))
        expect(f"bf16 FAILs when tetra fails (got {got})", got.get("bf16", "").startswith("FAIL"))
        expect(f"a sanitizer refusing the device: SKIP (got {got})",
               got.get("memcheck") == "SKIP" and got.get("racecheck") == "SKIP")
        expect(f"no PASS without a GPU (got {got})", "PASS" not in got.values())

        # A stand-in tetra: matching losses, and the start-up lines FAKE_ATTN and FAKE_PEAK.
        script(os.path.join(tmp, "tetra"), """
m=; dev=
while [ $# -gt 0 ]; do case $1 in --metrics) m=$2;; --device) dev=$2;; esac; shift; done
[ "$dev" = cuda ] && echo "  attention: $FAKE_ATTN" && echo "  peak: 989000.0 GFLOP/s per rank, $FAKE_PEAK"
for i in 1 2 3 4 5 6 7 8; do echo "{\\"loss\\": 10.$i}" >>"$m"; done
""")
        both = "cudnn sdpa (9.19.0), forward and backward"
        for attn, peak, want in (
                (both, "H200 dense BF16 peak", "PASS"),
                (both, "H200 NVL dense BF16 peak", "PASS"),
                ("forward cudnn sdpa (9.19.0); backward cuda fallback (batched GEMMs): cuDNN "
                 "refused", "H200 dense BF16 peak", "FAIL(1)"),
                ("cudnn sdpa (9.19.0)", "H200 dense BF16 peak", "FAIL(1)"),
                (both, "--peak-tflops", "FAIL(1)"),
                (both, "NVIDIA H200 GEMM probe (1024^3 fp32)", "FAIL(1)")):
            r = subprocess.run(["bash", check, out, "bf16"], capture_output=True, text=True,
                               env=dict(env, FAKE_ATTN=attn, FAKE_PEAK=peak))
            got = rows(os.path.join(out, "gpu_check.txt"))
            expect(f"bf16 with attention '{attn}', peak '{peak}': {want} (got {got})",
                   got.get("bf16") == want and (r.returncode == 0) == (want == "PASS"))

    check_unpack(src, expect)

    for f in failures:
        print("FAILED:", f)
    print(f"gpu_check plans and failure paths: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
