"""The repetition's runtime: what a measuring job holds while it measures, and releases always.

    with owned("run cell~…/rep~1", active, log):   # measuring lock → sweep of dead runs → cgroup → guardian
        with Stack() as stack:                      # filesystem(s) → server(s) → services → monitors → workload
            ...

lock.py: the host's measuring lock; cgroup.py: the repetition's cgroup (every
process it starts), memory.py: a memory cap inside it; guardian.py: releases a
repetition whose job died; signals.py: SIGTERM/SIGINT/SIGHUP as an exception;
resources.py: the stack of a repetition's resources, left in reverse.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Iterator

from dbsweep import storage
from dbsweep.runtime import blkio, cgroup, guardian, lock

active: Path | None = None  # the results/.active folder of the repetition this process is in (set by owned)


@contextmanager
def owned(what: str, active_folder: Path, log) -> Iterator[cgroup.Cgroup]:
    """Hold the host's measuring lock, release what dead runs left (their processes killed first, then
    their mounts, loop devices and scratch files), and run the body inside a new repetition cgroup with
    a guardian outside it. On exit, whatever the body left running in the cgroup is killed, and what it
    could not release is released."""
    global active

    with lock.measuring(what, log) as lock_fd:
        h = cgroup.hierarchy()
        released = cgroup.sweep(h) + blkio.sweep() + storage.sweep_stale(active_folder)
        if released:
            log.write(f"released what a dead run left behind: {released}\n")
            log.flush()
        rep = cgroup.create(h, os.getpid())
        home = h.home()
        guard = guardian.start(rep, active_folder, lock_fd, log)
        clean = False
        try:
            cgroup.move(os.getpid(), rep.entry)
            cgroup.current, active = rep, Path(active_folder)
            try:
                yield rep
            finally:
                cgroup.current, active = None, None
                cgroup.move(os.getpid(), home)
                killed = rep.kill()
                rep.remove()
                if killed:
                    log.write(f"killed {len(killed)} processes the repetition left running: {sorted(killed)}\n")
                left = storage.release(active_folder, os.getpid())
                if left:
                    log.write(f"released after its processes were killed: {left}\n")
                log.flush()
                clean = True
        finally:
            guard.done() if clean else guard.abandon()  # abandoned: the guardian releases what is left
