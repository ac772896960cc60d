#!/usr/bin/env bash
# Stop the single-node Slurm that tests/slurm/up.sh started from DIR (default /tmp/dbsweep-slurm):
# slurmd, slurmctld, then munged, each by the pid in its own pid file, waiting until each is gone;
# then the /run/slurm/conf/slurm.conf link to DIR's config.
set -uo pipefail
dir=$(realpath -m "${1:-/tmp/dbsweep-slurm}")
# Cancel its jobs first and wait for them to end, so no job's processes outlive the daemons.
if [[ -s $dir/slurmctld.pid ]] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
  export SLURM_CONF=$dir/slurm.conf
  jobs=$(squeue -h -o %i 2>/dev/null)
  if [[ -n $jobs ]]; then
    scancel $jobs
    for _ in $(seq 120); do
      [[ -z $(squeue -h -t running,completing,pending -o %i 2>/dev/null) ]] && break
      sleep 0.5
    done
  fi
fi
for daemon in slurmd slurmctld munged; do
  pidfile=$dir/$daemon.pid
  [[ -s $pidfile ]] || continue
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null && grep -q "$daemon" "/proc/$pid/cmdline" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$pidfile"
done
link=/run/slurm/conf/slurm.conf
[[ $(readlink "$link") == "$dir/slurm.conf" ]] && rm -f "$link"
exit 0
