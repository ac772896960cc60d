"""The host's measuring lock: one measurement at a time on this host, across results folders.

An flock on a fixed host path, taken by the measuring process itself (the run or
prepare job's Python, not snakemake) for its whole repetition, and inherited by
its guardian (runtime.guardian), so a job whose snakemake was killed keeps it
until it has measured and released everything. A second measuring job waits for
it, after one line naming the holder. results/.lock (dbsweep.lock) is another
lock: one snakemake per results folder.
"""
from __future__ import annotations

import fcntl
import os
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Iterator

from dbsweep import lock as results_lock, manifest

PATH = Path(os.environ.get("DBSWEEP_MEASURE_LOCK", "/run/dbsweep/measure.lock"))
# How a run log says that its job waits for the lock, and that it took it (the study's progress line
# reads them: study_progress.py)
WAITING = "dbsweep: waiting for the host's measuring lock"
TAKEN = "measuring lock taken after"


def holder(path: Path | None = None) -> str | None:
    """Who holds the lock at PATH (or path): "pid N on HOST in FOLDER: WHAT since T", or None."""
    return results_lock.holder(path or PATH)


@contextmanager
def measuring(what: str, log, path: Path | None = None) -> Iterator[int]:
    """Hold the lock (at PATH unless given) for the body (yields its descriptor); when another process
    holds it, say whose it is in log and on stderr, then wait for it."""
    path = path or PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process"
            line = f"{WAITING} {path}, held by {who}"
            for out in (log, sys.stderr):
                out.write(line + "\n")
                out.flush()
            waited = time.monotonic()
            fcntl.flock(fd, fcntl.LOCK_EX)
            log.write(f"{TAKEN} {time.monotonic() - waited:.1f} s\n")
            log.flush()
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} in {Path.cwd()}: {what} since {manifest.now()}\n"
                  .encode(), 0)
        yield fd
    finally:
        os.close(fd)  # the lock goes with the last descriptor: a guardian may still hold one
