#!/usr/bin/env bash
# A single-node Slurm on this machine, to test and benchmark dbsweep's Slurm profile against:
# munged, slurmctld and slurmd from Debian's packages (slurm-wlm, munge), started directly (no
# systemd needed), with a slurm.conf written here for this host's real CPUs and memory.
#
#   tests/slurm/up.sh [DIR]     start (DIR default /tmp/dbsweep-slurm); prints `export SLURM_CONF=…`
#   tests/slurm/down.sh [DIR]   stop what up.sh started
#
# Everything lives in DIR: config, munge key and socket, state, logs, pid files. The system's
# /etc/slurm and /etc/munge are not touched; /run/slurm/conf/slurm.conf (where Slurm's commands look
# when /etc/slurm/slurm.conf does not exist) links to DIR's config, because Snakemake's job step clears
# SLURM_CONF from the environment of the srun it starts inside a job. Partition `bench` holds the one node; nothing is
# accounted (no slurmdbd), so the profile's status checks use squeue (MinJobAge keeps finished
# jobs visible to it). Needs root: the node's jobs mount loop filesystems.
set -euo pipefail
dir=$(realpath -m "${1:-/tmp/dbsweep-slurm}")
mkdir -p "$dir"/{state,spool,log}
if [[ -s $dir/slurmctld.pid ]] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
  echo "slurm already running from $dir" >&2
  echo "export SLURM_CONF=$dir/slurm.conf"
  exit 0
fi

if [[ -e /etc/slurm/slurm.conf ]]; then
  echo "this machine has a Slurm config (/etc/slurm/slurm.conf); not starting a test Slurm beside it" >&2
  exit 1
fi
link=/run/slurm/conf/slurm.conf
if [[ -e $link && $(readlink "$link") != "$dir/slurm.conf" ]]; then
  echo "$link exists and is not a test Slurm's config; not starting" >&2
  exit 1
fi

node=$(hostname -s)
cpus=$(nproc)
# Leave 512 MiB for the daemons and the OS; slurmd refuses a node that reports less than RealMemory.
memory=$(( $(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo) - 512 ))

[[ -s $dir/munge.key ]] || mungekey --create --keyfile="$dir/munge.key" --force
chmod 0600 "$dir/munge.key"
cat > "$dir/slurm.conf" <<EOF
# Written by tests/slurm/up.sh: one node, this host.
ClusterName=dbsweep
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=${SLURMCTLD_PORT:-6817}
SlurmdPort=${SLURMD_PORT:-6818}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
# No systemd and no cgroup delegation in a container: track processes by parentage, bind nothing.
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
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=bench Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
cat > "$dir/env" <<EOF
export SLURM_CONF=$dir/slurm.conf
EOF

mkdir -p "$(dirname "$link")" && ln -sfn "$dir/slurm.conf" "$link"

munged --key-file="$dir/munge.key" --socket="$dir/munge.socket" --pid-file="$dir/munged.pid" \
  --log-file="$dir/log/munged.log" --seed-file="$dir/munged.seed" --force
export SLURM_CONF=$dir/slurm.conf
slurmctld -i
slurmd -N "$node"

# Ready when the node is idle in its partition.
for _ in $(seq 60); do
  state=$(sinfo -h -n "$node" -o %t 2>/dev/null || true)
  if [[ $state == idle* ]]; then
    echo "export SLURM_CONF=$dir/slurm.conf"
    exit 0
  fi
  if [[ $state == down* || $state == drain* ]]; then
    scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1 || true
  fi
  sleep 0.5
done
echo "slurm did not come up; node state: ${state:-none}; logs in $dir/log" >&2
exit 1
