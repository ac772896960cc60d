#!/usr/bin/env bash
# A Slurm cluster of N nodes on this one machine, built from namespaces, for tests that need several
# hosts (issue 34): each node is a network + UTS + mount namespace of its own, with its own hostname,
# address, slurmd, spool and run folder, as if it were a separate machine.
#
#   tests/slurm/cluster.sh up N          replace any cluster left from before, start N nodes c1..cN
#   CLUSTER_CPUS="0 1 …" cluster.sh up N  the same, each node on CPUs of its own (below)
#   tests/slurm/cluster.sh down          stop everything and remove it (also after a killed `up`)
#   tests/slurm/cluster.sh exec HOST CMD run CMD on HOST (ctl or c1..cN): its network, hostname, files
#
# DIR, the cluster's folder, is $CLUSTER_DIR (default /tmp/dbsweep-cluster). Layout:
# - ctl, namespace dbsw-ctl, hostname ctl: the "switch" and the controller. It holds the bridge br0
#   (198.19.34.254/24) and one veth end per node, and runs munged and slurmctld. It is also the login
#   node: Slurm's commands (sinfo, srun, sbatch) run there, through `exec ctl` (srun needs the nodes to
#   connect back to it, and nothing of the cluster is reachable from the host's own namespace).
# - cI, namespace dbsw-cI, hostname cI: eth0 = 198.19.34.I/24 on the bridge, and slurmd.
# Every address is in 198.18.0.0/15 (RFC 2544's benchmark range, as the topologies use); nothing is
# added to the host's namespace, nothing is routed out, and the host's interfaces are untouched.
#
# Each host's namespaces are held by a `sleep infinity` (DIR/hosts/HOST/holder.pid) that daemons and
# `exec` enter with nsenter. Its mount namespace starts as a copy of the host's, a slave of it: its own
# mounts stay in it, and the host's later mounts and unmounts reach it where the host's mounts are
# shared (tests/conftest.py makes / shared for a pytest run; this VM's init leaves it private). Loop
# filesystems mounted on the machine when a host starts belong to runs beside the cluster: the host lets
# its copies of them go at once (where they are private, the run's unmount would not reach its copy, and
# the run could not detach its loop device while the cluster lives). There
# DIR/etc is bound over /etc/slurm (Slurm's commands and the jobs find the cluster's slurm.conf without
# SLURM_CONF; the host's config is untouched), DIR/etc/hosts over /etc/hosts (the hosts know each
# other by name), and DIR/hosts/HOST over DIR/host: each slurmd's pid file, log and spool are at the
# same path in slurm.conf and in a folder of its own on disk; DIR/hosts/HOST/run over /run/dbsweep: each
# host's own measuring lock (dbsweep/runtime/lock.py), as on separate machines. munged's socket is
# DIR/munge/munge.socket: a file, reachable from every namespace.
#
# CPUs: the hosts share this machine's CPUs unless CLUSTER_CPUS gives each node its own, one taskset CPU
# list per node in order (c1's first): "0 1" puts c1 on CPU 0 and c2 on CPU 1, so that a part of a cell
# on its own host also has its own CPU, as on separate machines. Each node's slurmd starts with that
# affinity; the job steps and everything they start inherit it (TaskPlugin=task/none sets none; a
# repetition's own cgroup has no cpuset to undo it). A list per node, of CPUs this machine has, or `up`
# refuses it in one line before anything starts. DIR/hosts/cI/cpus holds the list given (the run records
# each host's affinity as its processes see it: run.json topology.network.cpus).
#
# Features (slurm.conf's, for a placement by constraint, `hosts: {replica1: {constraint: ssd}}`): c1, c3 …
# have `ssd`, c2, c4 … `hdd`.
#
# `down` kills every process in the dbsw-* namespaces (daemons, jobs, anything `exec` started), which
# also ends their mount and UTS namespaces, then deletes the network namespaces (which removes the
# bridge and the veths), DIR and the running cluster's folder if another (the cwd of ctl's holder). It
# needs nothing but the namespaces' names, so it cleans up after an `up` killed at any point.
# Needs root. Processes tracked by parentage and no task plugin, as in tests/slurm/up.sh.
set -euo pipefail
# The cluster's slurm.conf is at /etc/slurm in its hosts' mount namespaces: a SLURM_CONF of the caller's
# (tests/slurm/up.sh prints one) would send its daemons and commands to another Slurm.
unset SLURM_CONF

