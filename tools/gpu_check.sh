#!/usr/bin/env bash
# The GPU check, for a machine with a GPU, CUDA and Python but no MPI, Eigen, doctest,
# nlohmann-json, CLI11 or network. Run tools/gpu_bundle.sh first where the registries are
# reachable and carry its pack, .gpu-pack/, along (unpacked into .gpu/ before anything runs): its
# prebuilt tetra and unit_tests (sm_90) run where ldd finds their libraries and one op runs;
# otherwise the check builds on the machine (build-gpu/, CUDA backend for sm_90 only, NCCL and
# cuDNN from the CUDA toolkit or PyPI's nvidia-nccl / nvidia-cudnn, the cudnn-frontend headers
# from the bundle). A device session (15 minutes, at most 10 a command) runs it as two
# commands, the second on the warm machine straight after:
#   run(command="bash tools/gpu_check.sh first", carry=[".gpu-pack"], timeout_s=560)
#   run(command="bash tools/gpu_check.sh second", carry=[".gpu-pack"], timeout_s=300)
# first (540 s): build, ops, bf16, memcheck; second (300 s): bins (the binaries only, no
# compile), bench, train. Each phase runs under its own limit, within what is left of the
# command's budget (a phase marked "if time is left" says SKIP when less is left than its
# limit); `--dry-run` prints both plans and fails if a plan's limits exceed its budget. Each row
# is printed as its phase ends and the table rewritten to OUTDIR/gpu_check.txt after every
# phase, with a log per phase. OUTDIR is $OUT/gc where $OUT is set, else a first argument that
# is not a phase, else /tmp/gpu_check. The phases:
#   build     the binaries: the bundle's where they run, else cmake (ninja, sm_90) and a build of
#             tetra and unit_tests (and layout_tests when layouts is asked); prints which, and
#             the cuDNN and NCCL versions and libraries they load; FAILs with cuDNN off
#   bins      as build, without compiling: the bundle's, else build-gpu's from an earlier command
#   ops       every CUDA op against the CPU backend in fp32 (test_cuda_backend.cpp) and on the
#             native bf16 path against the CPU's bf16 reference (test_cuda_bf16.cpp), RoPE
#             in place and strided attention, and every later fused op (test_cuda_*.cpp),
#             each test running every op twice for bit-equality; cuDNN's validate() of tetra's
#             graphs; the NCCL communicator's calls on a group of one (tests/unit/test_nccl.cpp);
#             once
#   bf16      --dtype bf16 on the GPU against the CPU: 8 steps within 3e-3 relative (the bf16
#             layout tests' bound), two GPU runs bitwise equal, the GPU's own dense BF16 peak,
#             and cuDNN attention in both the forward and the backward
#   memcheck  compute-sanitizer memcheck over tetra's own kernels' op tests (not the cases of
#             cuBLAS, cuBLASLt, cuDNN or NCCL kernels)
#   bench     tools/bench/gpu.sh 350m: tetra against PyTorch eager and torch.compile
#   train     one GPU against the CPU in fp32: 8 steps, per-step losses within 2e-4 relative;
#             two GPU runs bitwise equal; the final weights of both, tensor by tensor (printed);
#             a run checkpointing in the background (--ckpt-async) through NCCL (--overlap on,
#             grad_alias off: the queue on the group of one) and its resume from step 4, both
#             bitwise equal to the plain run; the stall
# and only when named:
#   racecheck compute-sanitizer racecheck over the same op tests as memcheck
#   errors    --device cuda with no GPU visible, --comm nccl with two ranks on one GPU: one
#             error line each, exit 2
#   nccl      NCCL in every group of a one-rank run (losses bitwise equal to the MPI path's);
#             --comm auto in TP 2 and DP 2 runs on the one GPU (ranks that share it: MPI
#             through pinned staging; groups of one: no communicator)
#   layouts   the DP, TP, PP, CP, 4D and bf16 layout tests, every rank on the one GPU (MPI path;
#             built on the machine)
# A phase whose feature the machine lacks or refuses says SKIP, never PASS.
#
#   bash tools/gpu_check.sh first|second            the planned commands
#   bash tools/gpu_check.sh [OUTDIR] PHASE...       the phases named, in the order given
#   bash tools/gpu_check.sh --dry-run               the plans, their limits and budgets
# GPU_CHECK_BUDGET_S replaces a planned command's budget (say, when the session has less device
# time left than 300 s for `second`: its phases then stop at what is left, the table written).
# TETRA and UNIT_TESTS, when both set, name the binaries to use instead of choosing them.
set -uo pipefail
self=$(realpath "$0")
cd "$(dirname "$0")/.." || exit 1

