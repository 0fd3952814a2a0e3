#!/usr/bin/env bash
# The GPU check: one command for a machine with a GPU, CUDA and Python but no MPI, Eigen,
# doctest or network. Run tools/gpu_bundle.sh first where the registries are reachable and
# bring .gpu/ along. Builds with the CUDA backend, then runs each phase under its own time
# limit and prints one table (also written to OUTDIR/gpu_check.txt, with a log per phase):
#   build     cmake + build of tetra, unit_tests and layout_tests
#   ops       every CUDA op against the CPU backend, each run twice for bit-equality
#   memcheck  compute-sanitizer memcheck over the op tests
#   racecheck compute-sanitizer racecheck over the op tests
#   train     one GPU against the CPU: 8 steps, per-step losses within 2e-4 relative; two
#             GPU runs bitwise equal
#   errors    --device cuda with no GPU visible: one error line, exit 2
#   layouts   the DP, TP, PP, CP and 4D layout tests, every rank on the one GPU (MPI path)
#   nccl      NCCL communicators: SKIP, this build has no NCCL code yet
#   bench     tokens/s and MFU of the benchmark model (dim 512, 8 layers, seq 256)
# A phase whose feature is missing says SKIP, never PASS.
#
#   bash tools/gpu_check.sh [OUTDIR] [PHASE...]     (default OUTDIR /tmp/gpu_check, all phases)
set -uo pipefail
self=$(realpath "$0")
cd "$(dirname "$0")/.."

if [ -d .gpu/openmpi ]; then
  export OPAL_PREFIX=$PWD/.gpu/openmpi
  export PATH=$OPAL_PREFIX/bin:$PATH LD_LIBRARY_PATH=$OPAL_PREFIX/lib:${LD_LIBRARY_PATH:-}
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
B=$PWD/build-gpu
T=$B/tests/unit_tests
TETRA=$B/tetra

rows=()
# phase NAME LIMIT_S COMMAND...: runs COMMAND with its output in OUTDIR/NAME.log; exit 0 is
# PASS, 77 SKIP, anything else FAIL (124: over its limit). The last line of the log is the note.
phase() {
  local name=$1 limit=$2
  shift 2
  if [ "$only" != "  " ] && [[ "$only" != *" $name "* ]]; then return; fi
  local t0=$SECONDS rc
  # The phase runs in a fresh copy of this script, so that timeout can stop it whole.
  GPU_CHECK_OUT=$out timeout --kill-after=10 "$limit" bash "$self" --run-phase "$@" \
    >"$out/$name.log" 2>&1
  rc=$?
  local result=PASS
  [ $rc -eq 77 ] && result=SKIP
  [ $rc -ne 0 ] && [ $rc -ne 77 ] && result="FAIL($rc)"
  local note
  note=$(grep -v '^\s*$' "$out/$name.log" | tail -1 | cut -c1-110)
  rows+=("$(printf '%-10s %-9s %5ds  %s' "$name" "$result" $((SECONDS - t0)) "$note")")
  echo "${rows[-1]}"
}

build() {
  nvidia-smi -L || return 1
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S . -B "$B" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTETRA_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=native -DCMAKE_PREFIX_PATH="$PWD/.gpu/deb/usr" || return 1
  cmake --build "$B" -j"$(nproc)" --target tetra unit_tests layout_tests || return 1
  echo "built with $(nvcc --version | tail -1)"
}

ops() {
  for run in 1 2; do
    local log
    log=$("$T" --source-file='*test_cuda_backend.cpp' 2>&1)
    echo "$log"
    echo "$log" | grep -q "no GPU: skipped" && { echo "no GPU seen"; return 1; }
    echo "$log" | grep -q "Status: SUCCESS" || return 1
  done
  echo "$(echo "$log" | grep 'test cases:' | tr -s ' ') (twice)"
}

