"""The results directory's lock: one snakemake at a time runs or submits a study into it.

An flock on results/.lock, held for the life of the snakemake process that runs
the study (locally or as the Slurm submitter); the file names the holder. Two
hosts sharing the directory over NFS see each other's lock (Linux maps flock to
NFS byte-range locks).
"""
from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from dbsweep import manifest

_held: list[int] = []  # the descriptor whose flock this process holds, kept open until it exits


class Held(RuntimeError):
    """Another process holds the lock."""


def holder(path: Path) -> str | None:
    """Who holds the lock at path ("snakemake pid N on HOST since T"), or None when nobody does."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def take(path: Path) -> None:
    """Hold the lock until this process exits; raise Held naming the lock and its holder."""
    if _held:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        who = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise Held(f"{path} is held by {who}; wait for it to finish or stop it") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"snakemake pid {os.getpid()} on {socket.gethostname()} since {manifest.now()}\n".encode(), 0)
    _held.append(fd)
