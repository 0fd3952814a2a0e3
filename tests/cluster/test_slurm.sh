#!/usr/bin/env bash
# Cluster test (a): tetra on a throwaway single-node Slurm cluster (slurm_cluster.sh).
#   srun_4, srun_8   srun --mpi=pmix at 4 and 8 ranks trains exactly as mpirun does
#   srun_no_pmix     srun without PMIx (singleton ranks) is refused with one line, exit 2
#   requeue_kill     tools/slurm/train.sbatch with a rank killed: Slurm requeues the job, which
#                    resumes to the same final weights, byte for byte, as an uninterrupted run
#   preempt          the same job signalled (scancel --signal=USR1) checkpoints, requeues and
#                    resumes with no step lost or repeated, to the same bytes
#   sigint           one SIGINT to tetra launch stops the srun under it, tasks and all
# Usage: test_slurm.sh TETRA_BINARY. Needs root (munged, slurmd); prints each scenario's wall
# time; removes everything it made.
set -euo pipefail
tetra=$1
repo=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: the Slurm test needs root"
  exit 77
fi
for tool in munged slurmctld slurmd srun; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is missing (tools/test.sh installs it)"; exit 1; }
done
source "$repo/tests/cluster/slurm_cluster.sh"
W=$(mktemp -d /tmp/tetra_slurm_XXXXXX)
trap 'slurm_down; [ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
slurm_up "$W/slurm" 16
# Open MPI does not know that Slurm oversubscribes the node: without yielding, ranks that
# busy-poll starve the others on 2 cores.
export OMPI_MCA_mpi_yield_when_idle=1 TETRA=$tetra
source "$repo/tests/cluster/scenarios.sh"
model="$model --timeout 60"
numbers() { grep -o '"\(loss\|grad_norm\)":[^,]*' "$1"; }
steps() { grep -o '"step":[0-9]*' "$1" | cut -d: -f2 | tr '\n' ' '; }
# Waits for a batch job to leave the queue for good and prints its final state and restart
# count. A job that requeues itself passes through an end state on its way back to pending,
# so an end state counts once it has held for 2 s.
wait_job() {
  local i job state held=0
  for i in $(seq 600); do
    job=$(scontrol show job "$1" 2>/dev/null)
    state=$(grep -o 'JobState=[A-Z_]*' <<<"$job" | cut -d= -f2)
    case $state in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) held=$((held + 1)) ;;
      *) held=0 ;;
    esac
    if [ "$held" -ge 5 ]; then
      echo "$state $(grep -o 'Restarts=[0-9]*' <<<"$job" | cut -d= -f2)"
      return 0
    fi
    sleep 0.5
  done
  echo "TIMEOUT-OF-TEST 0"
}

for n in 4 8; do
  begin
  layout="--tp 2"
  [ "$n" = 8 ] && layout="--tp 2 --pp 2"
  rc=0
  srun --mpi=pmix -n "$n" "$tetra" train $model $layout --steps 3 --metrics "$W/srun$n.jsonl" \
    >"$W/srun$n.out" 2>&1 || rc=$?
  mpirun --oversubscribe -np "$n" "$tetra" train $model $layout --steps 3 \
    --metrics "$W/mpirun$n.jsonl" >"$W/mpirun$n.out" 2>&1 || rc=$?
  ok=1
  [ "$rc" = 0 ] && [ "$(numbers "$W/srun$n.jsonl" | wc -l)" = 6 ] &&
    [ "$(numbers "$W/srun$n.jsonl")" = "$(numbers "$W/mpirun$n.jsonl")" ] &&
    grep -q "^tetra train: $n ranks, " "$W/srun$n.out" && ok=0
  [ "$ok" = 0 ] || { echo "exit $rc"; tail -n 5 "$W/srun$n.out" "$W/mpirun$n.out"; }
  result "srun_$n" "$ok"
done

begin
rc=0
srun --mpi=none -n 2 "$tetra" train $model --steps 1 >"$W/nopmix.out" 2>"$W/nopmix.err" || rc=$?
ok=1
[ "$rc" = 2 ] && [ "$(grep -c "tetra: error" "$W/nopmix.err")" = 1 ] &&
  grep -q "^tetra: error: srun started 2 tasks without PMIx, so MPI cannot connect them into one job .*; run srun --mpi=pmix, or set MpiDefault=pmix in slurm.conf$" "$W/nopmix.err" &&
  ok=0
