"""Filesystems for a run: sparse loop images, mkfs, mount, and always release.

Everything set up is recorded in an `active` folder while it exists (mounts, loop
devices, scratch files that may hold a secret, a topology's network namespaces), so
what a run killed with SIGKILL set up is released by its guardian or the next run on
the same host (sweep_stale): unmounted, detached and deleted for real, never lazily,
once the run's processes are killed (runtime.cgroup).

A filesystem on a device class (devices.py) has its loop device capped for as long as it is mounted
(throttled): a blkio rule in the root cgroup, which outlives the loop device's detach and would cap the
next user of the same loop device, so it is recorded like a mount, removed first when released, and
a loop device just attached starts without one.

A class with a per-IO latency puts nbdkit's delay filter between the loop device and its image (delayed):
nbdkit serves the image file with each read and write held for the class's milliseconds, nbdfuse shows it
as a file on a FUSE mount, and the loop device is attached to that file. This kernel has neither
device-mapper's dm-delay nor an NBD client, and FUSE is what it has. Both processes are the repetition's
(its cgroup kills them with the rest); the FUSE mount is recorded like the others, unmounted after the loop
device over it is detached.
"""
from __future__ import annotations

import contextlib
import errno
import json
import mmap
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from dbsweep import manifest
from dbsweep.runtime import blkio, cgroup

LOOP_TYPES = ("ext4", "xfs", "btrfs")
_FORCE = {"ext4": "-F", "xfs": "-f", "btrfs": "-f"}
NETNS_DIR = Path("/run/netns")  # where `ip netns` keeps a namespace by name
DELAYS = {"read_latency_ms": "read_s", "write_latency_ms": "write_s"}  # class key -> the delay server's setting
DELAY_SERVER = Path(__file__).with_name("delay_server.py")  # nbdkit's Python plugin that holds each IO
CALIBRATION_ROUNDS = 5  # of storage.calibrate: the hold is the declared minus the rounds' median path time
CALIBRATE_BELOW_MS = 50  # a longer latency is held whole: the path's 0.3-0.5 ms is under 1% of it
CALIBRATION_S = 0.2  # a round's length, about: at 1 ms, 41 reads (the most); at 5 ms, 40; at 40 ms, 5
MAX_PATH_MS = 1.0  # the most the calibration takes off a hold (the path took 0.1-0.6 ms here)
FUSE_WAIT_S = 20  # for nbdkit to listen and nbdfuse to mount its file (a second here), or to exit
NBD_CONNECTIONS = 16  # nbdfuse's connections to nbdkit: how many IOs can be in the delay at once (storage.delayed)


@dataclass
class Mounted:
    """A filesystem ready for a run."""

    path: Path
    devices: list[str] = field(default_factory=list)  # block device names for iostat, e.g. ["loop3"]
    facts: dict = field(default_factory=dict)  # for the manifest
    commands: list[list[str]] = field(default_factory=list)


