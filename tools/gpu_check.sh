#!/usr/bin/env bash
# The GPU check: one command for a machine with a GPU, CUDA and Python but no MPI, Eigen,
# doctest, nlohmann-json, CLI11 or network. Run tools/gpu_bundle.sh first where the registries
# are reachable and bring .gpu/ along. Builds with the CUDA backend for sm_90 only (and NCCL and
# cuDNN, from the CUDA toolkit or the machine's PyPI nvidia-nccl / nvidia-cudnn packages; the
# cudnn-frontend headers from the bundle), then runs each phase under its own time limit, in the
# order that teaches most per minute, and prints one table (also written to
# OUTDIR/gpu_check.txt, with a log per phase):
#   build     cmake (ninja, sm_90) + build of tetra, unit_tests and layout_tests on all cores
#   ops       every CUDA op against the CPU backend in fp32 (test_cuda_backend.cpp) and on the
#             native bf16 path against the CPU's bf16 reference (test_cuda_bf16.cpp: cuBLASLt,
#             fused kernels, cuDNN and the GEMM fallback, and cuDNN against the fallback), each
#             run twice for bit-equality; RoPE in place and strided attention
#             (test_cuda_rope_in_place.cpp); cuDNN's validate() of tetra's graphs; the NCCL
#             communicator's calls on a group of one (tests/unit/test_nccl.cpp)
#   bf16      --dtype bf16 on the GPU against the CPU: 8 steps within 3e-3 relative (the bf16
#             layout tests' bound), two GPU runs bitwise equal, MFU against the bf16 peak, and
#             the attention path the run took
#   bench     tools/bench/gpu.sh: the ~124M and ~350M models, tetra against PyTorch eager and
#             torch.compile: tokens/s, MFU, HFU, peak memory, GEMM/attention/other times
#   memcheck  compute-sanitizer memcheck over the op tests
#   racecheck compute-sanitizer racecheck over the op tests
#   train     one GPU against the CPU in fp32: 8 steps, per-step losses within 2e-4 relative;
#             two GPU runs bitwise equal; the final weights of both, tensor by tensor (printed)
#   errors    --device cuda with no GPU visible, --comm nccl with two ranks on one GPU: one
#             error line each, exit 2
#   nccl      NCCL in every group of a one-rank run (losses bitwise equal to the MPI path's);
#             --comm auto mixing NCCL (groups of one) and MPI (groups sharing the GPU) in
#             TP 2 and DP 2 runs, against one GPU
#   layouts   the DP, TP, PP, CP, 4D and bf16 layout tests, every rank on the one GPU (MPI path)
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
export OMPI_MCA_osc=^ucx  # the wheel's UCX one-sided component complains where UCX is absent
B=$PWD/build-gpu
T=$B/tests/unit_tests
TETRA=$B/tetra
OPS=--source-file='*test_cuda_backend.cpp,*test_cuda_bf16.cpp,*test_cuda_rope_in_place.cpp,*test_cudnn_validate.cpp,*test_nccl.cpp'
# The layout tests' model (tests/mpi/layout_check.cpp), 5 steps.
TINY=(--layers 4 --dim 64 --heads 8 --kv-heads 4 --ffn-dim 128 --seq-len 16 --peak-tflops 1
  --lr 1e-2 --warmup 2 --steps 5 --global-batch 8 --micro-batch 1)
# The model of the loss comparisons.
SMALL=(--dim 128 --layers 4 --heads 8 --kv-heads 4 --ffn-dim 384 --seq-len 64 --global-batch 8
  --steps 8 --peak-tflops 1)

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
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.gpu/deb/usr" | grep 'tetra:' ||
    return 1
  cmake --build "$B" -j"$(nproc)" --target tetra unit_tests layout_tests || return 1
  local cudnn=off
  grep -q '^CUDNN_FRONTEND_INCLUDE_DIR:PATH=/' "$B/CMakeCache.txt" && cudnn=on
  echo "built for sm_90 with $(nvcc --version | tail -1); NCCL: $(grep -c '^NCCL_LIBRARY:FILEPATH=/' "$B/CMakeCache.txt"), cuDNN path $cudnn"
}

ops() {
  local log
  for run in 1 2; do
    log=$("$T" "$OPS" 2>&1)
    echo "$log"
    echo "$log" | grep -q "no GPU: skipped" && { echo "no GPU seen"; return 1; }
    echo "$log" | grep -q "Status: SUCCESS" || return 1
  done
  echo "$(echo "$log" | grep 'test cases:' | tr -s ' ') (twice)"
}