[ "$ok" = 0 ] || { echo "exit $rc"; cat "$W/nopmix.err"; }
result srun_no_pmix "$ok"

# The uninterrupted run both jobs must reproduce.
train="$model --tp 2 --steps 8"
mpirun --oversubscribe -np 4 "$tetra" train $train --export "$W/ref.safetensors" >"$W/ref.out" 2>&1

begin
job=$(MAX_REQUEUES=2 sbatch --parsable -n 4 -o "$W/kill.out" "$repo/tools/slurm/train.sbatch" \
  $train --ckpt-dir "$W/ck_kill" --ckpt-every 2 --inject-failure 1@5 --metrics "$W/kill.jsonl" \
  --export "$W/kill.safetensors")
read -r state restarts < <(wait_job "$job")
ok=1
[ "$state" = COMPLETED ] && [ "$restarts" = 1 ] && cmp -s "$W/ref.safetensors" "$W/kill.safetensors" &&
  grep -q "attempt 0 of job $job ended with exit status [1-9]" "$W/kill.out" &&
  grep -q "attempt 1 of job $job ended with exit status 0" "$W/kill.out" &&
  grep -q "resumed from $W/ck_kill/step_00000004" "$W/kill.out" && ok=0
[ "$ok" = 0 ] || { echo "$state restarts=$restarts"; tail -20 "$W/kill.out"; }
result requeue_kill "$ok"

begin
job=$(MAX_REQUEUES=2 sbatch --parsable -n 4 -o "$W/preempt.out" "$repo/tools/slurm/train.sbatch" \
  $train --ckpt-dir "$W/ck_preempt" --ckpt-every 100 --metrics "$W/preempt.jsonl" \
  --export "$W/preempt.safetensors" --inject-failure 0@2:slow=400)
# Signalled while it trains (the slowed rank keeps it from finishing first).
for _ in $(seq 600); do
  [ "$(cat "$W/preempt.jsonl" 2>/dev/null | grep -c '"step"')" -ge 2 ] && break
  sleep 0.1
done
scancel --signal=USR1 "$job"
read -r state restarts < <(wait_job "$job")
ok=1
[ "$state" = COMPLETED ] && [ "$restarts" = 1 ] &&
  [ "$(steps "$W/preempt.jsonl")" = "0 1 2 3 4 5 6 7 " ] &&
  cmp -s "$W/ref.safetensors" "$W/preempt.safetensors" &&
  grep -q "pre-empted: a signal reached 4 of 4 ranks" "$W/preempt.out" &&
  grep -q "attempt 0 of job $job ended with exit status 75" "$W/preempt.out" && ok=0
[ "$ok" = 0 ] || { echo "$state restarts=$restarts steps: $(steps "$W/preempt.jsonl")"; tail -20 "$W/preempt.out"; }
result preempt "$ok"

begin
# One SIGINT to tetra launch stops srun and its tasks (srun alone wants two within a second).
"$tetra" launch --restarts 3 -- srun --mpi=pmix -n 2 "$tetra" train $model --steps 1000 \
  --inject-failure 0@1:slow=100 >"$W/sigint.out" 2>&1 &
launcher=$!
for _ in $(seq 600); do
  grep -q "^step     2/" "$W/sigint.out" && break
  sleep 0.1
done
kill -INT "$launcher"
stopped=$(date +%s.%N)
rc=0
wait "$launcher" || rc=$?
took=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]) < 10)" "$stopped" "$(date +%s.%N)")
ok=1
[ "$rc" != 0 ] && [ "$took" = True ] && [ -z "$(squeue -h)" ] &&
  grep -q "interrupted by Interrupt, not restarting" "$W/sigint.out" && ok=0
[ "$ok" = 0 ] || { echo "exit $rc, stopped in 10 s: $took, queue: $(squeue -h)"; tail -5 "$W/sigint.out"; }
result sigint "$ok"

exit "$failed"
