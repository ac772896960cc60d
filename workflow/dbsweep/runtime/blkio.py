"""Block IO limits on a server's process tree, for the io_throttle event: cgroup v1's blkio controller
(blkio.throttle.{read,write}_{bps,iops}_device, for one device, the one the node's datadir is on).

A repetition's throttled servers live in `<blkio mount>/dbsweep/<owner>/<node>`, named like the
repetition's own cgroup (runtime.cgroup) after the process that made them, so a later run sweeps what
a killed one left. Lifting a limit writes 0; closing moves every process back to this process's own
blkio cgroup and removes the folders.

What v1 throttles: reads, and writes that reach the device from the process itself (O_DIRECT, and
the syncs of its own dirty pages). Buffered writes the kernel's flusher writes back later are not
charged to the process in v1, so a server that writes through the page cache is throttled on its
reads and syncs only. cgroup v2's io.max is not built: a host with only v2 refuses io_throttle
when the study loads.

A device class (devices.py) caps a loop device in the hierarchy's root cgroup instead (set_root): v1's
throttling is flat, each cgroup its own budget and a parent's rule no limit on its children, and the root
is where the kernel's own IO is charged (the flusher's writeback, the journal's commits), and where
a repetition's processes live. A node the io_throttle event moved into a cgroup of its own would leave
its device's class there, so the event's limits are the class's where it sets none, and never above them
(`classes`, the caps in force on each device).
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

import psutil

from dbsweep.runtime import cgroup
from dbsweep.units import parse_size

LIMITS = ("read_bps", "write_bps", "read_iops", "write_iops")
classes: dict[str, dict[str, int]] = {}  # 'major:minor' -> the device class's caps on it (set by storage.throttled)


def limits(event: dict) -> dict[str, int]:
    """The limits an io_throttle event gives (LIMITS key -> bytes per second from a size like 10M, or IOs
    per second), in LIMITS order."""
    return {key: parse_size(event[key]) if key.endswith("_bps") else event[key] for key in LIMITS if key in event}


def hierarchy() -> cgroup.Hierarchy | None:
    """The v1 hierarchy with the blkio controller, mounted at its root; None when there is none."""
    for root, point, fstype, options in cgroup.mounts():
        if fstype == "cgroup" and "blkio" in options and root == "/":
            return cgroup.Hierarchy(1, Path(point), "blkio")
    return None


def device(path: Path) -> str:
    """'major:minor' of the block device under the filesystem that holds path."""
    where = os.path.realpath(path)
    best = None
    for part in psutil.disk_partitions(all=True):
        point = part.mountpoint.rstrip("/") or "/"
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) > len(best.mountpoint)):
            best = part
    try:
        st = os.stat(best.device) if best is not None else None
    except OSError:
        st = None
    if st is None or not stat.S_ISBLK(st.st_mode):
        on = f"{best.fstype} ({best.device})" if best is not None else "no mount"
        raise RuntimeError(f"{where} is on {on}, not a block device: nothing to throttle")
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def rules(folder: Path, dev: str) -> dict[str, int]:
    """The limits set on dev in the blkio cgroup at folder, as the kernel reports them (LIMITS key -> value;
    a limit not set is left out)."""
    found = {}
    for key in LIMITS:
        for line in (folder / f"blkio.throttle.{key}_device").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == dev and value.strip().isdigit() and int(value) > 0:
                found[key] = int(value)
    return found


def serviced(folder: Path, dev: str) -> dict[str, int]:
    """The IOs the throttle has counted on dev so far in the cgroup at folder and every cgroup below it
    (blkio.throttle.io_serviced_recursive), by direction ('read', 'write'). The kernel counts a bio as it
    enters the throttle, before it waits, and in a direction only while a rule of that direction is set on
    dev; an fsync's empty flush is a write there, a write carrying its flush one IO."""
    found = {"read": 0, "write": 0}
    for line in (folder / "blkio.throttle.io_serviced_recursive").read_text().splitlines():
        name, _, rest = line.partition(" ")
        kind, _, value = rest.partition(" ")
        if name == dev and kind.lower() in found:
            found[kind.lower()] = int(value)
    return found


def set_rules(folder: Path, dev: str, limits: dict[str, int]) -> None:
    """Set every limit of LIMITS on dev in the cgroup at folder: the given ones, and no limit (0) for the rest,
    so a rule left by an earlier user of the device does not stay."""
    for key in LIMITS:
        (folder / f"blkio.throttle.{key}_device").write_text(f"{dev} {int(limits.get(key, 0))}")


def within_class(dev: str, limits: dict[str, int]) -> dict[str, int]:
    """The limits to set on dev in a cgroup of its own: those given, at most the device class's (a cgroup
    below the root leaves the root's rules behind), and the class's where none is given."""
    cls = classes.get(dev, {})
    return {key: min(v for v in (limits.get(key), cls.get(key)) if v) for key in LIMITS
            if limits.get(key) or cls.get(key)}


class Throttles:
    """The io_throttle limits of one repetition, one blkio cgroup per node."""

    def __init__(self):
        self.h = hierarchy()
        self.owner: cgroup.Cgroup | None = None
        self.groups: dict[str, tuple[cgroup.Cgroup, str, set[str]]] = {}  # node -> (cgroup, device, limits set)

    def limit(self, node: str, pids: list[int], dev: str, limits: dict[str, int]) -> int:
        """Move pids into the node's cgroup and set limits (LIMITS key -> bytes or IOs per second) on dev;
        returns how many processes it holds."""
        if self.h is None:
            raise RuntimeError("no cgroup v1 blkio hierarchy is mounted (see /proc/self/mountinfo)")
        if self.owner is None:
            self.owner = cgroup.create(self.h, os.getpid())
        if node not in self.groups:
            self.groups[node] = (self.owner.child(node), dev, set())
        group, _, set_ = self.groups[node]
        for pid in pids:
            cgroup.move(pid, group.path)
        for key, value in within_class(dev, limits).items():
            (group.path / f"blkio.throttle.{key}_device").write_text(f"{dev} {int(value)}")
            set_.add(key)
        return len(group.pids())

    def lift(self, node: str) -> str | None:
        """Remove the node's limits, down to its device's class (its processes stay in the cgroup until
        close); its device, or None."""
        if node not in self.groups:
            return None
        group, dev, set_ = self.groups[node]
        cls = classes.get(dev, {})
        for key in sorted(set_):
            (group.path / f"blkio.throttle.{key}_device").write_text(f"{dev} {cls.get(key, 0)}")
        set_ &= set(cls)  # the class's stay set, at its rates
        return dev

    def close(self) -> None:
        """Every process back to this process's own blkio cgroup; the cgroups removed."""
        if self.owner is None:
            return
        home = self.h.home()
        for node in list(self.groups):
            self.lift(node)
        for pid in self.owner.pids():
            cgroup.move(pid, home)
        self.owner.remove()
        self.owner, self.groups = None, {}


def sweep() -> list[str]:
    """Release the throttle cgroups of runs that died (their processes were killed by then)."""
    h = hierarchy()
    return [] if h is None else [f"blkio {name}" for name in cgroup.sweep(h)]
