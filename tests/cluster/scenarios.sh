# What the cluster tests share, sourced: the tiny model every scenario trains, and a
# scenario's result line with its wall time. `failed` is 1 once any scenario failed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
model="--layers 2 --dim 32 --heads 2 --kv-heads 2 --ffn-dim 64 --seq-len 16 --global-batch 8 \
  --peak-tflops 1"
failed=0
t0=0
begin() { t0=$(date +%s.%N); }
result() {  # NAME STATUS
  local s
  s=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)")
  if [ "$2" = 0 ]; then echo "scenario $1: ok ($s s)"; else echo "scenario $1: FAILED ($s s)"; failed=1; fi
}
