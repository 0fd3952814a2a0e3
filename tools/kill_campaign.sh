#!/usr/bin/env bash
# A kill -9 campaign against checkpoints written in the background (--ckpt-async, a checkpoint
# every step, so that a write is almost always under way): runs are killed at random times,
# every rank at once (a lost node) or one rank (a crashed process, mpirun ends the others), and
# resumed, until a run ends; its exported weights must equal an uninterrupted run's byte for byte.
# After every kill, `latest` must name a checkpoint that `tetra ckpt verify` accepts (or none,
# before the first), the next run must resume from exactly that one, and once a run ends
# only the newest --keep checkpoints of its line are left, each verifying, with no .tmp.
# With --launch, `tetra launch` restarts the killed attempts instead (kills at random times
# while it runs; `latest` is checked at the end).
#
#   tools/kill_campaign.sh TETRA [--kills N] [--ranks R] [--seed S] [--launch]
#                                [--model "FLAGS"] [-- TRAIN FLAGS (layout, dtype)...]
#
# Prints one line per kill (when, what was in flight) and a summary; exit status 0 when every
# check held, 1 at the first that did not.
set -euo pipefail

tetra=$(realpath "$1")
shift
kills=20 ranks=1 seed=$RANDOM launch=0
model="--layers 2 --dim 64 --heads 4 --kv-heads 2 --ffn-dim 128 --seq-len 32 --global-batch 8"
model+=" --steps 40 --peak-tflops 1"
while [[ $# -gt 0 ]]; do
  case $1 in
    --kills) kills=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --launch) launch=1; shift ;;
    --model) model=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "kill_campaign: unknown argument $1" >&2; exit 2 ;;
  esac
done
extra=("$@")
RANDOM=$seed
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
keep=2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ck=$work/ck
# shellcheck disable=SC2206
train=(mpirun --oversubscribe -np "$ranks" "$tetra" train $model "${extra[@]}")
ckpt_flags=(--ckpt-dir "$ck" --ckpt-every 1 --ckpt-async --keep "$keep")

fail() {
  trap - EXIT
  echo "kill_campaign: FAILED: $* (left in $work)" >&2
  exit 1
}

# The ranks of the mpirun with pid $1 (its children), one per line.
ranks_of() { ps -o pid= --ppid "$1" | tr -d ' ' || true; }

# What a kill interrupted, from what it left in $ck: a shard write (a .tmp directory), an
# installation (a checkpoint newer than the one `latest` names), or neither.
in_flight() {
  local latest newest
  if compgen -G "$ck/step_*.tmp" >/dev/null; then echo "writing"; return; fi
  latest=$(cat "$ck/latest" 2>/dev/null || echo none)
  newest=$(cd "$ck" 2>/dev/null && ls -d step_[0-9]* 2>/dev/null | grep -v '\.' | sort | tail -1)
  if [[ -n $newest && $newest != "$latest" ]]; then echo "installing"; else echo "between"; fi
}

# `latest` names a checkpoint that verifies, or none.
check_latest() {
  local latest
  latest=$(cat "$ck/latest" 2>/dev/null || echo none)
  [[ $latest == none ]] && return 0
  "$tetra" ckpt verify "$ck/$latest" >"$work/verify.out" 2>&1 ||
    fail "latest names $latest, which does not verify: $(cat "$work/verify.out")"
}

# The line's end: its newest --keep checkpoints, each verifying, and no .tmp. Pruning deletes
# a checkpoint's manifest first, so a kill in the middle of it leaves a directory without one,
# which no later prune deletes (it does not verify: tetra never deletes such a one); those are
# counted, not failed.
pruned_short=0
check_pruned() {
  local dirs n
  compgen -G "$ck/step_*.tmp" >/dev/null && fail "a .tmp directory is left: $(ls "$ck")"
  dirs=$(cd "$ck" && ls -d step_[0-9]* | grep -v '\.' || true)
  for d in $dirs; do
    if [[ ! -e $ck/$d/manifest.json ]]; then
      dirs=$(echo "$dirs" | grep -vx "$d")
      pruned_short=$((pruned_short + 1))
    fi
  done
  n=$(echo "$dirs" | grep -c . || true)
  [[ $n -eq $keep ]] || fail "$n checkpoints left, not --keep $keep: $dirs"
  for d in $dirs; do "$tetra" ckpt verify "$ck/$d" >/dev/null 2>&1 || fail "$d does not verify"; done
}

t0=$(date +%s.%N)
"${train[@]}" --export "$work/ref.safetensors" >"$work/ref.out" 2>&1 ||
  fail "the uninterrupted run failed: $(tail -5 "$work/ref.out")"
