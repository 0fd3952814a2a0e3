#!/usr/bin/env bash
# The GPU benchmark: tetra against PyTorch (eager with scaled_dot_product_attention, and
# torch.compile) training the same Llama on the same batch on one GPU in bf16
# (tools/bench/torch_llama.py says what makes it fair). Models, seq 1024, vocab 32,000:
#   350m  dim 1024, 24 layers, 16 heads (8 KV), ffn 2816   (the default)
#   124m  dim 768, 12 layers, 12 heads (12 KV), ffn 2048   (when named)
# Per run: tokens/s, MFU (6N + 12 L d S per token against the GPU's dense bf16 peak, from its
# name: H100/H200 SXM 989, H100/H200 NVL 835, H100 PCIe 756, A100 312; PEAK_TFLOPS overrides),
# HFU (= MFU: no recomputation), peak memory. tetra's headline comes from a run without timing
# events (25 steps, steps 0-4 warm-up, as cuDNN builds its graphs on first use; PyTorch's 5
# warm-up steps likewise, then 20 measured); a second, shorter tetra run with
# TETRA_CUDA_TIMING=1 (10 steps, warm-up included) gives the stream time by category (GEMM,
# attention, other; "other" includes the stream's idle gaps). The table is rewritten after each
# run, so a run stopped on its way leaves the rows before it.
#
#   bash tools/bench/gpu.sh [OUTDIR] [MODEL...]      (default /tmp/gpu_bench, 350m)
# Uses build-gpu/tetra (tools/gpu_check.sh builds it) or $TETRA. BENCH_BUDGET_S: seconds for all
# the runs (each stopped at what is left, torch.compile last). Exit 0: every run worked and
# tetra's attention is cuDNN both ways; 77: PyTorch is missing (tetra's rows stand); 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=$(realpath -m "${1:-/tmp/gpu_bench}")
shift || true
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(350m)
TETRA=${TETRA:-$PWD/build-gpu/tetra}
MB=${MICRO_BATCH:-8}
GB=${GLOBAL_BATCH:-8}
mkdir -p "$out"

gpu=$(nvidia-smi -L 2>/dev/null | head -1)
gpu=${gpu:-"no GPU listed by nvidia-smi -L"}
name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case $name in
*"H100 NVL"* | *"H200 NVL"*) PEAK=835 ;;
*"H100 PCIe"*) PEAK=756 ;;
*H100* | *H200*) PEAK=989 ;;
*A100*) PEAK=312 ;;
*) PEAK= ;;
esac
if [ -n "${PEAK_TFLOPS:-}" ]; then
  PEAK=$PEAK_TFLOPS peak_from="PEAK_TFLOPS"
elif [ -n "$PEAK" ]; then
  peak_from="the dense bf16 peak of the $name"
else
  echo "gpu bench: no known dense bf16 peak for the GPU '${name:-none}': set PEAK_TFLOPS"
  exit 2
fi

rows=()
status=0
table() {
  {
    echo "tetra vs PyTorch, one GPU, bf16, micro-batch $MB, global batch $GB, seq 1024, vocab 32000"
    echo "$gpu; peak $PEAK TFLOP/s ($peak_from)"
    printf '%s\n' "${rows[@]}"
    echo "MFU counts attention as 12·L·d·S FLOPs per token (full S×S, PaLM's convention) although"
    echo "it is causal: about 7% more than the real FLOPs at 350M and S 1024, the same on both sides."
    echo "tetra's attention backward is deterministic (cuDNN's deterministic algorithm); PyTorch's"
    echo "flash-attention backward is not. PyTorch keeps the residual stream and the logits in fp32,"
    echo "tetra in bf16; PyTorch runs q, k, v and gate, up as separate GEMMs, tetra fused."
  } >"$out/bench.txt"
}
row() {
  rows+=("$@")
  printf '%s\n' "$@"
  table
}

# run LOG COMMAND: the command line with its output in LOG, stopped when BENCH_BUDGET_S is spent.
run() {
  local left=$((${BENCH_BUDGET_S:-100000} - SECONDS))
  [ $left -gt 5 ] || { echo "not run: BENCH_BUDGET_S spent" >"$1"; return 124; }
  eval "timeout --kill-after=5 $left $2" >"$1" 2>&1
}
# failed WHAT LOG RC: the row of a run that failed.
failed() {
  local why="FAILED"
  [ "$3" -eq 124 ] && why="stopped: BENCH_BUDGET_S spent"
  row "$1 $why: see $2"
  tail -5 "$2"
  status=1
}