def sh(argv: list[str], **kw) -> subprocess.CompletedProcess:
    """Run argv; on failure raise with the command's own message."""
    done = subprocess.run(argv, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done


def device_in_use(device: str) -> bool:
    """True when the device or any of its partitions is mounted or used as swap."""
    out = sh(["lsblk", "-nrpo", "MOUNTPOINT", device]).stdout
    return any(line.strip() for line in out.splitlines())


def _mount_points() -> list[Path]:
    return [Path(line.split()[1]) for line in Path("/proc/self/mounts").read_text().splitlines()]


def mount_facts(target: Path) -> dict:
    """Source, type and options of the mount at target, as the kernel reports them."""
    target = str(Path(target).resolve())
    for line in Path("/proc/self/mounts").read_text().splitlines():
        source, point, fstype, options, *_ = line.split()
        if point == target:
            return {"source": source, "fstype": fstype, "mount_options": options}
    return {}


def register(active: Path, record: dict) -> Path:
    """Record what is being set up in `active`; the caller removes the record (the returned path) once
    it has released it, so a release that fails, or a kill, leaves the record for release() or
    sweep_stale() to finish the job."""
    active.mkdir(parents=True, exist_ok=True)
    entry = active / f"{uuid.uuid4().hex}.json"
    entry.write_text(json.dumps(record | {"host": socket.gethostname(), "pid": os.getpid()}))
    return entry


@contextmanager
def scratch_files(path: Path, active: Path):
    """Remove path (a file or folder that may hold a secret, e.g. an image copy) after the body, and
    after a kill through the record in active."""
    entry = register(active, {"remove": str(Path(path).resolve())})
    try:
        yield path
    finally:
        _remove(Path(path))
        entry.unlink(missing_ok=True)


def _remove(path: Path) -> None:
    """Remove a file or folder, never what is mounted below it."""
    held = [point for point in _mount_points() if point == path.resolve() or path.resolve() in point.parents]
    if held:
        raise RuntimeError(f"not removing {path}: {held[0]} is still mounted")
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def loop_device(image: Path, active: Path):
    """Attach image to a loop device with direct IO, so the host page cache does not hide the device."""
    dev = sh(["losetup", "--direct-io=on", "--find", "--show", str(image)]).stdout.strip()
    entry = register(active, {"loop": dev, "image": str(image.resolve())})
    try:
        h = blkio.hierarchy()
        if h is not None and blkio.rules(h.mount, major_minor(dev)):  # a killed run's, not released
            blkio.set_rules(h.mount, major_minor(dev), {})
        yield dev
    finally:
        detach(dev)
        entry.unlink(missing_ok=True)


def major_minor(dev: str) -> str:
    """'major:minor' of a block device node, as the blkio files name it."""
    number = os.stat(dev).st_rdev
    return f"{os.major(number)}:{os.minor(number)}"


@dataclass
class Delay:
    """A running delay server (delay_server.py in nbdkit) under a loop device: the file to attach, the
    settings file it reads its holds from, and the record of the class's latency (run.json)."""

    file: Path
    settings: Path
    record: dict

    def hold(self, holds_ms: dict) -> dict:
        """Set the server's hold per direction (DELAYS keys -> ms) and wait until it reports it applies
        them; returns what it applies (ms)."""
        data = json.dumps({DELAYS[key]: ms / 1000 for key, ms in holds_ms.items()})
        self.settings.with_suffix(".tmp").write_text(data)
        os.replace(self.settings.with_suffix(".tmp"), self.settings)
        want = {key: round(ms, 6) for key, ms in holds_ms.items()}
        deadline = time.monotonic() + FUSE_WAIT_S
        while (got := _only(applied_holds(self.settings), want)) != want and time.monotonic() < deadline:
            _probe_one(self.file)  # the server reads its settings at its next IO
        if got != want:
            raise RuntimeError(f"device class latency: the delay server applies {got}, not {want} ({self.settings})")
        return got


@contextmanager
def delayed(image: Path, latency: dict, folder: Path, active: Path):
    """Serve image with each read and write taking the class's latency (DELAYS keys, ms): yields the Delay,
    whose file the loop device is attached to; calibrate() then sets its holds.

    nbdkit runs delay_server.py (nbdkit-plugin-python), which holds each IO until a deadline counted from
    its arrival, its own pread or pwrite inside, in fractions of a ms (nbdkit 1.32's delay filter holds
    whole ms on top of the IO). nbdkit listens on a Unix socket and nbdfuse opens NBD_CONNECTIONS to it:
    with the one connection of nbdfuse's `[ nbdkit … ]` form, about 2.7 IOs were in the delay at once.
    Both stay in the foreground as this process's children, so they are in its cgroup, and nbdkit exits
    with it. Stopped by unmounting the FUSE mount (nbdfuse's documented way), after the loop device over it
    is detached, then nbdkit; after a kill, the record in active unmounts it (release)."""
    point = folder / "nbd"
    point.mkdir(parents=True, exist_ok=True)
    settings = folder / "nbd-holds.json"
    settings.write_text("{}")
    record = {"declared": dict(latency)}
    with ExitStack() as stack:
        # a socket's path has at most 107 bytes, and a repetition's folder is longer: a private folder in /tmp
        socket_path = stack.enter_context(scratch_files(Path(tempfile.mkdtemp(prefix="dbsweep-nbd-")), active)) / "sock"
        entry = register(active, {"fuse": str(point.resolve())})
        log = stack.enter_context(open(folder / "nbd.log", "w"))
        kit = stack.enter_context(_child(["nbdkit", "--foreground", "--exit-with-parent", "--unix", str(socket_path),
                                          "python", str(DELAY_SERVER), f"file={image}", f"settings={settings}"], log))
        _wait_for(lambda: socket_path.is_socket(), kit, f"nbdkit did not listen on {socket_path}", folder / "nbd.log")
        fuse = stack.enter_context(_child(["nbdfuse", "--connections", str(NBD_CONNECTIONS), str(point / "disk"),
                                           "--unix", str(socket_path)], log))
        stack.callback(_unmount_fuse, point, fuse, entry)
        _wait_for(lambda: mount_facts(point).get("fstype", "").startswith("fuse"), fuse,
                  f"nbdfuse did not mount {point}", folder / "nbd.log")
        delay = Delay(point / "disk", settings, record)
        try:
            yield delay
        finally:
            record["delivered_at_end"] = served_delays(kit.pid, settings, record)


def calibrate(dev: str, delay: Delay) -> None:
    """Set the holds so that a 4k direct IO one at a time through the loop device dev takes the declared
    latency at the median: the path's own time (the loop device, FUSE, nbdfuse, the socket, the wake-ups
    on this host now) comes off the hold. For each direction, CALIBRATION_ROUNDS rounds of a few reads on
    the loop device before anything mounts it, with the read hold at that direction's: each round's lower
    quartile (probe) minus its hold is the path's time (it grows with the hold), and the hold is the
    declared minus the median of the rounds' (one round in a burst of the host's load does not set it), at
    most MAX_PATH_MS.
    Reads only: writes of the probe (blocks written back in place) made later reads wait several ms, and
    the calibration then took the whole latency off. Recorded: the holds (hold_ms), each round's path time
    (path_ms) and what the server applies (delivered, as targets). A latency of CALIBRATE_BELOW_MS or more
    is held whole."""
    holds = dict(delay.record["declared"])
    path = {key: [] for key, ms in holds.items() if ms < CALIBRATE_BELOW_MS}
    for key, times in path.items():
        target = holds[key]
        for _ in range(CALIBRATION_ROUNDS):
            delay.hold({"read_latency_ms": holds[key]})
            times.append(probe(dev, target) - holds[key])
            holds[key] = max(0.0, target - min(MAX_PATH_MS, max(0.0, statistics.median(times))))
    applied = delay.hold(holds)
    delay.record |= {"hold_ms": applied,
                     "path_ms": {key: [round(ms, 3) for ms in times] for key, times in path.items()}}
    delay.record["delivered"] = served_delays(None, delay.settings, delay.record)


def probe(dev: str, latency_ms: float) -> float:
    """The lower quartile of the times (ms) of 4k direct reads one at a time at random offsets of dev;
    enough of them for about CALIBRATION_S at latency_ms each, at least 5 and at most 41. The lower quartile,
    not the median: the set-up of a run is busier than its window (the median took 0.45-0.7 ms of path in
    a workflow cell, 0.35 in the benchmark, and fio's median came out 11-14% under the declared)."""
    count = max(5, min(41, int(CALIBRATION_S * 1000 / max(latency_ms, 0.001))))
    size = int(Path(f"/sys/block/{Path(dev).name}/size").read_text()) * 512
    times = []
    buf = mmap.mmap(-1, 4096)
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    try:
        for _ in range(count):
            offset = random.randrange(size // 4096) * 4096
            start = time.perf_counter()
            os.preadv(fd, [buf], offset)
            times.append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
        buf.close()
    return statistics.quantiles(times, n=4)[0]


def _probe_one(file: Path) -> None:
    """One small read of the served file, so the server sees its settings changed."""
    with open(file, "rb", buffering=0) as f:
        f.read(512)


@contextmanager
def _child(argv: list[str], log):
    """A process of ours for the body, stopped (SIGTERM, then SIGKILL) and waited for after it."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=FUSE_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _unmount_fuse(point: Path, fuse: subprocess.Popen, entry: Path) -> None:
    """Unmount nbdfuse's file and let nbdfuse exit by itself (it must not be killed while mounted); then its
    record in active goes."""
    if mount_facts(point):
        unmount(point)
    entry.unlink(missing_ok=True)
    with contextlib.suppress(subprocess.TimeoutExpired):  # else _child stops it
        fuse.wait(timeout=FUSE_WAIT_S)


def _wait_for(ready, proc: subprocess.Popen, what: str, log: Path) -> None:
    """Return once ready() holds; raise with the log when proc exits first or FUSE_WAIT_S pass."""
    deadline = time.monotonic() + FUSE_WAIT_S
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"device class latency: {what}: {log.read_text().strip() or f'exit {proc.returncode}'}")
        time.sleep(0.05)


def applied_holds(settings: Path) -> dict:
    """The holds (DELAYS keys -> ms) the delay server reports it applies; {} before it has read any."""
    try:
        got = json.loads(Path(f"{settings}.applied").read_text())
    except (OSError, ValueError):
        return {}
    names = {name: key for key, name in DELAYS.items()}
    return {names[name]: round(seconds * 1000, 6) for name, seconds in got.items() if name in names}


def served_delays(nbdkit_pid: int | None, settings: Path, record: dict) -> dict:
    """The latency (DELAYS keys -> ms) the delay server delivers: the hold it applies, as it reports it,
    plus the path's own time the calibration measured (declared minus hold); {} when nbdkit is not running
    (pid given) or reports no holds."""
    if nbdkit_pid is not None and not Path(f"/proc/{nbdkit_pid}").exists():
        return {}
    holds = _only(applied_holds(settings), record["declared"])
    wanted = record.get("hold_ms", {})
    return {key: record["declared"][key] if holds[key] == wanted.get(key) else holds[key] for key in holds}


def _only(holds: dict, keys) -> dict:
    return {key: holds[key] for key in keys if key in holds}


@contextmanager
def throttled(dev: str, device_class: dict, active: Path):
    """Cap every IO to the loop device dev at the device class's limits while the body runs; yields the
    record of it: declared (the class), delivered (the rules as the kernel reports them once set) and
    delivered_at_end (read again before they are removed).

    The rule goes in the blkio root cgroup, where v1 charges the kernel's writeback and journal IO, and
    the job moves there for the while if it was elsewhere (v1 throttles each cgroup on its own budget, so
    the server and client must share the one the flusher uses). Removed on exit, and after a kill
    through the record in active (release: before the loop device is detached)."""
    h = blkio.hierarchy()
    if h is None:
        raise RuntimeError("device class: no cgroup v1 blkio hierarchy is mounted (see /proc/self/mountinfo)")
    number = major_minor(dev)
    caps = {key: int(device_class[key]) for key in blkio.LIMITS if key in device_class}
    entry = register(active, {"throttle": number, "blkio": str(h.mount), "device": dev, "image": _backing(dev)})
    home = h.home()
    facts = {"name": device_class["name"], "device": number, "block": Path(dev).name, "declared": caps,
             "blkio_cgroup": "/" + str(home.relative_to(h.mount)).removeprefix(".")}
    try:
        if home != h.mount:
            cgroup.move(os.getpid(), h.mount)
        blkio.set_rules(h.mount, number, caps)
        blkio.classes[number] = caps
        facts["delivered"] = blkio.rules(h.mount, number)
        yield facts
    finally:
        facts["delivered_at_end"] = blkio.rules(h.mount, number)
        blkio.classes.pop(number, None)
        blkio.set_rules(h.mount, number, {})
        if home != h.mount:
            cgroup.move(os.getpid(), home)
        left = blkio.rules(h.mount, number)
        if left:
            raise RuntimeError(f"device class: the blkio rules on {dev} ({number}) stayed after removal: {left}")
        entry.unlink(missing_ok=True)


def _uncapped(dev: str, device_class: dict) -> dict:
    """The record of a class without IOPS or bandwidth caps (a latency only): no throttle rule to set."""
    return {"name": device_class["name"], "device": major_minor(dev), "block": Path(dev).name, "declared": {}}


@contextmanager
def awaited(dev: str, record: dict):
    """Record in record["await_ms"] the loop device's mean time per read and per write while the body ran
    (/sys/block/<dev>/stat: the ms its IOs spent, over how many completed): what the class's latency
    came to, with the path's own time and any queueing behind other IOs added."""
    before = _io_stat(dev)
    try:
        yield
    finally:
        after = _io_stat(dev)
        record["await_ms"] = {
            key: round((after[ticks] - before[ticks]) / done, 3) if (done := after[ios] - before[ios]) else None
            for key, ios, ticks in (("read", 0, 3), ("write", 4, 7))}


def _io_stat(dev: str) -> list[int]:
    return [int(value) for value in Path(f"/sys/block/{Path(dev).name}/stat").read_text().split()]


def _unthrottle(record: dict) -> list[str]:
    """Remove a killed run's cap from its loop device, unless another image is attached there now (whose
    user cleared it when attaching, and may have set its own)."""
    if _backing(record["device"]) not in (None, record["image"]):
        return []
    folder = Path(record["blkio"])
    try:
        if not blkio.rules(folder, record["throttle"]):
            return []
        blkio.set_rules(folder, record["throttle"], {})
    except OSError:  # the device is gone (a loop device removed): so is its rule
        return []
    return [f"blkio throttle on {record['device']} ({record['throttle']})"]


def detach(dev: str, tries: int = 200) -> None:
    """Detach dev and wait until the kernel has let it go (losetup -d of a busy device only marks it
    for autoclear and succeeds; udev's probe of a device that just changed holds it open a moment; a copy
    of its mount in another mount namespace, until that namespace ends: up to a minute here, once, in a
    CI run with another test's namespaces beside it).
    Only while it still holds the image it held when called: once let go, another process may attach
    its own image to the same device, and a second `losetup -d` would take that one away."""
    image = _backing(dev)
    for _ in range(tries):
        if image is None or _backing(dev) != image:
            return
        subprocess.run(["losetup", "-d", dev], capture_output=True)
        if _backing(dev) != image:
            return
        time.sleep(0.3)
    copies = mounted_in(dev)
    raise RuntimeError(f"could not detach {dev}: still backed by {image}; "
                       f"held open by {', '.join(holders(dev)) or 'no process'}"
                       + (f"; mounted in the mount namespace of {', '.join(copies)}" if copies else ""))


def _backing(dev: str) -> str | None:
    """The path of the file dev is attached to (as it was when attached), or None when it is free."""
    try:
        return Path(f"/sys/block/{Path(dev).name}/loop/backing_file").read_text().strip().removesuffix(" (deleted)")
    except OSError:
        return None


def holders(dev: str) -> list[str]:
    """`pid name` of every process with dev open."""
    found = []
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) == dev for fd in fd_dir.iterdir()):
                found.append(f"{fd_dir.parent.name} {(fd_dir.parent / 'comm').read_text().strip()}")
        except OSError:
            continue
    return found