PREFIX=dbsw-
REPO=$(realpath "$(dirname "$0")/../..")
# The project's Python (its venv), for the nodes' Epilog; PYTHON overrides it.
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
SUBNET=198.19.34
CTL_ADDRESS=$SUBNET.254
MAX_NODES=200
READY_SECONDS=${CLUSTER_READY_SECONDS:-60}

# Every namespace of a cluster, left over or live: dbsw-ctl and dbsw-c<number>.
cluster_namespaces() {
  ip netns list | awk '{print $1}' | grep -E "^${PREFIX}(ctl|c[0-9]+)$" || true
}

# Kill every process in namespace $1 (TERM, then KILL after 5 s), and wait until none is left.
empty_namespace() {
  local ns=$1 pids
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [[ -z $pids ]] && return 0
  kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 50); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -z $pids ]] && return 0
    sleep 0.1
  done
  kill -KILL $pids 2>/dev/null || true
  for _ in $(seq 50); do
    [[ -z $(ip netns pids "$ns" 2>/dev/null || true) ]] && return 0
    sleep 0.1
  done
  echo "cluster.sh: processes still in $ns after SIGKILL: $(ip netns pids "$ns" | tr '\n' ' ')" >&2
  return 1
}

# The folder of the running cluster, wherever it is (another CLUSTER_DIR's): the working directory of
# ctl's holder, when that is a cluster's folder naming it as ctl's holder.
running_folder() {
  local pid folder
  for pid in $(ip netns pids "${PREFIX}ctl" 2>/dev/null || true); do
    [[ $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null) == "sleep infinity " ]] || continue
    folder=$(readlink "/proc/$pid/cwd" 2>/dev/null) || continue
    if [[ -e $folder/cluster.conf && $(cat "$folder/hosts/ctl/holder.pid" 2>/dev/null) == "$pid" ]]; then
      echo "$folder"
    fi
  done
}

# Remove a cluster's folder: files only (the binds were in the hosts' own mount namespaces, gone with
# them); a folder without cluster.conf only when empty (an `up` killed before it wrote that).
remove_folder() {
  local dir=$1
  [[ -n $dir ]] || return 0
  if [[ -e $dir/cluster.conf ]]; then
    rm -rf --one-file-system "$dir"
  else
    rmdir "$dir" 2>/dev/null || true
  fi
}

down() {
  local dir=$1 ns failed=0 running
  running=$(running_folder)
  for ns in $(cluster_namespaces); do
    empty_namespace "$ns" || failed=1
  done
  for ns in $(cluster_namespaces); do
    ip netns delete "$ns" || failed=1
  done
  remove_folder "$running"
  remove_folder "$dir"
  return $failed
}

# Start the holder of host $2's namespaces: a new UTS and mount namespace inside network namespace
# dbsw-$2, hostname $2, with the binds described at the top. Its /sys is a sysfs of its own network
# namespace (its /sys/class/net shows its own interfaces, as `ip netns exec` does), with the host's
# /sys/fs/cgroup moved onto it: slurmd initialises its cgroup plugin even with proctrack/linuxproc and
# task/none, and fails with "No filesystem mounted on /sys/fs/cgroup" without it (DIR/host is only the
# staging point of that move, before it gets the host's own folder).
hold() {
  local dir=$1 host=$2
  ip netns add "$PREFIX$host"
  ip -n "$PREFIX$host" link set lo up
  mkdir -p "$dir/hosts/$host"
  # setsid: the holder outlives this script and is in no terminal's process group.
  setsid nsenter --net="/run/netns/$PREFIX$host" unshare --uts --mount --propagation slave -- /bin/sh -c '
    findmnt -rn -o SOURCE,TARGET | while read -r src target; do
      case $src in /dev/loop*) umount -l "$target" 2>/dev/null;; esac
    done
    hostname "$1" && mount --rbind /sys/fs/cgroup "$2/host" && mount -t sysfs sysfs /sys \
      && mount --move "$2/host" /sys/fs/cgroup && mount --bind "$2/etc" /etc/slurm \
      && mount --bind "$2/etc/hosts" /etc/hosts && mount --bind "$2/hosts/$1" "$2/host" \
      && mkdir -p /run/dbsweep "$2/hosts/$1/run" && mount --bind "$2/hosts/$1/run" /run/dbsweep \
      && cd "$2" && echo $$ > "$2/hosts/$1/holder.pid" && exec sleep infinity' \
    holder "$host" "$dir" </dev/null >/dev/null 2>"$dir/hosts/$host/holder.err" &
}