sanitizer() {
  command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found"; return 77; }
  # Memory and race errors only: tetra's own CUDA API errors already fail the tests (they
  # throw), and NCCL's set-up probes kernel images with calls that fail by design.
  compute-sanitizer --tool "$1" --report-api-errors no --error-exitcode 1 "$T" "$OPS" \
    --test-case-exclude='*errors become*' || return 1
  echo "$1: no errors over the op tests"
}

# gpu_against_cpu DIR LIMIT LABEL [FLAGS...]: the SMALL model with FLAGS twice on the GPU and
# once on the CPU; per-step losses within LIMIT relative, the two GPU runs bitwise equal.
gpu_against_cpu() {
  local d=$1 limit=$2 label=$3 run dev
  shift 3
  for run in gpu1 gpu2 cpu; do
    dev=cuda
    [ $run = cpu ] && dev=cpu
    "$TETRA" train "${SMALL[@]}" "$@" --device $dev --metrics "$d/$run.jsonl" >"$d/$run.txt" ||
      return 1
  done
  python3 - "$d" "$limit" "$label" <<'EOF'
import json, sys
d, limit, label = sys.argv[1], float(sys.argv[2]), sys.argv[3]
load = lambda n: [json.loads(l)["loss"] for l in open(f"{d}/{n}.jsonl")]
g1, g2, c = load("gpu1"), load("gpu2"), load("cpu")
worst = max(abs(a - b) / abs(b) for a, b in zip(g1, c))
for s, (a, b) in enumerate(zip(g1, c)):
    print(f"step {s}: gpu {a:.8f} cpu {b:.8f} rel {abs(a - b) / abs(b):.2e}")
ok = len(g1) == len(c) == 8 and worst <= limit and g1 == g2
print(f"{label}8 steps: max rel loss gap GPU vs CPU {worst:.2e} (limit {limit:g}); two GPU runs "
      f"{'bitwise equal' if g1 == g2 else 'DIFFER'}")
sys.exit(0 if ok else 1)
EOF
}

train() {
  local d=$out/train
  rm -rf "$d" && mkdir -p "$d"
  # The layout tests' model after 5 steps on each: how far fp32 GPU and CPU drift apart.
  "$TETRA" train "${TINY[@]}" --device cuda --export "$d/tiny_gpu.safetensors" >/dev/null || return 1
  "$TETRA" train "${TINY[@]}" --device cpu --export "$d/tiny_cpu.safetensors" >/dev/null || return 1
  python3 - "$d" <<'EOF'
import json, struct, sys
from array import array
d = sys.argv[1]

def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    return {k: array("f", raw[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]])
            for k, t in head.items() if k != "__metadata__"}

g, c = tensors(f"{d}/tiny_gpu.safetensors"), tensors(f"{d}/tiny_cpu.safetensors")
rel = sorted(((sum((x - y) ** 2 for x, y in zip(g[k], c[k])) /
               max(sum(y * y for y in c[k]), 1e-30)) ** 0.5, k) for k in c)
print("layout-test model after 5 steps, largest ||W_gpu - W_cpu|| / ||W_cpu||:")
for r, k in rel[::-1][:4]:
    print(f"  {r:.2e} {k}")
EOF
  gpu_against_cpu "$d" 2e-4 ""
}

# bf16 on the GPU (the native bf16 path where the backend has it) against bf16 on the CPU (the
# mixed-precision wrapper, the reference):
# per-step losses within 3e-3 relative, the bound of the bf16 layout tests
# (tests/mpi/test_bf16.cpp), since a value near a rounding tie may round to the other
# neighbour on the other device; two GPU runs bitwise equal.
bf16() {
  local d=$out/bf16
  rm -rf "$d" && mkdir -p "$d"
  local summary
  summary=$(gpu_against_cpu "$d" 3e-3 "bf16, " --dtype bf16) || { echo "$summary"; return 1; }
  echo "$summary"
  grep -q 'BF16 peak' "$d/gpu1.txt" || { echo "MFU is not against the bf16 peak"; return 1; }
  # The note: the loss comparison and the attention path the run took.
  echo "$(echo "$summary" | tail -1 | cut -c1-70)... $(grep -m1 'attention:' "$d/gpu1.txt" | sed 's/^ *//')"
}

