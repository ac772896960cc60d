"""Device classes: a cell's filesystem capped like a real volume, whose type is a published IOPS and
throughput limit.

    device_classes:
      gp3_base: {read_iops: 3000, write_iops: 3000, read_bps: 125M, write_bps: 125M}
      hdd:      {read_iops: 150, write_iops: 150, read_bps: 160M, write_bps: 160M}
    filesystems:
      ext4_gp3: {type: ext4, device_class: gp3_base}      # this filesystem always sits on the class
    axes:
      device_class: [none, gp3_base, hdd]                  # or an axis picks one per cell

The caps are blkio throttle rules on the cell's loop device, set when it is mounted and removed when it
is left (storage.throttled), so they hold for the whole repetition and for every IO of the filesystem:
the server, the client, the kernel's writeback and journal on their behalf. Each repetition records
them as declared and as the kernel reports them (run.json filesystem.device_class). docs/devices.md
has example classes and the measured delivery.

A class may also add a per-IO latency (read_latency_ms, write_latency_ms: a cloud volume's or a disk's
time per IO, which blkio cannot add): a delay server in nbdkit (delay_server.py) makes each read and
write of the loop device take that long (storage.delayed, storage.calibrate).

What cannot be delivered is refused when the study loads: a burst (there is no credit bucket, only a
rate), a class on a filesystem with no loop device of its own (tmpfs, a dir: on the host's disk, a real
device), caps on a host without cgroup v1's blkio throttling, a latency on a host without nbdkit, its
Python plugin, nbdfuse or /dev/fuse.
"""
from __future__ import annotations

import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from dbsweep.concern import Concern
from dbsweep.errors import ConfigError, shown
from dbsweep.names import check_name
from dbsweep.runtime import blkio, cgroup
from dbsweep.storage import DELAYS
from dbsweep.units import parse_size

AXIS = "device_class"
NONE = "none"  # the axis's value for the filesystem as it is, uncapped
MAX_IOPS = 2**32 - 1  # blk-throttle keeps an IOPS limit in an unsigned int
# What a class may not declare, and why: each is a key of the schema, so the user reads the reason.
UNDELIVERABLE = {
    "burst": "blkio throttling holds a steady rate and keeps no credit bucket, so a burst cannot be delivered; "
             "declare the baseline rates (docs/devices.md)",
    "latency": "give the time per IO as read_latency_ms and write_latency_ms (whole milliseconds)",
}
MAX_LATENCY_MS = 10_000  # a device slower than 10 s an IO is a fault, not a class
FUSE = Path("/dev/fuse")


def check(config: dict, axes: dict) -> dict[str, dict]:
    """The study's device classes (name -> caps in bytes and IOs per second, LIMITS keys), once every
    declaration of one is checked: the classes' values, the filesystems and axis that name them, and
    that this host can deliver them."""
    found = classes(config)
    named = {}
    for name, fs in config.get("filesystems", {}).items():
        if "device_class" in fs:
            where = f"filesystems.{name}.device_class"
            _known(fs["device_class"], found, where)
            why = unfit(fs)
            if why:
                raise ConfigError(f"{where}: {shown(fs['device_class'])}: {why}")
            named[name] = fs["device_class"]
    for value in axes.get(AXIS, []):
        if value != NONE:
            _known(value, found, f"axes.{AXIS}")
    both = [name for name in named if name in map(str, axes.get("filesystem", []))]
    if AXIS in axes and both:
        raise ConfigError(f"filesystems.{both[0]}.device_class: {shown(named[both[0]])}, and axes.{AXIS} "
                          f"picks a class too: let one of them choose")
    used = {str(value) for value in axes.get(AXIS, []) if value != NONE} | {str(value) for value in named.values()}
    for name in sorted(used):
        key = f"filesystems.{_first(named, name)}.device_class" if name in named.values() else f"axes.{AXIS}"
        why = (undeliverable(cgroup.mounts()) if any(cap in found[name] for cap in blkio.LIMITS) else None) or \
            (cannot_delay() if any(cap in found[name] for cap in DELAYS) else None)
        if why:
            raise ConfigError(f"{key}: {shown(name)}: this host cannot deliver the class: {why}")
    return found


def _first(named: dict, value: str) -> str:
    return next(fs for fs, name in named.items() if str(name) == value)


