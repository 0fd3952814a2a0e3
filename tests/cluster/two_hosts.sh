# Two simulated hosts for the cluster tests: network namespaces joined by a veth pair, each
# process in them under a UTS namespace with the host's own name, and an rsh agent for
# mpirun that runs the remote side inside the other namespace with a clean environment, as
# ssh would. Sourced:
#   hosts_up DIR NAME1 NAME2   makes them (DIR: the agent, the hostfiles, the address map)
#   on_host 1|2 COMMAND...     runs COMMAND on host 1 or 2
#   hosts_down                 removes the namespaces and every process left in them
# Ranks talk over TCP on the veth link only (MPI_ON_HOSTS below); nothing leaves the
# namespaces. Each host has a /tmp and a /dev/shm of its own, as machines do (Open MPI keeps
# its session files and shared memory there); HOST_PRIVATE=DIR on host 2 mounts an empty
# directory over DIR there too (a path that host does not share).

hosts_up() {
  HOSTS_DIR=$1
  local name1=$2 name2=$3 tag="tt$$"
  mkdir -p "$HOSTS_DIR"
  # A /24 of its own, so that tests running side by side do not meet.
  local net="10.$((200 + RANDOM % 50)).$((RANDOM % 250))"
  NS1="${tag}a" NS2="${tag}b" ADDR1="$net.1" ADDR2="$net.2" NET="$net.0/24"
  ip netns add "$NS1"
  ip netns add "$NS2"
  ip link add "${tag}x" type veth peer name "${tag}y"
  ip link set "${tag}x" netns "$NS1"
  ip link set "${tag}y" netns "$NS2"
  ip -n "$NS1" addr add "$ADDR1/24" dev "${tag}x"
  ip -n "$NS2" addr add "$ADDR2/24" dev "${tag}y"
  for ns in "$NS1" "$NS2"; do
    ip -n "$ns" link set lo up
  done
  ip -n "$NS1" link set "${tag}x" up
  ip -n "$NS2" link set "${tag}y" up
  printf '%s %s %s\n%s %s %s\n' "$ADDR1" "$NS1" "$name1" "$ADDR2" "$NS2" "$name2" >"$HOSTS_DIR/map"
  printf '%s slots=2\n%s slots=2\n' "$ADDR1" "$ADDR2" >"$HOSTS_DIR/hosts12"
  printf '%s slots=2\n%s slots=2\n' "$ADDR2" "$ADDR1" >"$HOSTS_DIR/hosts21"
  # The agent: mpirun calls it as `agent HOST COMMAND...`, as it would call ssh.
  cat >"$HOSTS_DIR/agent" <<AGENT
#!/bin/bash
set -e
read -r _ ns name < <(grep "^\$1 " "$HOSTS_DIR/map")
shift
cmd="\$*"
private=
[ "\$ns" = "$NS2" ] && private=\${HOST_PRIVATE:-}
exec ip netns exec "\$ns" unshare --uts --mount --propagation private sh -c '
  hostname "\$1"
  mount -t tmpfs tetra-tmp /tmp
  mount -t tmpfs tetra-shm /dev/shm
  [ -z "\$2" ] || mount -t tmpfs tetra-private "\$2"
  exec env -i PATH="\$PATH" HOME="\$HOME" OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 sh -c "\$3"' sh "\$name" "\$private" "\$cmd"
AGENT
  chmod +x "$HOSTS_DIR/agent"
  MPI_ON_HOSTS="--mca plm_rsh_agent $HOSTS_DIR/agent --mca pml ob1 --mca btl self,vader,tcp \
    --mca btl_tcp_if_include $NET --mca oob_tcp_if_include $NET --oversubscribe"
}

on_host() {
  local ns name private=
  read -r _ ns name < <(sed -n "${1}p" "$HOSTS_DIR/map")
  [ "$1" = 2 ] && private=${HOST_PRIVATE:-}
  shift
  ip netns exec "$ns" unshare --uts --mount --propagation private sh -c \
    'hostname "$1"; mount -t tmpfs tetra-tmp /tmp; mount -t tmpfs tetra-shm /dev/shm
     [ -z "$2" ] || mount -t tmpfs tetra-private "$2"; shift 2; exec "$@"' \
    sh "$name" "$private" "$@"
}

hosts_down() {
  [ -n "${HOSTS_DIR:-}" ] || return 0
  local ns pid
  for ns in "$NS1" "$NS2"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$HOSTS_DIR"
  HOSTS_DIR=
}
