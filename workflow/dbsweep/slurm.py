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
