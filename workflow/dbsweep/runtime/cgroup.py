"""The repetition's cgroup: every process a repetition starts lives in it, and leaving kills them all.

Kernel-enforced ownership, as BenchExec's runexec does it: the job's own Python
moves itself into a new cgroup before it starts anything, so every process it
starts from then on (servers, the tool and children that left its session, such
as fio's setsid'd workers, monitors, services) is born inside, whatever parentage
it later has. Leaving, the Python moves back out and kills whatever is still in
the cgroup, then removes it.

cgroup v1: the freezer hierarchy (frozen, killed, thawed, so nothing forks while
it is killed), else the pids one (SIGKILL until it is empty). cgroup v2: the
unified hierarchy, cgroup.kill. Repetition cgroups live in one fixed place per
host, `<hierarchy>/dbsweep/<pid>-<start ticks>`, named after the process that owns
them, so a later run finds what a dead one left (sweep) and leaves alone a live
one's.
"""
from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

BASE = "dbsweep"
KILL_WAIT_S = 60
RMDIR_TRIES = 50

current: Cgroup | None = None  # the repetition cgroup this process is in (set by runtime.owned)


def mounts(mountinfo: str | None = None) -> list[tuple[str, str, str, set[str]]]:
    """(root inside the hierarchy, mount point, fstype, options) of each cgroup mount, in this process's
    /proc/self/mountinfo or the text of one given."""
    found = []
    text = Path("/proc/self/mountinfo").read_text() if mountinfo is None else mountinfo
    for line in text.splitlines():
        fields = line.split()
        sep = fields.index("-")
        fstype = fields[sep + 1]
        if fstype in ("cgroup", "cgroup2"):
            options = set(fields[sep + 3].split(",")) | set(fields[5].split(","))
            found.append((fields[3], fields[4], fstype, options))
    return found


def own_cgroups(pid: int | str = "self") -> dict[str, str]:
    """controller -> path of a process's cgroup ("" for the v2 hierarchy), from /proc/PID/cgroup."""
    own = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def where(mount_root: str, mount_point: str, inside: str) -> Path:
    """The folder of cgroup `inside` (as /proc/self/cgroup names it) under a mount of the hierarchy at mount_root."""
    try:
        relative = Path(inside).relative_to(mount_root)
    except ValueError:
        relative = Path(inside.lstrip("/"))
    return Path(mount_point) / relative


@dataclass(frozen=True)
class Hierarchy:
    """A cgroup hierarchy that can hold a repetition: v1 (freezer or pids) or v2 (unified)."""

    version: int
    mount: Path
    controller: str  # v1: "freezer" or "pids"; v2: ""

    @property
    def base(self) -> Path:
        return self.mount / BASE

    def home(self, pid: int | str = "self") -> Path:
        """The folder of the cgroup a process is in now."""
        inside = own_cgroups(pid).get(self.controller, "/")
        return self.mount / inside.lstrip("/")


def hierarchy() -> Hierarchy:
    """The hierarchy repetitions live in: v1's freezer (else pids) when this process is in one, else v2."""
    own = own_cgroups()
    found = mounts()
    for controller in ("freezer", "pids"):
        if controller in own:
            for root, point, fstype, options in found:
                if fstype == "cgroup" and controller in options and root == "/":
                    return Hierarchy(1, Path(point), controller)
    if "" in own:
        for root, point, fstype, _ in found:
            if fstype == "cgroup2" and root == "/":
                return Hierarchy(2, Path(point), "")
    raise RuntimeError("no cgroup hierarchy to hold a repetition's processes: neither v1 freezer or pids "
                       "nor v2 is mounted at its root (see /proc/self/mountinfo)")