# Seconds each phase may take, and the two commands: their budgets and phases in order ("?":
# only if time is left).
declare -A LIMIT=([build]=250 [bins]=15 [ops]=140 [bf16]=90 [memcheck]=60 [bench]=215
  [train]=70 [racecheck]=120 [errors]=30 [nccl]=90 [layouts]=150)
declare -A BUDGET=([first]=540 [second]=300)
declare -A PLAN=([first]="build ops bf16 memcheck?" [second]="bins bench train?")

# The bundle as carried (tools/gpu_bundle.sh), unpacked once; phases run in copies of this script.
case ${1:-} in
--run-phase | --dry-run) ;;
*) [ ! -f .gpu-pack/gpu.tar.xz ] || python3 tools/gpu_unpack.py .gpu-pack/gpu.tar.xz . || exit 1 ;;
esac
if [ -d .gpu/openmpi ]; then
  export OPAL_PREFIX=$PWD/.gpu/openmpi
  export PATH=$OPAL_PREFIX/bin:$PATH LD_LIBRARY_PATH=$OPAL_PREFIX/lib:${LD_LIBRARY_PATH:-}
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
export OMPI_MCA_osc=^ucx  # the wheel's UCX one-sided component complains where UCX is absent
B=$PWD/build-gpu
PREBUILT=$PWD/.gpu/bin
OPS=--source-file='*test_cuda_*.cpp,*test_cudnn_validate.cpp,*test_nccl.cpp'
# tetra's own kernels: the op tests of both files that call no cuBLAS, cuBLASLt or cuDNN.
OWN=(--source-file='*test_cuda_backend.cpp,*test_cuda_bf16.cpp'
  --test-case='*elementwise*,*cp_zigzag of bf16*,*sums of squares*,*embedding*,*rmsnorm*,*rope*,*cross-entropy*,*adamw*')
# The layout tests' model (tests/mpi/layout_check.cpp), 5 steps.
TINY=(--layers 4 --dim 64 --heads 8 --kv-heads 4 --ffn-dim 128 --seq-len 16 --peak-tflops 1
  --lr 1e-2 --warmup 2 --steps 5 --global-batch 8 --micro-batch 1)
# The model of the loss comparisons. Its GPU runs take the peak from tetra's table of GPUs.
SMALL=(--dim 128 --layers 4 --heads 8 --kv-heads 4 --ffn-dim 384 --seq-len 64 --global-batch 8
  --steps 8)
CUDNN_BOTH='^ *attention: cudnn sdpa \([^)]*\), forward and backward$'

# binaries: sets TETRA and T (unit_tests) to those the build phase chose.
binaries() {
  [ -f "$out/binaries.sh" ] || { echo "no binaries chosen: run the build or bins phase first"; exit 1; }
  # shellcheck source=/dev/null
  source "$out/binaries.sh"
}

# runs TETRA UNIT_TESTS: whether both find their libraries and unit_tests runs one op on the GPU.
runs() {
  local log
  [ -x "$1" ] && [ -x "$2" ] || { echo "no $1 and $2"; return 1; }
  if ldd "$1" "$2" | grep 'not found'; then return 1; fi
  log=$("$2" --source-file='*test_cuda_backend.cpp' --test-case='*rmsnorm*' 2>&1)
  if grep -q 'no GPU: skipped' <<<"$log" || ! grep -q 'Status: SUCCESS' <<<"$log"; then
    echo "$log" | tail -5
    echo "$2: the one-op run (rmsnorm) failed"
    return 1
  fi
}

# links_nccl: whether the chosen tetra loads NCCL (a build without it has no --comm nccl).
links_nccl() { ldd "$TETRA" | grep -q libnccl; }

