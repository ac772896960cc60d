"""A memory cgroup around a server's process tree, so its page cache counts against the cap too.

Works on cgroup v1 (the memory controller's own hierarchy, memory.limit_in_bytes)
and v2 (memory.max, with +memory enabled in the parent's cgroup.subtree_control).
The new cgroup is made below the one this process is in (v1), or on v2 below
the repetition's cgroup (runtime.cgroup) or wherever else v2 allows memory limits; on exit any process still in it
goes back to this process's own cgroup and the cgroup is removed.
"""
from __future__ import annotations

import errno
import re
import time
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Iterator

import psutil

from dbsweep.runtime import cgroup as repetition_cgroup
from dbsweep.runtime.cgroup import mounts, move, own_cgroups, where
from dbsweep.units import parse_size

RMDIR_TRIES = 50


def _locate() -> tuple[int, Path, Path]:
    """(version, mount point, folder of this process's cgroup) of the hierarchy that has the memory controller."""
    own = own_cgroups()
    found = mounts()
    if "memory" in own:
        for root, point, fstype, options in found:
            if fstype == "cgroup" and "memory" in options:
                return 1, Path(point), where(root, point, own["memory"])
    if "" in own:
        for root, point, fstype, _ in found:
            if fstype == "cgroup2" and "memory" in (Path(point) / "cgroup.controllers").read_text().split():
                return 2, Path(point), where(root, point, own[""])
    raise RuntimeError("no cgroup hierarchy with the memory controller is mounted (see /proc/self/mountinfo)")


def _enable_memory(folder: Path) -> bool:
    """cgroup v2: make memory limits available to folder's children."""
    control = folder / "cgroup.subtree_control"
    try:
        if "memory" not in control.read_text().split():
            control.write_text("+memory")
        return "memory" in control.read_text().split()
    except OSError:  # EBUSY: folder holds processes itself (the no-internal-processes rule)
        return False


def _procs(folder: Path) -> list[int]:
    try:
        return [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


class MemoryCgroup:
    """The callable memory_cgroup yields: add(pid) moves pid and its descendants in."""

    def __init__(self, path: Path, limit_file: Path, home: Path):
        self.path, self.limit_file, self.home = path, limit_file, home

    def __call__(self, pid: int) -> None:
        # The parent first, so what it forks from now on is born inside; then every descendant it
        # forked before (listed after the move, so none forked in between is missed).
        move(pid, self.path)
        try:
            children = psutil.Process(pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for child in children:
            move(child.pid, self.path)

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer has killed in this cgroup (v1 memory.oom_control,
        v2 memory.events: their oom_kill line); 0 where the kernel does not count them."""
        for name in ("memory.oom_control", "memory.events"):
            try:
                text = (self.path / name).read_text()
            except OSError:
                continue
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def limit_mb(self) -> int:
        return int(self.limit_file.read_text().strip()) >> 20

    def release(self) -> None:
        """Send remaining processes home and remove the cgroup (retrying while the kernel lets go of it)."""
        for _ in range(RMDIR_TRIES):
            for pid in _procs(self.path):
                move(pid, self.home)
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as error:
                if error.errno != errno.EBUSY:
                    raise
            time.sleep(0.1)
        raise RuntimeError(f"cgroup {self.path}: could not remove it (still holds {_procs(self.path)})")


def _create(name: str, limit_bytes: int) -> MemoryCgroup:
    version, mount, home = _locate()
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "dbsweep"
    if version == 1:
        parents, limit_name = [home], "memory.limit_in_bytes"
    else:
        # Below the repetition's cgroup when there is one, so the server stays the repetition's.
        inside = repetition_cgroup.current
        parents = ([inside.path] if inside is not None and inside.hierarchy.version == 2 else []) + [home, mount]
        limit_name = "memory.max"
    for parent in parents:
        if version == 2 and not _enable_memory(parent):
            continue
        path = parent / name
        if path.exists():  # left by a run that was killed: reuse it only if empty
            if _procs(path):
                raise RuntimeError(f"cgroup {path} already exists and holds processes {_procs(path)}")
            path.rmdir()
        try:
            path.mkdir()
        except OSError as error:
            raise RuntimeError(f"cannot create cgroup {path}: {error.strerror}") from None
        cgroup = MemoryCgroup(path, path / limit_name, home)
        try:
            cgroup.limit_file.write_text(str(int(limit_bytes)))
        except BaseException:
            cgroup.release()
            raise
        return cgroup
    raise RuntimeError(f"cgroup v2 at {mount}: memory limits cannot be enabled below {home} or {mount}")


@contextmanager
def memory_cgroup(name: str, limit_bytes: int | str) -> Iterator[MemoryCgroup]:
    """A new memory cgroup capped at limit_bytes (or a size like "512M"); yields add(pid) (with .path and .limit_file).

    Page cache a process in it causes is charged to it too, so the cap also
    stops the OS cache from hiding IO. Released on exit, also on errors.
    """
    limit = parse_size(limit_bytes)  # bytes, or a size like "512M"
    if limit <= 0:
        raise ValueError(f"memory cgroup {name}: limit {limit_bytes!r} is not a positive size")
    cgroup = _create(name, limit)
    try:
        yield cgroup
    except BaseException as error:
        try:
            cgroup.release()
        except (RuntimeError, OSError) as problem:
            error.add_note(str(problem))  # the body's error stays the one raised
        raise
    cgroup.release()