def cannot_delay(fuse: Path = FUSE) -> str | None:
    """Why this host cannot add a per-IO latency, or None: nbdkit (Debian's nbdkit) serves the image with
    delay_server.py in its Python plugin (nbdkit-plugin-python), nbdfuse (libnbd-bin) shows it as a file,
    on FUSE."""
    for tool, package in (("nbdkit", "nbdkit"), ("nbdfuse", "libnbd-bin")):
        if shutil.which(tool) is None:
            return f"a latency needs {tool}, not installed (apt-get install {package}; workflow/envs/install.sh)"
    if subprocess.run(["nbdkit", "python", "--version"], capture_output=True).returncode != 0:
        return ("a latency needs nbdkit's Python plugin, not installed (apt-get install nbdkit-plugin-python; "
                "workflow/envs/install.sh)")
    if not fuse.exists():
        return f"a latency needs FUSE, and {fuse} does not exist (modprobe fuse)"
    return None


def _caps(name: str, spec: dict) -> dict:
    """A class's caps: the schema gave each a type; here sizes become bytes and the undeliverable is refused."""
    check_name("device_classes", name)
    where = f"device_classes.{name}"
    for key, why in UNDELIVERABLE.items():
        if key in spec:
            raise ConfigError(f"{where}.{key}: {shown(spec[key])}: {why}")
    given = [key for key in blkio.LIMITS if key in spec]
    if not given and not any(key in spec for key in DELAYS):
        raise ConfigError(f"{where}: {shown(spec)} caps nothing; give one of {', '.join((*blkio.LIMITS, *DELAYS))}")
    caps = {}
    for key in DELAYS:
        if key in spec:
            value = spec[key]
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LATENCY_MS:
                raise ConfigError(f"{where}.{key}: {shown(value)} is not a whole number of milliseconds from 1 to "
                                  f"{MAX_LATENCY_MS} (whole ms, as a class declares it)")
            caps[key] = value
    for key in given:
        value = spec[key]
        try:
            amount = parse_size(value) if key.endswith("_bps") else value
        except ConfigError:
            amount = None
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            kind = "a size per second like 125M" if key.endswith("_bps") else "a whole number of IOs per second"
            raise ConfigError(f"{where}.{key}: {shown(value)} is not {kind}")
        if key.endswith("_iops") and amount > MAX_IOPS:
            raise ConfigError(f"{where}.{key}: {shown(value)} is above blkio's largest IOPS limit, {MAX_IOPS}")
        caps[key] = amount
    return caps


def _known(value, classes: dict, where: str) -> None:
    if str(value) not in classes:
        raise ConfigError(f"{where}: {shown(value)} is not a class under device_classes: "
                          f"({', '.join(classes) or 'none defined'})")


def unfit(fs: dict) -> str | None:
    """Why a filesystem cannot sit on a device class (it has no loop device of its own), or None."""
    if fs["type"] == "tmpfs":
        return "tmpfs is memory and has no block device to cap"
    if fs["type"] == "dir":
        return "a dir filesystem is on the host's own disk, which a class would cap for every process"
    if fs.get("device"):
        return f"{fs['device']} is a real device, capped by what it is; a class caps the loop device dbsweep makes"
    return None


def undeliverable(mounts: list[tuple[str, str, str, set[str]]]) -> str | None:
    """Why this host cannot cap a device (its cgroup mounts, as cgroup.mounts gives them), or None."""
    for root, point, fstype, options in mounts:
        if fstype == "cgroup" and "blkio" in options and root == "/":
            missing = [key for key in blkio.LIMITS if not (Path(point) / f"blkio.throttle.{key}_device").exists()]
            if missing:
                return (f"its blkio hierarchy at {point} has no blkio.throttle.{missing[0]}_device (a kernel "
                        "built without CONFIG_BLK_DEV_THROTTLING)")
            return None
    if any(fstype == "cgroup2" for _, _, fstype, _ in mounts):
        return "it mounts only cgroup v2, and dbsweep throttles with cgroup v1's blkio (v2's io.max is not built)"
    return "it mounts no cgroup v1 blkio hierarchy (see /proc/self/mountinfo)"


def on_cell(fs: dict, values: dict, classes: dict) -> dict:
    """The filesystem declaration of a cell's recipe: with the class it sits on (the axis's value, else the
    filesystem's own) as {"name", caps…}, or without one. A filesystem without a class stays as it was
    declared, so recipes recorded before classes existed stay equal."""
    name = values.get(AXIS, fs.get("device_class"))
    out = {key: value for key, value in fs.items() if key != "device_class"}
    if name is None or name == NONE:
        return out
    _known(name, classes, f"axes.{AXIS}")
    why = unfit(fs)
    if why:
        raise ConfigError(f"axes.{AXIS}: {shown(name)} on filesystem {shown(str(values.get('filesystem')))}: {why}; "
                          "exclude those cells")
    return out | {"device_class": {"name": str(name)} | classes[str(name)]}