# The pid of host $2's holder once its namespaces are set up (its pid file is written last).
holder_pid() {
  local dir=$1 host=$2
  for _ in $(seq 100); do
    if [[ -s $dir/hosts/$host/holder.pid ]]; then
      cat "$dir/hosts/$host/holder.pid"
      return 0
    fi
    sleep 0.05
  done
  echo "cluster.sh: host $host did not start: $(cat "$dir/hosts/$host/holder.err" 2>/dev/null)" >&2
  return 1
}

# Run a command on a host: inside its holder's network, UTS and mount namespaces.
on() {
  local dir=$1 host=$2
  shift 2
  local pid
  pid=$(cat "$dir/hosts/$host/holder.pid" 2>/dev/null) || { echo "cluster.sh: no host $host in $dir" >&2; return 1; }
  nsenter --target "$pid" --net --uts --mount -- "$@"
}

# Join host $2 (cI) to ctl's bridge with a veth pair: eth0 there, cI in ctl.
wire() {
  local host=$1 index=$2
  ip -n "${PREFIX}ctl" link add "$host" type veth peer name eth0 netns "$PREFIX$host"
  ip -n "${PREFIX}ctl" link set "$host" master br0 up
  ip -n "$PREFIX$host" addr add "$SUBNET.$index/24" dev eth0
  ip -n "$PREFIX$host" link set eth0 up
}

# The Slurm feature of node cI ($1 = I), for placements by constraint: odd nodes have ssd, even ones hdd.
feature() {
  if (($1 % 2)); then echo ssd; else echo hdd; fi
}

write_config() {
  local dir=$1 nodes=$2 cpus memory names i
  cpus=$(nproc)
  # Each node sees the whole machine; together they declare its memory less 512 MiB for the daemons.
  memory=$(( ($(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo) - 512) / nodes ))
  names=c1
  ((nodes > 1)) && names="c[1-$nodes]"
  {
    echo "127.0.0.1 localhost"
    echo "$CTL_ADDRESS ctl"
    for ((i = 1; i <= nodes; i++)); do echo "$SUBNET.$i c$i"; done
  } > "$dir/etc/hosts"
  cat > "$dir/etc/epilog.sh" <<EOF
#!/bin/sh
# Written by tests/slurm/cluster.sh: the dbsweep of $REPO sweeps this node after each job.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin  # slurmd gives its Epilog none
PYTHONPATH=$REPO/workflow exec $PYTHON -m dbsweep.topology.host_step --sweep
EOF
  chmod 0755 "$dir/etc/epilog.sh"
  cat > "$dir/etc/slurm.conf" <<EOF
# Written by tests/slurm/cluster.sh: $nodes nodes, each a set of namespaces on this machine.
ClusterName=dbsweep-cluster
SlurmctldHost=ctl($CTL_ADDRESS)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmctldPidFile=$dir/hosts/ctl/slurmctld.pid
SlurmctldLogFile=$dir/hosts/ctl/slurmctld.log
# The same paths on every node, each bound to its own folder (DIR/hosts/cI) in the node's mount namespace.
SlurmdSpoolDir=$dir/host/spool
SlurmdPidFile=$dir/host/slurmd.pid
SlurmdLogFile=$dir/host/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
MinJobAge=300
SchedulerParameters=sched_interval=1
SlurmctldTimeout=30
SlurmdTimeout=30
KillWait=10
# After every job, on each of its nodes: release what a node of a placed topology left when its step was
# killed (workflow/dbsweep/topology/host_step.py --sweep): processes of its cgroup, mounts, loop devices.
Epilog=$dir/etc/epilog.sh
NodeName=DEFAULT CPUs=$cpus RealMemory=$memory State=UNKNOWN
EOF
  for ((i = 1; i <= nodes; i++)); do
    echo "NodeName=c$i NodeAddr=$SUBNET.$i Features=$(feature "$i")" >> "$dir/etc/slurm.conf"
  done
  echo "PartitionName=bench Nodes=$names Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO" \
    >> "$dir/etc/slurm.conf"
}