# libs BINARY: the cuDNN and NCCL libraries BINARY loads, with their versions (asked of each
# library); fails where BINARY has no cuDNN path (it links cuDNN only then).
libs() {
  local cudnn nccl
  cudnn=$(ldd "$1" | awk '/libcudnn\.so/ && $3 ~ /^\// {print $3; exit}')
  nccl=$(ldd "$1" | awk '/libnccl\.so/ && $3 ~ /^\// {print $3; exit}')
  python3 - "$cudnn" "$nccl" <<'EOF'
import ctypes, sys
cudnn, nccl = sys.argv[1:3]
if nccl:
    v = ctypes.c_int()
    ctypes.CDLL(nccl).ncclGetVersion(ctypes.byref(v))
    print(f"NCCL {v.value // 10000}.{v.value // 100 % 100}.{v.value % 100} ({nccl})")
else:
    print("NCCL: none (GPU groups communicate over MPI)")
if not cudnn:
    print("cuDNN path off: this build has no cuDNN")
    sys.exit(1)
v = ctypes.CDLL(cudnn).cudnnGetVersion()
print(f"cuDNN {v // 10000}.{v // 100 % 100}.{v % 100} ({cudnn})")
if v < 90600:
    print("cuDNN before 9.6 refuses the CP chunks' bottom-right masks of sizes not multiples of 64")
EOF
}

# build [--no-build]: the binaries, written to OUTDIR/binaries.sh for the later phases: TETRA and
# UNIT_TESTS where both are set; else the bundle's where they run (not for layouts, which runs
# build-gpu's ctest); else, with --no-build, build-gpu's where they run (built by an earlier
# command on this machine); else a build into build-gpu. Then the cuDNN and NCCL they load.
build() {
  nvidia-smi -L || { echo "nvidia-smi -L failed: no GPU"; return 1; }
  local tetra unit used
  if [ -n "${TETRA:-}" ] && [ -n "${UNIT_TESTS:-}" ]; then
    runs "$TETRA" "$UNIT_TESTS" || return 1
    tetra=$TETRA unit=$UNIT_TESTS used="the binaries named by TETRA and UNIT_TESTS"
  elif [[ "$only" != *" layouts "* ]] && runs "$PREBUILT/tetra" "$PREBUILT/unit_tests"; then
    tetra=$PREBUILT/tetra unit=$PREBUILT/unit_tests used="the bundle's prebuilt binaries (.gpu/bin)"
  elif [ "${1:-}" = --no-build ]; then
    runs "$B/tetra" "$B/tests/unit_tests" || { echo "no binaries that run, and no build here"; return 1; }
    tetra=$B/tetra unit=$B/tests/unit_tests used="build-gpu's binaries, built by an earlier command"
  else
    local gen=() targets=(tetra unit_tests)
    command -v ninja >/dev/null && gen=(-G Ninja)
    [[ "$only" == *" layouts "* ]] && targets+=(layout_tests)
    cmake -S . -B "$B" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTETRA_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.gpu/deb/usr" | grep 'tetra:' ||
      return 1
    cmake --build "$B" -j"$(nproc)" --target "${targets[@]}" || return 1
    tetra=$B/tetra unit=$B/tests/unit_tests
    used="built here into build-gpu for sm_90 with $(nvcc --version | tail -1)"
  fi
  printf 'TETRA=%q\nT=%q\n' "$tetra" "$unit" >"$out/binaries.sh"
  libs "$tetra" || return 1
  echo "$used"
}

# The op suite, once: each test case runs every op twice and compares the runs bit for bit.
ops() {
  local log
  log=$("$T" "$OPS" 2>&1)
  echo "$log"
  grep -q "no GPU: skipped" <<<"$log" && { echo "no GPU seen"; return 1; }
  grep -q "Status: SUCCESS" <<<"$log" || return 1
  echo "$log" | grep 'test cases:' | tr -s ' '
}

