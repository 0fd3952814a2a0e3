#!/usr/bin/env bash
# Cluster test (b): tetra over two simulated hosts (two_hosts.sh: network namespaces with
# host names of their own, mpirun reaching the second through an rsh agent, TCP on the veth
# link only).
#   tp2_dp2          TP 2 x DP 2 over 2 hosts x 2 ranks ends bit-identical to one host; placed
#                    so that TP groups span the hosts (--map-by node) it still does, and warns
#   restart_rank0    tetra launch restarts a killed job with rank 0 on the other host: the
#                    restart takes the checkpoint lock over (same job), resumes to the same
#                    bytes, and launch counts every kept step (its metrics file lies beside
#                    the checkpoints, not in a /tmp that the other host does not see)
#   unshared_ckpt    a --ckpt-dir the second host does not share: one line naming that host,
#                    exit 2, before step 0
#   watchdog_remote  a rank hanging on the other host: the watchdog names its host
#   same_names       two hosts with one host name: refused with one line, no crash
# Usage: test_two_hosts.sh TETRA_BINARY. Needs root (namespaces); prints each scenario's wall
# time; removes the namespaces and files it made.
set -euo pipefail
tetra=$1
repo=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: the two-host test needs root"
  exit 77
fi
source "$repo/tests/cluster/two_hosts.sh"
# Not under /tmp: each simulated host has a /tmp of its own.
W=$(mktemp -d /var/tmp/tetra_hosts_XXXXXX)
trap 'hosts_down; [ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
# The binary too: a checkout under /tmp (as CI's may be) is hidden on the simulated hosts.
cp "$tetra" "$W/tetra"
tetra=$W/tetra
source "$repo/tests/cluster/scenarios.sh"

# One host's runs: what the two hosts must reproduce.
mpirun --oversubscribe -np 4 "$tetra" train $model --tp 2 --steps 4 --export "$W/one4.safetensors" \
  >"$W/one4.out" 2>&1
mpirun --oversubscribe -np 4 "$tetra" train $model --tp 2 --steps 8 --export "$W/one8.safetensors" \
  >"$W/one8.out" 2>&1

hosts_up "$W/hosts" h1 h2
begin
ok=1
rc=0
on_host 1 mpirun $MPI_ON_HOSTS --hostfile "$HOSTS_DIR/hosts12" -np 4 "$tetra" train $model --tp 2 \
  --steps 4 --export "$W/two.safetensors" >"$W/two.out" 2>&1 || rc=$?
on_host 1 mpirun $MPI_ON_HOSTS --hostfile "$HOSTS_DIR/hosts12" --map-by node -np 4 "$tetra" train \
  $model --tp 2 --steps 4 --export "$W/spread.safetensors" >"$W/spread.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && cmp -s "$W/one4.safetensors" "$W/two.safetensors" &&
  cmp -s "$W/one4.safetensors" "$W/spread.safetensors" &&
  ! grep -q "TP group spans" "$W/two.out" &&
  grep -q "^tetra: warning: a TP group spans hosts: h1 (rank 0), h2 (rank 1); " "$W/spread.out" &&
  ok=0
[ "$ok" = 0 ] || { echo "exit $rc"; tail -n 5 "$W/two.out" "$W/spread.out"; }
result tp2_dp2 "$ok"

begin
cat >"$W/attempt.sh" <<SCRIPT
#!/bin/sh
# Attempt 0 runs mpirun on h1, rank 0 with it; a restart runs it on h2 (through the agent, as
# ssh would), rank 0 there. The supervisor's variables reach the other host only when passed
# (-x), as over ssh.
if [ "\${TETRA_RESTART:-0}" -eq 0 ]; then
  exec mpirun $MPI_ON_HOSTS --hostfile $HOSTS_DIR/hosts12 -np 4 -x TETRA_RESTART -x TETRA_JOB "\$@"
