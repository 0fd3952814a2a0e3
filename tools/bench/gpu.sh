#!/usr/bin/env bash
# The GPU benchmark: tetra against PyTorch (eager with scaled_dot_product_attention, and
# torch.compile) training the same Llama on the same batch on one GPU in bf16
# (tools/bench/torch_llama.py says what makes it fair). Two models, seq 1024, vocab 32,000:
#   124m  dim 768, 12 layers, 12 heads (12 KV), ffn 2048
#   350m  dim 1024, 24 layers, 16 heads (8 KV), ffn 2816
# Per run: tokens/s, MFU (6N + 12 L d S per token against --peak-tflops, 989 for H100/H200
# dense bf16), HFU (= MFU: no recomputation), peak memory, and for tetra the stream time by
# category (GEMM, attention, other; CUDA events, TETRA_CUDA_TIMING=1). tetra's steps 0-4 are
# warm-up (cuDNN builds its graphs on first use), like PyTorch's 5 warm-up steps; 20 steps are
# measured. PyTorch's flash-attention backward is not deterministic; tetra's (cuDNN with
# deterministic backward, or the GEMM fallback) is.
#
#   bash tools/bench/gpu.sh [OUTDIR] [MODEL...]      (default /tmp/gpu_bench, both models)
# Uses build-gpu/tetra (tools/gpu_check.sh builds it) or $TETRA.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=$(realpath -m "${1:-/tmp/gpu_bench}")
shift || true
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(124m 350m)
TETRA=${TETRA:-$PWD/build-gpu/tetra}
PEAK=${PEAK_TFLOPS:-989}
MB=${MICRO_BATCH:-8}
GB=${GLOBAL_BATCH:-8}
mkdir -p "$out"
rows=()
status=0

shape() {
  case $1 in
  124m) echo "--dim 768 --layers 12 --heads 12 --kv-heads 12 --ffn-dim 2048" ;;
  350m) echo "--dim 1024 --layers 24 --heads 16 --kv-heads 8 --ffn-dim 2816" ;;
  *) echo "unknown model $1" >&2; return 1 ;;
  esac
}

for m in "${models[@]}"; do
  s=$(shape "$m") || exit 2
  common="$s --seq-len 1024 --vocab 32000 --micro-batch $MB --global-batch $GB"
  # tetra: 25 steps, the last 20 measured.
  cmd="TETRA_CUDA_TIMING=1 $TETRA train $common --steps 25 --warmup 5 --dtype bf16 --device cuda --peak-tflops $PEAK --metrics $out/$m.jsonl"
  rm -f "$out/$m.jsonl"
  if eval "$cmd" >"$out/$m.tetra.txt" 2>&1; then
    python3 - "$out/$m.jsonl" "$out/$m.tetra.txt" "$m" "$cmd" >"$out/$m.tetra.row" <<'PY'
import json, re, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][5:]
log = open(sys.argv[2]).read()
tok = statistics.mean(r["tokens_per_s"] for r in rows)
mfu = statistics.mean(r["mfu"] for r in rows)
hfu = statistics.mean(r["hfu"] for r in rows)
mem = max(r.get("peak_memory_bytes", 0) for r in rows)
cat = re.search(r"gemm ([0-9.]+) ms, attention ([0-9.]+) ms, other ([0-9.]+) ms \(stream total ([0-9.]+)", log)
attn = re.search(r"^\s*attention: (.*)$", log, re.M)
parts = ""
if cat:
    g, a, o, t = (float(x) for x in cat.groups())
    parts = f"gemm {100*g/t:.0f}% attn {100*a/t:.0f}% other {100*o/t:.0f}%"
print(f"{sys.argv[3]:5} tetra          {tok:10.0f} tok/s  MFU {100*mfu:5.1f}%  HFU {100*hfu:5.1f}%  "
      f"peak {mem/2**30:6.2f} GiB  {parts}  [{attn.group(1) if attn else 'attention path not printed'}]")
print(f"      command: {sys.argv[4]}")
PY
    rows+=("$(cat "$out/$m.tetra.row")")
  else
    rows+=("$m tetra FAILED: see $out/$m.tetra.txt")
    tail -5 "$out/$m.tetra.txt"
    status=1
  fi
  for mode in eager compile; do
    tcmd="python3 tools/bench/torch_llama.py $common --mode $mode --steps 20 --warmup-steps 5 --peak-tflops $PEAK"
    if eval "$tcmd" >"$out/$m.$mode.txt" 2>&1; then
      rows+=("$(python3 - "$out/$m.$mode.txt" "$m" "$mode" "$tcmd" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(f"{sys.argv[2]:5} torch {sys.argv[3]:8} {r['tokens_per_s']:10.0f} tok/s  MFU {100*r['mfu']:5.1f}%  "
      f"HFU {100*r['mfu']:5.1f}%  peak {r['peak_memory_bytes']/2**30:6.2f} GiB  (torch {r['torch']})")
print(f"      command: {sys.argv[4]}")
PY
)")
    else
      rows+=("$m torch $mode FAILED: see $out/$m.$mode.txt")
      tail -5 "$out/$m.$mode.txt"
      status=1
    fi
  done
done
{
  echo "tetra vs PyTorch, one GPU, bf16, micro-batch $MB, global batch $GB, seq 1024, vocab 32000, peak $PEAK TFLOP/s"
  printf '%s\n' "${rows[@]}"
  echo "PyTorch's flash-attention backward is not deterministic; tetra's is."
} | tee "$out/bench.txt"
exit $status