# expect_error WHAT COMMAND...: the command must exit 2 with exactly one "tetra: error:" line.
expect_error() {
  local what=$1 msg rc
  shift
  msg=$("$@" 2>&1)
  rc=$?
  echo "$msg" | grep '^tetra: error:'
  [ $rc -eq 2 ] && [ "$(echo "$msg" | grep -c '^tetra: error:')" -eq 1 ] ||
    { echo "$what: exit $rc"; return 1; }
}

has_nccl() { grep -q '^NCCL_LIBRARY:FILEPATH=/' "$B/CMakeCache.txt"; }

errors() {
  expect_error "no GPU" env CUDA_VISIBLE_DEVICES= "$TETRA" train "${SMALL[@]}" --device cuda ||
    return 1
  expect_error "nccl shared" mpirun -np 2 "$TETRA" train "${SMALL[@]}" --device cuda \
    --comm nccl --tp 2 || return 1
  echo "no GPU visible; --comm nccl on 2 ranks sharing the GPU: exit 2, one error line each"
}

bench() {
  bash tools/bench/gpu.sh "$out/bench"
  local rc=$?
  grep -A0 '^350m *tetra' "$out/bench/bench.txt" | tr -s ' ' | cut -c1-100
  return $rc
}

# losses FILE: the per-step losses of a --metrics file, one per line, as written.
losses() { python3 -c 'import json,sys; [print(json.loads(l)["loss"]) for l in open(sys.argv[1])]' "$1"; }

nccl() {
  has_nccl || { echo "this build found no NCCL"; return 77; }
  local d=$out/nccl layout
  rm -rf "$d" && mkdir -p "$d"
  "$TETRA" train "${SMALL[@]}" --device cuda --comm nccl --metrics "$d/nccl.jsonl" \
    >"$d/nccl.txt" || return 1
  "$TETRA" train "${SMALL[@]}" --device cuda --comm mpi --metrics "$d/mpi.jsonl" \
    >"$d/mpi.txt" || return 1
  grep communicators "$d/nccl.txt"
  grep -q "communicators: tp nccl, cp nccl, pp nccl, dp_cp nccl" "$d/nccl.txt" || return 1
  [ "$(losses "$d/nccl.jsonl")" = "$(losses "$d/mpi.jsonl")" ] ||
    { echo "NCCL and MPI losses differ"; return 1; }
  echo "1 rank, NCCL in every group: losses bitwise equal to the MPI path"
  for layout in "--tp 2" "--dp 2 --zero 3"; do
    # shellcheck disable=SC2086
    mpirun -np 2 "$TETRA" train "${SMALL[@]}" --device cuda $layout --metrics "$d/mix.jsonl" \
      >"$d/mix.txt" || return 1
    grep communicators "$d/mix.txt"
    python3 - "$d/mix.jsonl" "$d/mpi.jsonl" "$layout" <<'EOF' || return 1
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:3])
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
print(f"{sys.argv[3]} on one GPU, --comm auto: max rel loss gap to 1 rank {worst:.2e} (limit 1e-5)")
sys.exit(0 if len(a) == len(b) and worst <= 1e-5 else 1)
EOF
    rm -f "$d/mix.jsonl"
  done
}

layouts() {
  (cd "$B" && TETRA_TEST_DEVICE=cuda TETRA_TEST_COMM=mpi \
    ctest --output-on-failure -R '^(dp_zero|tp|pp|cp_4d|bf16)$') || return 1
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

phase build 300 build
if [ ! -x "$TETRA" ]; then
  echo "build failed: see $out/build.log" | tee -a "$report"
  tail -30 "$out/build.log"
  exit 1
fi
phase ops 120 ops
phase bf16 90 bf16
phase bench 420 bench
phase memcheck 120 sanitizer memcheck
phase racecheck 120 sanitizer racecheck
phase train 60 train
phase errors 30 errors
phase nccl 90 nccl
phase layouts 150 layouts

{
  echo "tetra GPU check, $(date -u +%FT%TZ), $(nvidia-smi -L 2>/dev/null | head -1)"
  printf '%-10s %-9s %6s  %s\n' phase result time note
  printf '%s\n' "${rows[@]}"
} | tee "$report"
! grep -q 'FAIL' "$report"
