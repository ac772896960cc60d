"""The results directory's lock: one snakemake at a time runs or submits a study into it.

An flock on results/.lock, held for the life of the snakemake process that runs
the study (locally or as the Slurm submitter); the file names the holder. Two
hosts sharing the directory over NFS see each other's lock (Linux maps flock to
NFS byte-range locks).

Snakemake's own lock (.snakemake/locks) outlives a snakemake that was killed
(SIGKILL, a power loss), and the next run stops on "Directory cannot be locked".
That lock names no owner, so nothing here can know its owner is dead, and it is
never removed here: a live snakemake between taking it and taking results/.lock
(building its DAG) would lose it. Instead `./dbsweep run` checks first (main()):
when Snakemake's lock is there and no snakemake holds results/.lock, it stops
with one line saying what to do: make sure no snakemake runs in the folder (it
names one it finds on this host), then run again with --unlock.
"""
from __future__ import annotations

import fcntl
import os
import shlex
import socket
import sys
from pathlib import Path

import psutil

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


# Options after which snakemake takes no lock of its own, or removes it (--unlock).
NO_LOCK = {"--unlock", "-n", "--dry-run", "--dryrun", "--nolock", "--lint", "--list", "-l", "--summary",
           "--detailed-summary", "--help", "-h", "--version", "-v"}


def directory(args: list[str]) -> Path:
    """The folder snakemake runs in: its -d / --directory, else the current one."""
    for i, arg in enumerate(args):
        if arg in ("-d", "--directory") and i + 1 < len(args):
            return Path(args[i + 1])
        if arg.startswith("--directory="):
            return Path(arg.split("=", 1)[1])
    return Path.cwd()


def snakemakes_in(folder: Path) -> list[int]:
    """Pids of snakemake processes on this host working in folder (snakemake changes into its -d)."""
    target = os.path.realpath(folder)
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        try:
            argv = proc.info["cmdline"] or []
            if proc.pid != os.getpid() and any(Path(a).name == "snakemake" for a in argv[:2]) \
                    and proc.info["cwd"] and os.path.realpath(proc.info["cwd"]) == target:
                found.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return sorted(found)


def left_lock(args: list[str]) -> str | None:
    """Why snakemake run with args would stop on its own lock, and what to do, in one line; None when it
    would not (no lock there, or an option that takes none)."""
    if NO_LOCK & set(args):
        return None
    folder = directory(args)
    locks = sorted((folder / ".snakemake" / "locks").glob("*.lock"))
    if not locks:
        return None
    running = snakemakes_in(folder)
    if running:
        return (f"a snakemake runs in {folder} (pid {', '.join(map(str, running))}) and holds its lock "
                f"({locks[0].parent}): wait for it to finish or stop it")
    held = holder(folder / "results" / ".lock")
    if held:
        return f"{folder / 'results' / '.lock'} is held by {held}: wait for it to finish or stop it"
    again = shlex.join(["./dbsweep", "run", *args, "--unlock"])
    return (f"Snakemake's lock ({locks[0].parent}) was left by a snakemake that no longer runs (killed, or a power "
            f"loss): no snakemake holds {folder / 'results' / '.lock'} and none runs in {folder} on this host. "
            f"If none runs there from another host either, remove the lock with `{again}`, then run again")


def main(args: list[str]) -> int:
    """`./dbsweep run`'s check before snakemake: one line and exit 1 when Snakemake's lock would stop it."""
    said = left_lock(args)
    if said:
        print(f"dbsweep: {said}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