# sanitizer TOOL: compute-sanitizer TOOL over tetra's own kernels' op tests; SKIP where it is
# missing or refuses the device.
sanitizer() {
  local cs log rc refusal
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null) ||
    { echo "compute-sanitizer not found"; return 77; }
  # Memory and race errors only: tetra's own CUDA API errors already fail the tests (they throw).
  log=$("$cs" --tool "$1" --report-api-errors no --error-exitcode 1 "$T" "${OWN[@]}" 2>&1)
  rc=$?
  echo "$log"
  # Its own lines start with "=========".
  refusal=$(echo "$log" | grep -i -m1 -e '^=.*not supported' -e '^=.*unsupported device')
  if [ $rc -ne 0 ] && [ -n "$refusal" ]; then
    echo "compute-sanitizer refuses this device: ${refusal#*= }"
    return 77
  fi
  grep -q "no GPU: skipped" <<<"$log" && { echo "no GPU seen"; return 1; }
  [ $rc -eq 0 ] && grep -q "Status: SUCCESS" <<<"$log" || return 1
  echo "$1: no errors over tetra's kernels' op tests ($(echo "$log" | grep -o '[0-9]* passed' | head -1))"
}

# gpu_against_cpu DIR LIMIT LABEL [FLAGS...]: the SMALL model with FLAGS twice on the GPU and
# once on the CPU; per-step losses within LIMIT relative, the two GPU runs bitwise equal.
gpu_against_cpu() {
  local d=$1 limit=$2 label=$3
  shift 3
  "$TETRA" train "${SMALL[@]}" "$@" --device cuda --metrics "$d/gpu1.jsonl" >"$d/gpu1.txt" &&
    "$TETRA" train "${SMALL[@]}" "$@" --device cuda --metrics "$d/gpu2.jsonl" >"$d/gpu2.txt" &&
    "$TETRA" train "${SMALL[@]}" "$@" --device cpu --peak-tflops 1 --metrics "$d/cpu.jsonl" \
      >"$d/cpu.txt" || return 1
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
  gpu_against_cpu "$d" 2e-4 "" && gpu_resume "$d"
}

# After gpu_against_cpu in D: the paths of [24/29] that no GPU has run. A run that checkpoints
# every 4 steps in the background (the copy stream into pinned memory) through NCCL where the
# build has it (with --overlap on and grad_alias off, ZeroParams hands the gradients over and
# gathers the updated weights through the queue even on the data-parallel group of one: NCCL's
# own stream and second communicator, joined by events; with the fusion on a group of one has
# nothing to queue), then a run resumed from its step-4 checkpoint: both give the plain run's
# losses to the bit (checkpoints, the communicator, the fusion and overlap change no bit; a
# resume is exact).
gpu_resume() {
  local d=$1 comm=mpi
  links_nccl && comm=nccl
  TETRA_UNFUSED=grad_alias "$TETRA" train "${SMALL[@]}" --device cuda --comm $comm --overlap on \
    --ckpt-async --ckpt-every 4 --ckpt-dir "$d/ck" --metrics "$d/async.jsonl" >"$d/async.txt" &&
    "$TETRA" train "${SMALL[@]}" --device cuda --comm $comm --resume "$d/ck/step_00000004" \
      --metrics "$d/resumed.jsonl" >"$d/resumed.txt" || return 1
  grep -m1 '^checkpoint: step 4 ' "$d/async.txt"
  python3 - "$d" "$comm" <<'EOF'
import json, sys
d, comm = sys.argv[1:3]
load = lambda n: {r["step"]: r["loss"] for r in map(json.loads, open(f"{d}/{n}.jsonl"))}
plain, run, resumed = load("gpu1"), load("async"), load("resumed")
same = run == plain
exact = sorted(resumed) == list(range(4, 8)) and all(resumed[s] == plain[s] for s in resumed)
print(f"--ckpt-async, --comm {comm}, --overlap on, grad_alias off: losses "
      f"{'bitwise equal' if same else 'DIFFER'}; resumed from step 4: steps 4-7 "
      f"{'bitwise equal' if exact else 'DIFFER'}")
sys.exit(0 if same and exact else 1)
EOF
}

