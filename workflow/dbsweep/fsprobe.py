"""A trial of each filesystem a study uses, when the study loads.

mkfs and mount with the study's own mkfs_options and mount_options, on a sparse
image of its size (tmpfs: a mount of its size), so that options the tools or the
kernel refuse stop the study before any job, naming the key and the value; and
the space the filesystem leaves for a dataset is known. A trial costs a few
tenths of a second (BENCHMARKS.md); its result is cached by spec and kernel, so
planning the same study again costs nothing.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from dbsweep import storage
from dbsweep.errors import ConfigError

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dbsweep" / "filesystems.json"
TRIAL_DIR = "/var/tmp"  # a disk folder: a loop device with direct IO needs one (tmpfs has no O_DIRECT)


def usable_bytes(spec: dict, where: str) -> int | None:
    """Bytes a dataset can take on a filesystem of spec, after a trial mkfs and mount; None when it cannot be
    tried (a real device is never formatted at load; without root nothing is mounted)."""
    if spec["type"] == "dir":
        st = os.statvfs(spec["path"])
        return st.f_bavail * st.f_frsize
    if spec.get("device") or os.geteuid() != 0:
        return None
    key = hashlib.sha256(json.dumps([spec["type"], spec["size"], spec["mkfs_options"], spec["mount_options"],
                                     os.uname().release], sort_keys=True).encode()).hexdigest()[:16]
    cache = _read_cache()
    if key not in cache:
        try:
            cache[key] = _trial(spec, where)
        except (RuntimeError, OSError) as error:  # no free loop device, /var/tmp full …: the job will tell
            print(f"dbsweep: warning: {where}: not tried at load ({str(error).splitlines()[0]})", file=sys.stderr)
            return None
        _write_cache(cache)
    return cache[key]


def _trial(spec: dict, where: str) -> int:
    kind = spec["type"]
    with tempfile.TemporaryDirectory(prefix="dbsweep-fstrial-", dir=TRIAL_DIR) as tmp:
        tmp = Path(tmp)
        active, mnt = tmp / "active", tmp / "mnt"
        if kind == "tmpfs":
            with _refused(f"{where}.mount_options", spec["mount_options"]):
                with storage.mounted("tmpfs", mnt, "tmpfs", [f"size={spec['size']}", *spec["mount_options"]], active):
                    return _free(mnt)
        image = tmp / "fs.img"
        storage.sparse_file(image, spec["size"])
        with storage.loop_device(image, active) as dev:
            with _refused(f"{where}.mkfs_options", spec["mkfs_options"]):
                storage.mkfs(kind, dev, spec["mkfs_options"])
            with _refused(f"{where}.mount_options", spec["mount_options"]):
                with storage.mounted(dev, mnt, kind, spec["mount_options"], active):
                    return _free(mnt)


class _refused:
    """Turn a failed mkfs or mount into a ConfigError naming the key, its value and the tool's first line."""

    def __init__(self, key: str, value):
        self.key, self.value = key, value

    def __enter__(self):
        return self

    def __exit__(self, kind, error, _tb):
        if kind is RuntimeError:
            raise ConfigError(f"{self.key}: {self.value!r} refused: {_reason(str(error))}") from None
        return False


def _reason(error: str) -> str:
    """The tool's own line from storage.sh's message ("argv failed (code): output"): its first line that is
    not a version banner, without mount's "mount: <target>: " prefix."""
    output = error.split("): ", 1)[-1]
    for line in output.splitlines():
        line = line.strip()
        if line and not re.match(r"^\S+ \d+(\.\d+)+ \(.*\)$", line):
            return re.sub(r"^mount: [^:]+: ", "", line)
    return output.strip() or error


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bfree * st.f_frsize  # root's view (fio and sysbench fileio, whose sizes are checked, run as root)


def _read_cache() -> dict:
    try:
        return json.loads(CACHE.read_text())
    except (OSError, ValueError):
        return {}


def _write_cache(cache: dict) -> None:
    try:
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        tmp = CACHE.with_name(f".{CACHE.name}.{os.getpid()}")
        tmp.write_text(json.dumps(cache))
        os.replace(tmp, CACHE)
    except OSError:
        pass  # a cache that cannot be written only costs the next load another trial
