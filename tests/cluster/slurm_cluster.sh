# A throwaway single-node Slurm cluster on loopback, for the cluster tests: munged, slurmctld
# and slurmd of their own, every file under one directory, ports picked free. Sourced:
#   slurm_up DIR CPUS    starts it (exports SLURM_CONF, which every Slurm command needs
#                        first, or Slurm looks for its controller through DNS)
#   slurm_down           stops what slurm_up started and removes DIR
# The node claims CPUS cores (more than the machine has: the tests oversubscribe, as mpirun
# does with --oversubscribe). Short waits keep the tests short: a requeued job may start again
# cred_expire seconds after it ended (120 by default; it must outlive the old credentials,
# or the new steps fail to launch), the scheduler looks every sched_interval seconds (60),
# and a job step's tasks that ignore SIGTERM (tetra takes it as pre-emption) are killed
# after KillWait seconds (30): the survivors of a killed rank, blocked in a collective.

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

slurm_up() {
  SLURM_DIR=$1
  local cpus=$2 host
  host=$(hostname -s)
  mkdir -p "$SLURM_DIR"/{state,spool,munge}
  chmod 700 "$SLURM_DIR/munge"
  dd if=/dev/urandom of="$SLURM_DIR/munge/key" bs=1024 count=1 status=none
  chmod 400 "$SLURM_DIR/munge/key"
  munged --force --key-file="$SLURM_DIR/munge/key" --socket="$SLURM_DIR/munge/sock" \
    --pid-file="$SLURM_DIR/munge/pid" --log-file="$SLURM_DIR/munge/log" \
    --seed-file="$SLURM_DIR/munge/seed"
  cat >"$SLURM_DIR/slurm.conf" <<CONF
ClusterName=tetra$$
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$SLURM_DIR/munge/sock,cred_expire=5
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_DIR/slurmctld.log
SlurmdLogFile=$SLURM_DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=4000 State=UNKNOWN
PartitionName=tetra Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$SLURM_DIR/slurm.conf
  slurmctld -c -i
  slurmd
  local i
  for i in $(seq 100); do
    sinfo -h -o %t 2>/dev/null | grep -q idle && return 0
    sleep 0.2
  done
  echo "slurm_up: the node did not come up; slurmctld.log and slurmd.log:" >&2
  tail -n 20 "$SLURM_DIR/slurmctld.log" "$SLURM_DIR/slurmd.log" >&2
  return 1
}

# Stops a daemon by the pid in its pid file and waits for it to go.
stop_pid_file() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

slurm_down() {
  [ -n "${SLURM_DIR:-}" ] || return 0
  scancel --full --quiet --user=root 2>/dev/null || true
  stop_pid_file "$SLURM_DIR/slurmd.pid"
  stop_pid_file "$SLURM_DIR/slurmctld.pid"
  stop_pid_file "$SLURM_DIR/munge/pid"
  rm -rf "$SLURM_DIR"
  SLURM_DIR=
}