def mounted_in(dev: str) -> list[str]:
    """`pid name` of one process of each other mount namespace where dev is still mounted (a copy of the
    host's mounts that its unmount did not reach)."""
    try:
        number = major_minor(dev)
    except OSError:
        return []
    found, seen = [], {os.readlink("/proc/self/ns/mnt")}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            ns = os.readlink(proc / "ns" / "mnt")
            if ns in seen:
                continue
            seen.add(ns)
            if any(line.split()[2] == number for line in (proc / "mountinfo").read_text().splitlines()):
                found.append(f"{proc.name} {(proc / 'comm').read_text().strip()}")
        except (OSError, IndexError):
            continue
    return found


@contextmanager
def mounted(source: str, target: Path, fstype: str, options: list[str], active: Path):
    target.mkdir(parents=True, exist_ok=True)
    argv = ["mount", "-t", fstype] + (["-o", ",".join(options)] if options else []) + [source, str(target)]
    sh(argv)
    entry = register(active, {"mount": str(target.resolve())})
    try:
        yield argv
    finally:
        unmount(target)
        entry.unlink(missing_ok=True)


def unmount(target: Path, tries: int = 20) -> None:
    """Unmount for real (never lazily: a lazy unmount leaves the device busy and attached); raise when it
    stays busy, naming what uses it."""
    for _ in range(tries):
        done = subprocess.run(["umount", str(target)], capture_output=True, text=True)
        if done.returncode == 0 or not mount_facts(target):
            return
        time.sleep(0.5)
    users = subprocess.run(["fuser", "-vm", str(target)], capture_output=True, text=True)
    raise RuntimeError(f"umount {target}: {done.stderr.strip()}; in use by: "
                       f"{(users.stdout + users.stderr).strip() or 'nothing a process holds'}")