shape() {
  case $1 in
  124m) echo "--dim 768 --layers 12 --heads 12 --kv-heads 12 --ffn-dim 2048" ;;
  350m) echo "--dim 1024 --layers 24 --heads 16 --kv-heads 8 --ffn-dim 2816" ;;
  *) echo "unknown model $1" >&2; return 1 ;;
  esac
}

echo "$gpu; peak $PEAK TFLOP/s ($peak_from)"
for m in "${models[@]}"; do
  s=$(shape "$m") || exit 2
  common="$s --seq-len 1024 --vocab 32000 --micro-batch $MB --global-batch $GB --peak-tflops $PEAK"
  # tetra, the headline: no timing events.
  cmd="$TETRA train $common --steps 25 --warmup 5 --dtype bf16 --device cuda --metrics $out/$m.jsonl"
  rm -f "$out/$m.jsonl"
  run "$out/$m.tetra.txt" "$cmd"
  rc=$?
  if [ $rc -eq 0 ]; then
    python3 - "$out/$m.jsonl" "$out/$m.tetra.txt" "$m" "$cmd" >"$out/$m.tetra.row" <<'PY'
import json, re, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][5:]
log = open(sys.argv[2]).read()
tok = statistics.mean(r["tokens_per_s"] for r in rows)
mfu = statistics.mean(r["mfu"] for r in rows)
hfu = statistics.mean(r["hfu"] for r in rows)
mem = max(r.get("peak_memory_bytes", 0) for r in rows)
attn = re.search(r"^\s*attention: (.*)$", log, re.M)
print(f"{sys.argv[3]:5} tetra          {tok:10.0f} tok/s  MFU {100*mfu:5.1f}%  HFU {100*hfu:5.1f}%  "
      f"peak {mem/2**30:6.2f} GiB  [{attn.group(1) if attn else 'attention path not printed'}]")
print(f"      command: {sys.argv[4]}")
PY
    row "$(cat "$out/$m.tetra.row")"
    grep -Eq '^ *attention: cudnn sdpa \([^)]*\), forward and backward$' "$out/$m.tetra.txt" ||
      { row "$m tetra: attention is not cuDNN both ways (the fallback is about half the MFU)"; status=1; }
  else
    failed "$m tetra" "$out/$m.tetra.txt" $rc
  fi
  # tetra again, shorter, with the per-category CUDA events on: where the stream's time goes.
  tcmd="env TETRA_CUDA_TIMING=1 $TETRA train $common --steps 10 --warmup 5 --dtype bf16 --device cuda"
  run "$out/$m.timing.txt" "$tcmd"
  rc=$?
  if [ $rc -eq 0 ]; then
    row "$(python3 - "$out/$m.timing.txt" "$m" <<'PY'
import re, sys
cat = re.search(r"gemm ([0-9.]+) ms, attention ([0-9.]+) ms, other ([0-9.]+) ms \(stream total ([0-9.]+)",
                open(sys.argv[1]).read())
if cat:
    g, a, o, t = (float(x) for x in cat.groups())
    print(f"{sys.argv[2]:5} tetra split    gemm {100*g/t:.0f}%  attention {100*a/t:.0f}%  other {100*o/t:.0f}%"
          f"  of {t:.0f} ms stream time over 10 steps (TETRA_CUDA_TIMING=1, warm-up included)")
else:
    print(f"{sys.argv[2]:5} tetra split    not printed (see {sys.argv[1]})")
PY
)"
  else
    failed "$m tetra split" "$out/$m.timing.txt" $rc
  fi
  if ! python3 -c 'import torch' 2>/dev/null; then
    row "$m torch SKIPPED: no PyTorch here"
    [ $status -eq 0 ] && status=77
    continue
  fi
  for mode in eager compile; do
    pcmd="python3 tools/bench/torch_llama.py $common --mode $mode --steps 20 --warmup-steps 5 --json $out/$m.$mode.json"
    rm -f "$out/$m.$mode.json"
    run "$out/$m.$mode.txt" "$pcmd"
    rc=$?
    if [ $rc -eq 0 ]; then
      row "$(python3 - "$out/$m.$mode.json" "$m" "$mode" "$pcmd" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:5} torch {sys.argv[3]:8} {r['tokens_per_s']:10.0f} tok/s  MFU {100*r['mfu']:5.1f}%  "
      f"HFU {100*r['mfu']:5.1f}%  peak {r['peak_memory_bytes']/2**30:6.2f} GiB  (torch {r['torch']})")
print(f"      command: {sys.argv[4]}")
PY
)"
    else
      failed "$m torch $mode" "$out/$m.$mode.txt" $rc
    fi
  done
done
cat "$out/bench.txt"
exit $status