# Kill times are drawn from the uninterrupted run's duration and a half (the checkpoints and
# the restarts make a campaign run longer).
span_ms=$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%d", (t1 - t0) * 1500 }')
random_ms() { echo $(((RANDOM * 32768 + RANDOM) % span_ms)); }
sleep_ms() { sleep "$(awk -v ms="$1" 'BEGIN { printf "%.3f", ms / 1000 }')"; }
# Every rank (odd kills) or one of them (even kills).
kill_ranks() {
  local k=$1 pids
  mapfile -t pids < <(ranks_of "$2")
  [[ ${#pids[@]} -gt 0 ]] || return 1
  # A rank that has exited and awaits its reaping (Z) ignores the kill: the run is over.
  [[ -z $(ps -o stat= -p "$(IFS=,; echo "${pids[*]}")" | grep Z) ]] || return 1
  if ((k % 2 == 1)); then
    kill -9 "${pids[@]}" 2>/dev/null || return 1
  else
    kill -9 "${pids[$((RANDOM % ${#pids[@]}))]}" 2>/dev/null || return 1
  fi
}

declare -A seen=([writing]=0 [installing]=0 [between]=0)
done_kills=0 runs=0 rounds=0
if ((launch == 0)); then
  while ((done_kills < kills)); do
    rounds=$((rounds + 1))
    rm -rf "$ck"
    expect=""  # the checkpoint the next run must resume from
    for ((;;)); do
      runs=$((runs + 1))
      "${train[@]}" "${ckpt_flags[@]}" --export "$work/got.safetensors" >"$work/run.out" 2>&1 &
      mpi=$!
      at=$(random_ms)
      sleep_ms "$at"
      killed=0
      if ((done_kills < kills)) && kill_ranks $((done_kills + 1)) "$mpi"; then killed=1; fi
      status=0
      wait "$mpi" || status=$?
      # A run killed during its start-up may not have printed (nor flushed) where it resumed;
      # one that printed a step must have.
      if [[ -n $expect ]] && { ((killed == 0)) || grep -q "resumed from\|^step " "$work/run.out"; }; then
        grep -q "resumed from $ck/$expect at" "$work/run.out" ||
          fail "run $runs did not resume from $expect: $(grep -m1 'resumed from' "$work/run.out" || echo 'no resume line')"
      fi
      if ((killed == 0 || status == 0)); then
        [[ $status -eq 0 ]] || fail "run $runs failed (exit $status): $(tail -5 "$work/run.out")"
        break
      fi
      done_kills=$((done_kills + 1))
      what=$(in_flight)
      seen[$what]=$((seen[$what] + 1))
      check_latest
      expect=$(cat "$ck/latest" 2>/dev/null || echo none)
      [[ $expect == none ]] && expect=""
      echo "kill $done_kills: run $runs at ${at} ms (exit $status), during: $what; latest: ${expect:-none} verifies"
    done
    cmp -s "$work/ref.safetensors" "$work/got.safetensors" ||
      fail "round $rounds: the final weights differ from the uninterrupted run's"
    check_pruned
    echo "round $rounds: the run ended bit-exact with the uninterrupted one; $keep checkpoints left"
  done
else
  while ((done_kills < kills)); do
    rounds=$((rounds + 1))
    rm -rf "$ck" "$work/got.safetensors"
    want=$((kills - done_kills))
    "$tetra" launch --restarts "$want" -- "${train[@]}" "${ckpt_flags[@]}" \
      --export "$work/got.safetensors" >"$work/run.out" 2>&1 &
    sup=$!
    round_kills=0 last_mpi=""
    while ((round_kills < want)) && kill -0 "$sup" 2>/dev/null; do
      mpi=$(ranks_of "$sup" | head -1)
      # A new attempt's mpirun and its ranks, each killed once.
      if [[ -z $mpi || $mpi == "$last_mpi" ]] || [[ -z $(ranks_of "$mpi") ]]; then
        sleep 0.05
        continue
      fi
      at=$(random_ms)
      sleep_ms "$at"
      # An attempt that has begun its export has trained every step: a kill now may land after
      # it ended (and count a restart that never came), so the round ends unkilled instead.
      if [[ -e $work/got.safetensors ]]; then
        last_mpi=$mpi
        continue
      fi
      if kill_ranks $((done_kills + 1)) "$mpi"; then
        done_kills=$((done_kills + 1)) round_kills=$((round_kills + 1)) last_mpi=$mpi
        echo "kill $done_kills: attempt $round_kills of round $rounds at ${at} ms"
      fi
    done
    status=0
    wait "$sup" || status=$?
    [[ $status -eq 0 ]] || fail "tetra launch failed (exit $status): $(tail -5 "$work/run.out")"
    grep -Eq "tetra launch: $((round_kills + 1)) attempts? " "$work/run.out" ||
      fail "tetra launch does not report $((round_kills + 1)) attempts: $(grep "tetra launch:" "$work/run.out" || true)"
    cmp -s "$work/ref.safetensors" "$work/got.safetensors" ||
      fail "round $rounds: the final weights differ from the uninterrupted run's"
    check_latest
    check_pruned
    echo "round $rounds: $round_kills restarts by tetra launch, bit-exact; $keep checkpoints left"
  done
fi
summary="kill campaign: $done_kills kills in $rounds rounds, seed $seed, $ranks ranks"
[[ ${#extra[@]} -gt 0 ]] && summary+=" (${extra[*]})"
if ((launch == 1)); then
  summary+=", restarted by tetra launch"
else
  summary+=", $runs runs; during a shard write ${seen[writing]}, an installation ${seen[installing]}, neither ${seen[between]}"
fi
((pruned_short > 0)) && summary+="; $pruned_short prunes cut short (a directory without its manifest left)"
echo "$summary; every resume bit-exact, latest always verified"