# Wait until sinfo, asked on ctl, shows $2 idle nodes; say what it shows when it does not in time.
wait_idle() {
  local dir=$1 nodes=$2 idle shown deadline=$((SECONDS + READY_SECONDS))
  while ((SECONDS < deadline)); do
    idle=$(on "$dir" ctl sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l || true)
    ((idle == nodes)) && return 0
    sleep 0.2
  done
  shown=$(on "$dir" ctl sinfo -N -o '%N %t %E' 2>&1 || true)
  echo "cluster.sh: $idle of $nodes nodes idle after ${READY_SECONDS}s; sinfo on ctl:" >&2
  echo "$shown" >&2
  local log
  for log in "$dir"/hosts/*/*.log; do
    echo "--- last lines of $log:" >&2
    tail -n 5 "$log" >&2
  done
  return 1
}

# Check CLUSTER_CPUS ($2) for $1 nodes: empty, or one CPU list per node, each of CPUs this machine has.
check_cpus() {
  local nodes=$1 lists=$2 list
  [[ -z $lists ]] && return 0
  read -ra given <<< "$lists"  # up()'s local: the lists it starts each slurmd with
  if ((${#given[@]} != nodes)); then
    echo "cluster.sh: CLUSTER_CPUS: '$lists': ${#given[@]} CPU lists for $nodes nodes (one per node, c1's first)" >&2
    return 2
  fi
  for list in "${given[@]}"; do
    if ! [[ $list =~ ^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$ ]] || ! taskset -c "$list" true 2>/dev/null; then
      echo "cluster.sh: CLUSTER_CPUS: '$list': not a list of this machine's CPUs (0-$(($(nproc --all) - 1)))" >&2
      return 2
    fi
  done
}

up() {
  local nodes=$1 dir=$2 i given=()
  if ! [[ $nodes =~ ^[1-9][0-9]*$ ]] || ((nodes > MAX_NODES)); then
    echo "cluster.sh: nodes: $nodes is not a whole number from 1 to $MAX_NODES" >&2
    return 2
  fi
  check_cpus "$nodes" "${CLUSTER_CPUS:-}" || return 2
  [[ -d /etc/slurm ]] || { echo "cluster.sh: /etc/slurm does not exist (is slurm-wlm installed?)" >&2; return 1; }
  down "$dir"
  if [[ -e $dir ]]; then
    echo "cluster.sh: $dir exists and is not a cluster's folder; not using it" >&2
    return 1
  fi
  mkdir -p "$dir"
  echo "nodes=$nodes" > "$dir/cluster.conf"  # first: what marks the folder as down's to remove
  mkdir -p "$dir"/{etc,state,munge,host}
  for ((i = 1; i <= nodes; i++)); do mkdir -p "$dir/hosts/c$i/spool"; done
  mkdir -p "$dir/hosts/ctl"
  write_config "$dir" "$nodes"
  mungekey --create --keyfile="$dir/munge/munge.key" --force
  chmod 0600 "$dir/munge/munge.key"

  hold "$dir" ctl
  for ((i = 1; i <= nodes; i++)); do hold "$dir" "c$i"; done
  holder_pid "$dir" ctl >/dev/null
  ip -n "${PREFIX}ctl" link add br0 type bridge
  ip -n "${PREFIX}ctl" addr add "$CTL_ADDRESS/24" dev br0
  ip -n "${PREFIX}ctl" link set br0 up
  for ((i = 1; i <= nodes; i++)); do
    holder_pid "$dir" "c$i" >/dev/null
    wire "c$i" "$i"
  done

  on "$dir" ctl munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/hosts/ctl/munged.log" \
    --seed-file="$dir/munge/munged.seed" --force
  on "$dir" ctl slurmctld -i
  for ((i = 1; i <= nodes; i++)); do
    if ((${#given[@]})); then
      echo "${given[i - 1]}" > "$dir/hosts/c$i/cpus"
      on "$dir" "c$i" taskset -c "${given[i - 1]}" slurmd -N "c$i"
    else
      on "$dir" "c$i" slurmd -N "c$i"
    fi
  done
  wait_idle "$dir" "$nodes"
}

main() {
  local dir
  dir=$(realpath -m "${CLUSTER_DIR:-/tmp/dbsweep-cluster}")
  case ${1:-} in
    up)
      [[ $# -eq 2 ]] || { echo "usage: cluster.sh up N" >&2; return 2; }
      up "$2" "$dir"
      echo "cluster up: c1..c$2 in $dir; Slurm's commands: tests/slurm/cluster.sh exec ctl sinfo" ;;
    down)
      [[ $# -eq 1 ]] || { echo "usage: cluster.sh down" >&2; return 2; }
      down "$dir" ;;
    exec)
      [[ $# -ge 3 ]] || { echo "usage: cluster.sh exec HOST CMD…" >&2; return 2; }
      local host=$2
      shift 2
      on "$dir" "$host" "$@" ;;
    *)
      echo "usage: [CLUSTER_DIR=DIR] cluster.sh up N | down | exec HOST CMD…" >&2
      return 2 ;;
  esac
}

main "$@"