def utilisation(row: dict, caps: dict, per_io: dict[str, float] | None = None) -> float | None:
    """The class's utilisation in one second of iostat's rows of its device (%): the largest share of a
    cap that the device's rates reached. Against an IOPS cap, each of iostat's IOs counts as `per_io` of
    its direction's IOs the throttle charged (charged_per_io: r/s for reads, w/s with f/s for writes), since
    iostat's columns are not the throttle's (a write carrying its flush is one IO to the throttle and one in
    each of w/s and f/s, an fsync's empty flush is a write to it, merged and split IOs differ); without them
    the IOPS caps are left out. iostat's kB are 1,024 bytes. iostat's own %util cannot say this: a
    throttled IO waits above the device, and only the loop device's service counts as busy. None without
    a cap to compare with."""
    rates = {"read_bps": row["rkb_s"] * 1024, "write_bps": row["wkb_s"] * 1024}
    if per_io is not None:
        rates |= {"read_iops": row["r_s"] * per_io["read"], "write_iops": (row["w_s"] + row["f_s"]) * per_io["write"]}
    shares = [rates[key] / cap for key, cap in caps.items() if key in rates and cap]
    return round(100 * max(shares), 2) if shares else None


def charged_per_io(counts: dict | None) -> dict[str, float] | None:
    """What one of iostat's IOs of the device counts as to its throttle, by direction: the IOs the throttle
    charged over the measured window over those the device completed in it (counts: run.json throttle_ios
    of the device, both read together as the window started and as it ended; the device's are iostat's
    source, /proc/diskstats, writes with their flushes); 1 where the device completed none. None without
    the throttle's counts (a run from before they were read)."""
    if not counts or "end" not in counts:
        return None
    start, end = counts["start"], counts["end"]
    out = {}
    for way in ("read", "write"):
        done = end[f"device_{way}"] - start[f"device_{way}"]
        out[way] = (end[way] - start[way]) / done if done else 1.0
    return out


def diskstats(dev: str, path: Path = Path("/proc/diskstats")) -> dict[str, int]:
    """The IOs the device 'major:minor' has completed since boot, as iostat reads them: reads, and writes
    with the flushes (fields 4, 8 and 19 of /proc/diskstats; a kernel before 5.5 counts no flushes, one
    before 4.18 no discards either)."""
    major, minor = dev.split(":")
    for line in path.read_text().splitlines():
        fields = line.split()
        if fields[:2] == [major, minor]:
            flushes = int(fields[18]) if len(fields) > 18 else 0
            return {"read": int(fields[3]), "write": int(fields[7]) + flushes}
    raise RuntimeError(f"device {dev} is not in {path}")


@contextmanager
def throttle_counts(record: dict):
    """The IOs the throttle has charged on each capped device (blkio.classes), read as the body (a measured
    window) starts and as it ends, with those the device completed, into record["throttle_ios"]
    ('major:minor' -> start and end: the time, the throttle's read and write IOs, the device's)."""
    h = blkio.hierarchy() if blkio.classes else None
    if h is None:
        yield
        return

    def now(dev: str) -> dict:
        done = diskstats(dev)
        return {"time": time.time()} | blkio.serviced(h.mount, dev) | {"device_read": done["read"],
                                                                        "device_write": done["write"]}

    counts = record["throttle_ios"] = {dev: {"start": now(dev)} for dev in blkio.classes}
    try:
        yield
    finally:
        for dev, count in counts.items():
            count["end"] = now(dev)


def mean_utilisation(system: list[dict], seconds: int) -> float | None:
    """The mean of the class's per-second utilisation over the measured seconds (1 to seconds) of the
    system rows; None when no second of them has one (the capped device was not sampled)."""
    values = [row["class_util_pct"] for row in system
              if 1 <= row["second"] <= seconds and row.get("class_util_pct") is not None]
    return round(sum(values) / len(values), 2) if values else None


def without_class(fs: dict) -> dict:
    """A filesystem declaration without its device class: a cap shapes the run, never the prepared image."""
    return {key: value for key, value in fs.items() if key != "device_class"}


def classes(config: dict) -> dict[str, dict]:
    """The study's device classes by name, their caps in bytes and IOs per second (checked by check)."""
    return {name: _caps(name, spec) for name, spec in config.get("device_classes", {}).items()}


CONCERN = Concern(name="device classes", check=lambda draft: check(draft.config, draft.axes),
                  study=lambda draft, cells: {"device_classes": classes(draft.config)})
