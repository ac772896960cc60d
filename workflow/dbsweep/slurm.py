"""Checks of a Slurm submission before any job is queued."""
from __future__ import annotations

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
    that no job is submitted only to fail or wait for ever."""
    for placed in placements:
        answer = test_only(placed.sbatch() + [f"--partition={partition}"] * bool(partition))
        if answer is not None:
            raise RuntimeError(f"topologies.{placed.topology}.hosts: {placed.hosts!r}: Slurm cannot place it: "
                               f"{answer}")


def test_only(options: list[str]) -> str | None:
    """Slurm's refusal of a one-minute exclusive job with these sbatch options, or None when it would
    start it (sbatch --test-only prints when and where)."""
    done = subprocess.run(["sbatch", "--test-only", "--exclusive", "--time=1", *options, "--wrap=true"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode == 0:
        return None
    said = [line.removeprefix("sbatch: ").removeprefix("error: ") for line in done.stderr.splitlines()
            if line.strip()]
    return said[-1] if said else f"sbatch --test-only exited {done.returncode}"
