"""Provenance: host facts, checksums, and JSON written so it is never seen half-done."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
import tempfile
from datetime import datetime, UTC
from pathlib import Path


# Kernel settings that change what a database or storage benchmark measures: writeback, swapping,
# overcommit, NUMA placement, the scheduler's autogroups.
SYSCTLS = ("vm.swappiness", "vm.dirty_ratio", "vm.dirty_background_ratio", "vm.dirty_bytes",
           "vm.dirty_background_bytes", "vm.dirty_expire_centisecs", "vm.dirty_writeback_centisecs",
           "vm.overcommit_memory", "vm.zone_reclaim_mode", "kernel.numa_balancing", "kernel.sched_autogroup_enabled")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def host() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal:"))
    return {
        "hostname": socket.gethostname(),
        # The Slurm node and job, when a scheduler placed the run (a node's Slurm name may differ from its hostname).
        "node": os.environ.get("SLURMD_NODENAME"),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm_partition": os.environ.get("SLURM_JOB_PARTITION"),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        # the CPUs this run's processes may use (its affinity: a Slurm node confined to some, a taskset)
        "cpus_allowed": sorted(os.sched_getaffinity(0)),
        "memory_gb": round(mem_kb / 2**20, 1),
        "kernel_cmdline": text_or_none(Path("/proc/cmdline")),
        "sysctl": {name: value for name in SYSCTLS
                   if (value := text_or_none(Path("/proc/sys") / name.replace(".", "/"))) is not None},
    }


def text_or_none(path: Path) -> str | None:
    """A small file's text, stripped (a /proc or /sys entry), or None where it cannot be read."""
    try:
        return path.read_text().strip()
    except OSError:
        return None



def dbsweep_version() -> dict:
    """The git commit of the dbsweep code that ran (None outside a git checkout, e.g. a copied workflow) and
    whether its tree had uncommitted changes."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(Path(__file__).parent), *args], capture_output=True,
                                  text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": bool(status) if commit else None}


def checksums(folder: Path) -> dict[str, str]:
    """sha256 of every file below folder, by relative path."""
    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        out[str(path.relative_to(folder))] = digest.hexdigest()
    return out


def stored_json(path: Path | None) -> dict:
    """The JSON object in path (a cache of answers kept across processes); {} without one or unreadable."""
    if path is None:
        return {}
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def merge_json(path: Path | None, entries: dict) -> bool:
    """Add entries to the JSON object in path, written whole and renamed: a reader sees the old or the new
    file, and two writers at once lose at most one's entries (asked or measured again later). False where
    path is None or its folder cannot be written (a read-only working directory: the caller keeps them)."""
    if path is None:
        return False
    kept = stored_json(path) | entries
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(kept, out)
        os.replace(temp, path)
    except OSError:
        Path(temp).unlink(missing_ok=True)
        return False
    return True


def write_json(path: Path, data: dict) -> None:
    """Write data as JSON through a temporary file and a rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)