# bf16 on the GPU (the native bf16 path) against bf16 on the CPU (the mixed-precision wrapper,
# the reference): per-step losses within 3e-3 relative, the bound of the bf16 layout tests
# (tests/mpi/test_bf16.cpp), since a value near a rounding tie may round to the other neighbour
# on the other device; two GPU runs bitwise equal; the run's peak the GPU's dense BF16 peak from
# tetra's table (train/peak.cpp); cuDNN attention both ways (the fallback is about half the MFU).
bf16() {
  local d=$out/bf16 summary peak attn
  rm -rf "$d" && mkdir -p "$d"
  summary=$(gpu_against_cpu "$d" 3e-3 "bf16, " --dtype bf16)
  local rc=$?
  echo "$summary"
  peak=$(grep -m1 '^ *peak:' "$d/gpu1.txt" | sed 's/^ *//')
  attn=$(grep -m1 '^ *attention:' "$d/gpu1.txt" | sed 's/^ *//')
  echo "$peak"
  echo "$attn"
  [ $rc -eq 0 ] || return 1
  [[ "$peak" == *"dense BF16 peak"* ]] || { echo "MFU is not against a GPU's BF16 peak: $peak"; return 1; }
  grep -Eq "$CUDNN_BOTH" "$d/gpu1.txt" || { echo "not cuDNN both ways: $attn"; return 1; }
  echo "$(echo "$summary" | tail -1 | grep -o 'max rel loss gap GPU vs CPU [^;]*' |
    sed 's/max rel loss gap GPU vs CPU/max rel loss gap to the CPU/'), GPU runs bitwise equal;" \
    "${peak##*, }; cuDNN both ways"
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

errors() {
  expect_error "no GPU" env CUDA_VISIBLE_DEVICES= "$TETRA" train "${SMALL[@]}" --device cuda ||
    return 1
  expect_error "nccl shared" mpirun -np 2 "$TETRA" train "${SMALL[@]}" --device cuda \
    --comm nccl --tp 2 || return 1
  echo "no GPU visible; --comm nccl on 2 ranks sharing the GPU: exit 2, one error line each"
}

bench() {
  # The runs stop 10 s before the phase's limit, so that the table and the note are written.
  TETRA=$TETRA BENCH_BUDGET_S=$((limit - 10)) bash tools/bench/gpu.sh "$out/bench" 350m
  local rc=$?
  grep -m1 '^350m *tetra' "$out/bench/bench.txt" | tr -s ' ' | cut -c1-100
  return $rc
}

# losses FILE: the per-step losses of a --metrics file, one per line, as written.
losses() { python3 -c 'import json,sys; [print(json.loads(l)["loss"]) for l in open(sys.argv[1])]' "$1"; }

nccl() {
  links_nccl || { echo "this build has no NCCL"; return 77; }
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
  [ -x "$B/layout_tests" ] || { echo "no build-gpu/layout_tests: run build with layouts"; return 1; }
  (cd "$B" && TETRA_TEST_DEVICE=cuda TETRA_TEST_COMM=mpi \
    ctest --output-on-failure -R '^(dp_zero|tp|pp|cp_4d|bf16)$') || return 1
}

# dry_run: each command's phases with their limits, their sum against its budget.
dry_run() {
  local cmd p status=0 sum plan
  for cmd in first second; do
    sum=0
    read -ra plan <<<"${PLAN[$cmd]}"
    echo "$cmd: bash tools/gpu_check.sh $cmd (budget ${BUDGET[$cmd]} s):"
    for p in "${plan[@]}"; do
      printf '  %-10s %4d s%s\n' "${p%\?}" "${LIMIT[${p%\?}]}" "$([[ $p == *\? ]] && echo '  if time is left')"
      sum=$((sum + LIMIT[${p%\?}]))
    done
    printf '  %-10s %4d s of %d s: %s\n' sum $sum "${BUDGET[$cmd]}" \
      "$([ $sum -le "${BUDGET[$cmd]}" ] && echo fits || echo OVER)"
    [ $sum -le "${BUDGET[$cmd]}" ] || status=1
  done
  echo "only when named: racecheck ${LIMIT[racecheck]} s, errors ${LIMIT[errors]} s," \
    "nccl ${LIMIT[nccl]} s, layouts ${LIMIT[layouts]} s"
  return $status
}

if [ "${1:-}" = --run-phase ]; then
  out=$GPU_CHECK_OUT only=$GPU_CHECK_ONLY limit=$GPU_CHECK_LIMIT
  shift
  [ "$1" = build ] || binaries
  "$@"
  exit
fi
[ "${1:-}" = --dry-run ] && { dry_run; exit; }

# The command line: the output folder, then a planned command or the phases named.
out=/tmp/gpu_check
if [ $# -gt 0 ] && [ -z "${LIMIT[${1%\?}]+x}" ] && [ -z "${PLAN[$1]+x}" ]; then
  out=$1
  shift
fi
[ -n "${OUT:-}" ] && out=$OUT/gc
out=$(realpath -m "$out")
budget=100000 phases=("$@") label="the phases named"
if [ $# -eq 1 ] && [ -n "${PLAN[$1]+x}" ]; then
  budget=${GPU_CHECK_BUDGET_S:-${BUDGET[$1]}} label="command $1"
  read -ra phases <<<"${PLAN[$1]}"
fi
for p in "${phases[@]}"; do
  [ -n "${LIMIT[${p%\?}]+x}" ] || { echo "gpu_check: no phase $p (first, second or: ${!LIMIT[*]})"; exit 2; }
done
[ ${#phases[@]} -gt 0 ] || { echo "gpu_check: name first, second or phases (--dry-run shows them)"; exit 2; }
only=" ${phases[*]//\?/} "
mkdir -p "$out"
report=$out/gpu_check.txt
echo "gpu_check: ${phases[*]} (budget $budget s) into $out"

rows=()
write_report() {
  {
    echo "tetra GPU check, $label, $(date -u +%FT%TZ), $(nvidia-smi -L 2>/dev/null | head -1)"
    printf '%-10s %-9s %6s  %s\n' phase result time note
    printf '%s\n' "${rows[@]}"
  } >"$report"
}

# phase NAME[?]: runs the phase under its limit (at most what is left of the budget), its output
# in OUTDIR/NAME.log; exit 0 is PASS, 77 SKIP, anything else FAIL (124: over its limit). The last
# line of the log is the note. "NAME?" runs only if its whole limit is left.
phase() {
  local name=${1%\?} left=$((budget - SECONDS)) limit t0=$SECONDS rc result note
  limit=${LIMIT[$name]}
  if [[ $1 == *\? && $left -lt $limit ]] || [ $left -lt 5 ]; then
    rc=77 note="not run: $left s left of the budget, the phase needs $limit s"
  else
    [ $left -lt "$limit" ] && limit=$left
    local run=("$name")
    case $name in
    memcheck | racecheck) run=(sanitizer "$name") ;;
    bins) run=(build --no-build) ;;
    esac
    # The phase runs in a fresh copy of this script, so that timeout can stop it whole.
    GPU_CHECK_OUT=$out GPU_CHECK_ONLY=$only GPU_CHECK_LIMIT=$limit timeout --kill-after=5 "$limit" \
      bash "$self" --run-phase "${run[@]}" >"$out/$name.log" 2>&1
    rc=$?
    note=$(grep -v '^\s*$' "$out/$name.log" | tail -1 | cut -c1-110)
    [ $rc -eq 124 ] && note="over its $limit s limit; $note"
  fi
  result=PASS
  [ $rc -eq 77 ] && result=SKIP
  [ $rc -ne 0 ] && [ $rc -ne 77 ] && result="FAIL($rc)"
  rows+=("$(printf '%-10s %-9s %5ds  %s' "$name" "$result" $((SECONDS - t0)) "$note")")
  echo "${rows[-1]}"
  write_report
  [ $rc -eq 0 ] || [ $rc -eq 77 ]
}

[[ "$only" == *" build "* || "$only" == *" bins "* ]] && rm -f "$out/binaries.sh"
status=0
for p in "${phases[@]}"; do
  phase "$p" || status=1
  if [ ! -f "$out/binaries.sh" ]; then
    echo "no binaries: see the build or bins log in $out"
    break
  fi
done
cat "$report"
exit $status