sanitizer() {
  command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found"; return 77; }
  compute-sanitizer --tool "$1" --error-exitcode 1 "$T" --source-file='*test_cuda_backend.cpp' \
    || return 1
  echo "$1: no errors over the op tests"
}

# The demo-sized model of the loss comparison.
SMALL=(--dim 128 --layers 4 --heads 8 --kv-heads 4 --ffn-dim 384 --seq-len 64 --global-batch 8
       --steps 8 --peak-tflops 1)

train() {
  local d=$out/train
  rm -rf "$d" && mkdir -p "$d"
  "$TETRA" train "${SMALL[@]}" --device cuda --metrics "$d/gpu1.jsonl" >"$d/gpu1.txt" || return 1
  "$TETRA" train "${SMALL[@]}" --device cuda --metrics "$d/gpu2.jsonl" >"$d/gpu2.txt" || return 1
  "$TETRA" train "${SMALL[@]}" --device cpu --metrics "$d/cpu.jsonl" >"$d/cpu.txt" || return 1
  python3 - "$d" <<'EOF'
import json, sys
d = sys.argv[1]
load = lambda n: [json.loads(l)["loss"] for l in open(f"{d}/{n}.jsonl")]
g1, g2, c = load("gpu1"), load("gpu2"), load("cpu")
worst = max(abs(a - b) / abs(b) for a, b in zip(g1, c))
for s, (a, b) in enumerate(zip(g1, c)):
    print(f"step {s}: gpu {a:.8f} cpu {b:.8f} rel {abs(a - b) / abs(b):.2e}")
ok = len(g1) == len(c) == 8 and worst <= 2e-4 and g1 == g2
print(f"8 steps: max rel loss gap GPU vs CPU {worst:.2e} (limit 2e-4); two GPU runs "
      f"{'bitwise equal' if g1 == g2 else 'DIFFER'}")
sys.exit(0 if ok else 1)
EOF
}

errors() {
  local msg rc
  msg=$(CUDA_VISIBLE_DEVICES= "$TETRA" train "${SMALL[@]}" --device cuda 2>&1)
  rc=$?
  echo "$msg"
  [ $rc -eq 2 ] && [ "$(echo "$msg" | grep -c '^tetra: error:')" -eq 1 ] || return 1
  echo "no GPU visible: exit 2, one error line"
}

layouts() {
  (cd "$B" && TETRA_TEST_DEVICE=cuda ctest --output-on-failure -R '^(dp_zero|tp|pp|cp_4d)$') ||
    return 1
}

nccl() {
  echo "this build has no NCCL communicator"
  return 77
}

bench() {
  local args=(--dim 512 --layers 8 --heads 8 --kv-heads 4 --ffn-dim 1536 --seq-len 256
    --global-batch 8 --steps 20)
  "$TETRA" train "${args[@]}" --device cuda | tail -2 || return 1
}

if [ "${1:-}" = --run-phase ]; then
  out=$GPU_CHECK_OUT
  shift
  "$@"
  exit
fi

out=$(realpath -m "${1:-/tmp/gpu_check}")
shift || true
only=" $* "
mkdir -p "$out"
report=$out/gpu_check.txt
: >"$report"

phase build 240 build
if [ ! -x "$TETRA" ]; then
  echo "build failed: see $out/build.log" | tee -a "$report"
  tail -30 "$out/build.log"
  exit 1
fi
phase ops 60 ops
phase train 60 train
phase errors 30 errors
phase bench 60 bench
phase layouts 180 layouts
phase nccl 10 nccl
phase memcheck 90 sanitizer memcheck
phase racecheck 90 sanitizer racecheck

{
  echo "tetra GPU check, $(date -u +%FT%TZ), $(nvidia-smi -L 2>/dev/null | head -1)"
  printf '%-10s %-9s %6s  %s\n' phase result time note
  printf '%s\n' "${rows[@]}"
} | tee "$report"
! grep -q 'FAIL' "$report"
