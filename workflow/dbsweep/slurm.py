"""Checks of a Slurm submission before any job is queued."""
from __future__ import annotations

import re
import subprocess


def check_partitions(names) -> None:
    """Ask Slurm about each partition the jobs name; raise with Slurm's own message for one it does not know.
    (A job submitted to it would fail at sbatch, its message buried in the job's error.)"""
    for name in sorted(set(names)):
        done = subprocess.run(["scontrol", "show", "partition", str(name)], capture_output=True, text=True)
        if done.returncode != 0:
            message = (done.stdout.strip() or done.stderr.strip()).splitlines()[-1:] or ["scontrol failed"]
            raise RuntimeError(f"slurm_partition {name!r}: {message[0]}")


def check_placements(placements, partition: str | None = None) -> None:
    """Ask Slurm whether it could start a job on each placed topology's hosts (`sbatch --test-only`, which
    queues nothing); raise with Slurm's own words for one it cannot (an unknown node, too few nodes), so
    that no job is submitted only to fail or wait for ever. Also raise when the job's first host, where
    Slurm runs its batch script and so the client, would not be the client's: Slurm orders a job's nodes
    its own way (slurm.conf's), not as --nodelist names them."""
    for placed in placements:
        refused, nodes = test_only(placed.sbatch(), partition)
        where = f"topologies.{placed.topology}.hosts: {placed.declared!r}"
        if refused is not None:
            raise RuntimeError(f"{where}: Slurm cannot place it: {refused}")
        client = placed.planned()["client"]
        first = hostnames(nodes)[:1] if nodes else []
        if first and first[0] != client:
            raise RuntimeError(f"{where}: the client's host {client} would not be the job's first host: Slurm "
                               f"would give the job nodes {nodes} and run its client on {first[0]}; place the "
                               f"client on {first[0]}, or its host first in slurm.conf")


def test_only(options: list[str], partition: str | None = None) -> tuple[str | None, str | None]:
    """(Slurm's refusal of a one-minute exclusive job with these sbatch options in partition (None: Slurm's
    default), or None when it would start it; the nodes it would start it on, in Slurm's hostlist form, when
    it says: "sbatch: Job 3 to start at … using 6 processors on nodes c[1-3] in partition bench")."""
    options = options + ([f"--partition={partition}"] if partition else [])
    done = subprocess.run(["sbatch", "--test-only", "--exclusive", "--time=1", *options, "--wrap=true"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode == 0:
        nodes = re.search(r" on nodes (\S+) in partition ", done.stderr + done.stdout)
        return None, nodes.group(1) if nodes else None
    said = [line.removeprefix("sbatch: ").removeprefix("error: ") for line in done.stderr.splitlines()
            if line.strip()]
    return (said[-1] if said else f"sbatch --test-only exited {done.returncode}"), None


def hostnames(hostlist: str) -> list[str]:
    """A Slurm hostlist (c[1,3]) as its hosts, in its order (scontrol's own expansion)."""
    done = subprocess.run(["scontrol", "show", "hostnames", hostlist], capture_output=True, text=True)
    return done.stdout.split() if done.returncode == 0 else []