fi
exec $HOSTS_DIR/agent $ADDR2 TETRA_RESTART=\$TETRA_RESTART TETRA_JOB=\$TETRA_JOB mpirun $MPI_ON_HOSTS \
  --hostfile $HOSTS_DIR/hosts21 -np 4 -x TETRA_RESTART -x TETRA_JOB "\$@"
SCRIPT
rc=0
on_host 1 "$tetra" launch --restarts 1 -- sh "$W/attempt.sh" "$tetra" train \
  $model --tp 2 --steps 8 --ckpt-dir "$W/ck" --ckpt-every 2 --inject-failure 1@5 \
  --export "$W/restart.safetensors" >"$W/restart.out" 2>&1 || rc=$?
ok=1
[ "$rc" = 0 ] && cmp -s "$W/one8.safetensors" "$W/restart.safetensors" &&
  grep -q "taking over the lock of checkpoint directory '$W/ck' left by job launch:.* on host h1, an earlier attempt of this job" "$W/restart.out" &&
  grep -q "^tetra launch: 2 attempts (.*); 1 step lost, 8 kept; goodput" "$W/restart.out" &&
  ok=0
[ "$ok" = 0 ] || { echo "exit $rc"; grep -v "^step" "$W/restart.out" | tail -20; }
result restart_rank0 "$ok"

begin
mkdir -p "$W/ck_private"
rc=0
HOST_PRIVATE="$W/ck_private" on_host 1 mpirun $MPI_ON_HOSTS --hostfile "$HOSTS_DIR/hosts12" -np 4 \
  "$tetra" train $model --tp 2 --steps 4 --ckpt-dir "$W/ck_private" >"$W/private.out" \
  2>"$W/private.err" || rc=$?
ok=1
[ "$rc" = 2 ] && [ "$(grep -c "tetra: error" "$W/private.err")" = 1 ] &&
  grep -q "^tetra: error: checkpoint directory '$W/ck_private' is not shared by every rank: h2 (ranks 2, 3) do not see the file that rank 0 on h1 wrote there; " "$W/private.err" &&
  ! grep -q "^step" "$W/private.out" && ok=0
[ "$ok" = 0 ] || { echo "exit $rc"; tail -n 5 "$W/private.out" "$W/private.err"; }
result unshared_ckpt "$ok"

begin
printf '%s slots=3\n%s slots=1\n' "$ADDR1" "$ADDR2" >"$W/hosts31"
rc=0
on_host 1 mpirun $MPI_ON_HOSTS --hostfile "$W/hosts31" -np 4 "$tetra" train $model --steps 4 \
  --inject-failure 3@1:hang --timeout 5 >"$W/hang.out" 2>&1 || rc=$?
ok=1
[ "$rc" != 0 ] &&
  grep -q "^tetra: error: watchdog: .* every member on this machine (h1) has arrived; the missing are among those on other machines: h2 (rank 3)$" "$W/hang.out" &&
  ok=0
[ "$ok" = 0 ] || { echo "exit $rc"; grep -v "^step" "$W/hang.out" | tail -8; }
result watchdog_remote "$ok"
hosts_down

hosts_up "$W/twins" twin twin
begin
rc=0
on_host 1 mpirun $MPI_ON_HOSTS --hostfile "$HOSTS_DIR/hosts12" -np 4 "$tetra" train $model \
  --steps 2 >"$W/twins.out" 2>"$W/twins.err" || rc=$?
ok=1
[ "$rc" = 2 ] && [ "$(grep -c "tetra: error" "$W/twins.err")" = 1 ] &&
  grep -q "^tetra: error: ranks [0-9] and [0-9] both have node-local rank [0-9] on host 'twin': several machines share that host name" "$W/twins.err" &&
  ok=0
[ "$ok" = 0 ] || { echo "exit $rc"; tail -8 "$W/twins.err"; }
result same_names "$ok"

exit "$failed"