def start_ticks(pid: int) -> int | None:
    """When pid started (clock ticks since boot), or None when it is gone: tells a pid from its reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def owner_name(pid: int) -> str:
    return f"{pid}-{start_ticks(pid)}"


def owner_alive(name: str) -> bool:
    """Whether the process a repetition cgroup is named after still runs (the same one, not a reused pid)."""
    try:
        pid, ticks = (int(part) for part in name.split("-", 1))
    except ValueError:
        return False
    return start_ticks(pid) == ticks


def _procs(folder: Path) -> list[int]:
    try:
        return [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def move(pid: int, folder: Path) -> None:
    """Move pid (all its threads) into the cgroup at folder; a process that is gone is no error."""
    try:
        (folder / "cgroup.procs").write_text(str(pid))
    except ProcessLookupError:
        pass
    except OSError as error:
        if error.errno != errno.ESRCH:
            raise


@dataclass
class Cgroup:
    """One repetition's cgroup (a folder under Hierarchy.base), and its sub-cgroups."""

    hierarchy: Hierarchy
    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def entry(self) -> Path:
        """Where the job's own Python goes: v2 lets a cgroup with enabled controllers (a memory cap below
        it) hold no processes itself, so there it is a leaf `job`; v1 has no such rule."""
        return self.path / "job" if self.hierarchy.version == 2 else self.path

    def child(self, name: str) -> Cgroup:
        """A new sub-cgroup (e.g. for the tool, so that it can be killed alone)."""
        path = self.path / name
        path.mkdir()
        return Cgroup(self.hierarchy, path)

    def enter_argv(self) -> list[str]:
        """A prefix for a command line that moves the command into this cgroup before it execs, so it
        and everything it forks are born inside, with no moment outside."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.path / "cgroup.procs")]

    def pids(self) -> list[int]:
        """Every process in the cgroup and its sub-cgroups."""
        found = []
        for folder, _, _ in os.walk(self.path):
            found += _procs(Path(folder))
        return found

    def kill(self, wait_s: float = KILL_WAIT_S) -> list[int]:
        """SIGKILL every process in it and wait until it is empty; returns the pids found at first.
        A process in uninterruptible IO dies only when its IO completes."""
        first = self.pids()
        deadline = time.monotonic() + wait_s
        while True:
            pids = self.pids()
            if not pids:
                return first
            if time.monotonic() > deadline:
                raise RuntimeError(f"cgroup {self.path}: processes {pids} would not die")
            kill_file = self.path / "cgroup.kill"
            if self.hierarchy.version == 2 and kill_file.exists():
                kill_file.write_text("1")  # the kernel kills the whole subtree, forks included
            elif self.hierarchy.controller == "freezer":
                self._frozen_kill(pids)
            else:
                for pid in pids:
                    _sigkill(pid)
            time.sleep(0.05)

    def _frozen_kill(self, pids: list[int]) -> None:
        state = self.path / "freezer.state"
        state.write_text("FROZEN")
        deadline = time.monotonic() + 2  # a task in uninterruptible sleep keeps it FREEZING
        while state.read_text().strip() != "FROZEN" and time.monotonic() < deadline:
            time.sleep(0.01)
        for pid in self.pids():  # complete now: nothing forks while frozen
            _sigkill(pid)
        state.write_text("THAWED")

    def remove(self) -> None:
        """Remove it and its sub-cgroups (empty ones; the kernel may need a moment to let go)."""
        folders = sorted((Path(f) for f, _, _ in os.walk(self.path)), key=lambda p: len(p.parts), reverse=True)
        for folder in folders:
            for _ in range(RMDIR_TRIES):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as error:
                    if error.errno != errno.EBUSY:
                        raise
                time.sleep(0.1)
            else:
                raise RuntimeError(f"cgroup {folder}: could not remove it (holds {_procs(folder)})")


def _sigkill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def create(h: Hierarchy, owner: int) -> Cgroup:
    """A new, empty repetition cgroup named after its owner process."""
    h.base.mkdir(exist_ok=True)
    path = h.base / owner_name(owner)
    if path.exists():  # the same process, a repetition before: only an empty one is taken over
        left = Cgroup(h, path)
        left.kill()
        left.remove()
    path.mkdir()
    cgroup = Cgroup(h, path)
    if h.version == 2:
        for folder in (h.mount, h.base, path):  # so a memory cap can go below it (best effort)
            with contextlib.suppress(OSError):
                (folder / "cgroup.subtree_control").write_text("+memory")
        cgroup.entry.mkdir()
    return cgroup


def leftovers(h: Hierarchy) -> list[Cgroup]:
    """Repetition cgroups whose owner process is gone: a dead run's."""
    if not h.base.is_dir():
        return []
    return [Cgroup(h, path) for path in sorted(h.base.iterdir())
            if path.is_dir() and not owner_alive(path.name)]


def sweep(h: Hierarchy) -> list[str]:
    """Kill everything in a dead run's repetition cgroups and remove them; returns what was killed."""
    released = []
    for cgroup in leftovers(h):
        killed = cgroup.kill()
        cgroup.remove()
        released.append(f"cgroup {cgroup.name} ({len(killed)} processes killed)")
    return released