def mkfs(fstype: str, device: str, options: list[str]) -> list[str]:
    argv = [f"mkfs.{fstype}", _FORCE[fstype], *options, device]
    sh(argv)
    return argv


def sparse_file(path: Path, size: str) -> None:
    """An empty sparse image, mode 0600 before anything is written into it: a prepared datadir holds the
    benchmark's credentials, which another local user could otherwise read from the raw image."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    os.chmod(path, 0o600)
    sh(["truncate", "--size", size, str(path)])


@contextmanager
def filesystem(spec: dict, scratch: Path, active: Path, image: Path | None = None):
    """A mounted filesystem of `spec` under scratch, restored from `image` when given.

    Unmounted, detached and removed on exit, whatever happened in the body.
    """
    kind = spec["type"]
    scratch.mkdir(parents=True, exist_ok=True)
    mnt = scratch / "mnt"
    with ExitStack() as stack:
        if kind == "dir":
            path = Path(spec["path"]) / f"dbsweep-{uuid.uuid4().hex[:8]}"
            path.mkdir()
            stack.callback(shutil.rmtree, path, True)
            facts = {"type": "dir", "path": spec["path"]} | mount_facts_for(path)
            source = facts.get("source", "")
            if source.startswith("/dev/") and (Path("/sys/class/block") / Path(source).name).exists():
                facts["queue"] = block_queue(source)
            yield Mounted(path, [Path(source).name] if source.startswith("/dev/") else [], facts)
            return
        if kind == "tmpfs":
            argv = stack.enter_context(mounted("tmpfs", mnt, "tmpfs", [f"size={spec['size']}", *spec["mount_options"]],
                                               active))
            yield Mounted(mnt, [], {"type": "tmpfs"} | mount_facts(mnt), [argv])
            return
        commands, delay = [], None
        if spec.get("device"):
            dev = spec["device"]
            commands.append(mkfs(kind, dev, spec["mkfs_options"]))
            facts = {"device": dev}
        else:
            img = scratch / "fs.img"
            if image is not None:
                copy_image(image, img)
            else:
                sparse_file(img, spec["size"])
            stack.callback(img.unlink, missing_ok=True)
            latency = {key: value for key, value in (spec.get("device_class") or {}).items() if key in DELAYS}
            delay = stack.enter_context(delayed(img, latency, scratch, active)) if latency else None
            dev = stack.enter_context(loop_device(delay.file if delay else img, active))
            if delay is not None:
                calibrate(dev, delay)
                stack.enter_context(awaited(dev, delay.record))
            if image is None:
                commands.append(mkfs(kind, dev, spec["mkfs_options"]))
            facts = {"loop": dev, "loop_direct_io": _loop_dio(dev), "image_size": spec["size"],
                     "restored_from": str(image) if image else None}
        commands.append(stack.enter_context(mounted(dev, mnt, kind, spec["mount_options"], active)))
        facts |= {"type": kind, "mkfs_options": spec["mkfs_options"], "queue": block_queue(dev),
                  "superblock": superblock(kind, dev, mnt)} | mount_facts(mnt)
        if spec.get("device_class"):
            facts["device_class"] = stack.enter_context(throttled(dev, spec["device_class"], active)) \
                if any(key in spec["device_class"] for key in blkio.LIMITS) else _uncapped(dev, spec["device_class"])
            if delay is not None:
                facts["device_class"]["latency"] = delay.record
        yield Mounted(mnt, [Path(dev).name], facts, commands)


def copy_image(src: Path, dst: Path) -> None:
    """Copy a sparse image extent by extent: its holes stay holes, and every written block stays
    written, zeros included. (cp --sparse turns zero-filled blocks, such as sysbench's prepared
    files, into holes, and reads of a hole never reach the device.)"""
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # private, like the image it copies
    os.fchmod(fd, 0o600)
    with open(src, "rb") as fi, open(fd, "wb") as fo:
        size = os.fstat(fi.fileno()).st_size
        fo.truncate(size)
        pos = 0
        while pos < size:
            try:
                start = os.lseek(fi.fileno(), pos, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:  # no data after pos
                    break
                raise
            end = os.lseek(fi.fileno(), start, os.SEEK_HOLE)
            while start < end:
                copied = os.copy_file_range(fi.fileno(), fo.fileno(), end - start, start, start)
                if copied == 0:
                    raise RuntimeError(f"copying {src}: no progress at byte {start}")
                start += copied
            pos = end


def mount_facts_for(path: Path) -> dict:
    out = sh(["findmnt", "-nvo", "SOURCE,FSTYPE,OPTIONS", "--target", str(path)]).stdout.split()
    return dict(zip(("source", "fstype", "mount_options"), out, strict=False))  # findmnt may print fewer


def block_queue(device: str) -> dict:
    """How the kernel queues IO to a block device (a name like loop3, vda, nvme0n1p2; a partition's come
    from its disk): the IO scheduler it selected, read-ahead (KB), rotational, request queue depth."""
    node = Path("/sys/class/block") / Path(device).name
    queue = node / "queue" if (node / "queue").exists() else node.resolve().parent / "queue"
    text = {name: manifest.text_or_none(queue / name)
            for name in ("scheduler", "read_ahead_kb", "rotational", "nr_requests")}
    scheduler = text["scheduler"]
    if scheduler and "[" in scheduler:  # "mq-deadline [none]": the one in brackets
        scheduler = scheduler.split("[", 1)[1].split("]", 1)[0]
    return {"scheduler": scheduler} | {name: int(value) for name in ("read_ahead_kb", "rotational", "nr_requests")
                                       if (value := text[name]) is not None and value.isdigit()}


def superblock(kind: str, device: str, mountpoint: Path) -> dict:
    """What the filesystem's superblock records of its mkfs options (delivered.mkfs compares them): block and
    inode size in bytes and each feature as "feature <name>": "on" (ext4: tune2fs -l's features, every one it
    lists; xfs: xfs_info's crc, reflink, finobt, rmapbt, sparse, bigtime); {} for other filesystems or a
    reading that failed (then each mkfs option is "not read")."""
    argv = {"ext4": ["tune2fs", "-l", device], "ext3": ["tune2fs", "-l", device], "ext2": ["tune2fs", "-l", device],
            "xfs": ["xfs_info", str(mountpoint)]}.get(kind)
    if argv is None:
        return {}
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        return {}
    out: dict[str, str] = {}
    if kind == "xfs":
        data = re.search(r"^data\s+=\s+bsize=(\d+)", done.stdout, re.M)
        inode = re.search(r"\bisize=(\d+)", done.stdout)
        out |= {"block_size": data[1]} if data else {}
        out |= {"inode_size": inode[1]} if inode else {}
        for name, value in re.findall(r"\b(crc|reflink|finobt|rmapbt|sparse|bigtime)=(\d)", done.stdout):
            out[f"feature {name}"] = "on" if value == "1" else "off"
        return out
    fields = dict(line.split(":", 1) for line in done.stdout.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    for name, key in (("block_size", "Block size"), ("inode_size", "Inode size")):
        if key in fields:
            out[name] = fields[key]
    for feature in fields.get("Filesystem features", "").split():
        out[f"feature {feature}"] = "on"
    return out


def _loop_dio(dev: str) -> bool:
    flag = Path(f"/sys/block/{Path(dev).name}/loop/dio")
    return flag.exists() and flag.read_text().strip() == "1"


def prepare_image(spec: dict, image: Path, fill, active: Path) -> list[list[str]]:
    """Make `image`: a sparse file, mkfs, mount, fill(mountpoint) -> commands, unmount.
    The image appears, by rename, only when complete."""
    tmp = image.with_name(f".{image.name}.{os.getpid()}.tmp")
    scratch = image.with_name(f".{image.name}.{os.getpid()}.mnt")
    done = []
    with scratch_files(tmp, active), scratch_files(scratch, active):
        sparse_file(tmp, spec["size"])
        with loop_device(tmp, active) as dev:
            done.append(mkfs(spec["type"], dev, spec["mkfs_options"]))
            with mounted(dev, scratch, spec["type"], spec["mount_options"], active) as argv:
                done.append(argv)
                done += fill(scratch)
        os.replace(tmp, image)
    return done


def sweep_stale(active: Path) -> list[str]:
    """Release what runs on this host that died without cleaning up left behind; returns what was released.
    Their processes must be gone first (runtime.cgroup.sweep), or a mount stays busy."""
    return _release(active, lambda pid: not _alive(pid))


def release(active: Path, pid: int) -> list[str]:
    """Release what process pid recorded in active and could not release itself (e.g. a mount that was
    busy until the repetition's processes were killed)."""
    return _release(active, lambda owner: owner == pid)


def _release(active: Path, chosen) -> list[str]:
    released = []
    if not active.is_dir():
        return released
    host = socket.gethostname()
    stale = []
    for entry in sorted(active.glob("*.json")):
        try:
            record = json.loads(entry.read_text())
        except (OSError, ValueError):
            continue
        if record.get("host") == host and chosen(record.get("pid", 0)):
            stale.append((entry, record))
    # A device class's cap first (while its loop device still holds the image), mounts, then loop devices
    # (detached only once nothing is mounted from them), then a class's FUSE file they were attached to, then
    # files.
    order = ("throttle", "mount", "loop", "fuse")
    for entry, record in sorted(stale, key=lambda e: next((i for i, kind in enumerate(order) if kind in e[1]),
                                                          len(order))):
        if "throttle" in record:
            released += _unthrottle(record)
        if "mount" in record and mount_facts(Path(record["mount"])):
            unmount(Path(record["mount"]))
            released.append(record["mount"])
        if "loop" in record and _backing(record["loop"]) == record["image"]:
            detach(record["loop"])
            released.append(record["loop"])
        if "fuse" in record and mount_facts(Path(record["fuse"])):
            unmount(Path(record["fuse"]))  # nbdfuse, if the kill left it, exits, and its nbdkit with it
            released.append(f"nbdfuse {record['fuse']}")
        if "netns" in record:
            released += [f"netns {name}" for name in delete_netns(record["netns"])]
        if "iptables" in record:  # a placed host's link delay (topology.network.host_delays)
            released += [f"iptables {' '.join(rule)}" for rule in delete_rules(record["iptables"])]
        if "sysfs" in record:  # a host setting noise.host_settings changed (THP, a CPU's governor)
            try:
                Path(record["sysfs"]).write_text(record["value"] + "\n")
                released.append(f"{record['sysfs']} = {record['value']}")
            except OSError:
                pass
        if "remove" in record and Path(record["remove"]).exists():
            _remove(Path(record["remove"]))
            released.append(record["remove"])
        entry.unlink(missing_ok=True)
    return released


def delete_netns(names: list[str]) -> list[str]:
    """Delete those of the named network namespaces (topology.network's) that exist, and with them their
    veths and rules; return the ones deleted."""
    deleted = []
    for name in names:
        if (NETNS_DIR / name).exists():
            sh(["ip", "netns", "delete", name])
            deleted.append(name)
    return deleted


def delete_rules(rules: list[list[str]]) -> list[list[str]]:
    """Delete every copy of each iptables rule (`CHAIN MATCH... -j TARGET...`) from this network namespace's
    filter table; return the rules that were there."""
    deleted = []
    for rule in rules:
        while subprocess.run(["iptables", "-w", "-C", *rule], capture_output=True).returncode == 0:
            sh(["iptables", "-w", "-D", *rule])
            if rule not in deleted:
                deleted.append(rule)
    return deleted


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def drop_caches() -> None:
    """Sync and drop the OS page cache, dentries and inodes: a cold start, or a window that must not read
    what the restore, the load or the warm-up left cached (noise_control.drop_caches)."""
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")
