"""The study's filesystems when it loads: the built-in ones, the study's own (filesystems:), dir:<path> on the
axis; each checked (a device to format, a directory), tried with its own options (fsprobe), and each cell's
dataset fitted into the space it leaves."""
from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path

from dbsweep import fsprobe, storage, workloads
from dbsweep.concern import Concern, Draft, Repetition
from dbsweep.errors import ConfigError, shown
from dbsweep.matrix import Cell
from dbsweep.storage import LOOP_TYPES, device_in_use
from dbsweep.units import check_size

AXIS = "filesystem"
SECTION = "filesystems"
# Filesystems a study may name without defining them.
BUILTIN_FILESYSTEMS = {
    "ext4": {"type": "ext4", "mkfs_options": ["-E", "lazy_itable_init=0,lazy_journal_init=0"]},
    "xfs": {"type": "xfs"},
    "btrfs": {"type": "btrfs"},
    "tmpfs": {"type": "tmpfs"},
}
FS_DEFAULTS = {"size": "2G", "mkfs_options": [], "mount_options": [], "allow_format": False}


def defined(config: dict) -> dict[str, dict]:
    """The filesystems a cell may name: the built-in ones and the study's own, defaults filled in."""
    out = {}
    for name, spec in BUILTIN_FILESYSTEMS.items():
        out[name] = FS_DEFAULTS | spec
    for name, spec in config.get(SECTION, {}).items():
        base = BUILTIN_FILESYSTEMS.get(spec["type"], {}) if name == spec["type"] else {}
        out[name] = FS_DEFAULTS | base | spec
        check_size(out[name]["size"], f"filesystems.{name}.size")
        if spec["type"] == "dir" and "path" not in spec:
            raise ConfigError(f"filesystems.{name}.path: missing (type dir needs a directory)")
    return out


def used(draft: Draft, cells: list[Cell]) -> dict[str, dict]:
    """The filesystems the cells use, by the axis's value (dir:<path> as a dir filesystem)."""
    out = {}
    for cell in cells:
        fs = str(cell[AXIS])
        out[fs] = FS_DEFAULTS | {"type": "dir", "path": fs[4:]} if fs.startswith("dir:") else draft.filesystems[fs]
    return out


def _defined_value(draft: Draft, value, where: str) -> None:
    if not str(value).startswith("dir:") and str(value) not in draft.filesystems:
        raise ConfigError(f"{where}: {shown(value)} is not defined (define it under filesystems:, or use "
                          f"{', '.join(BUILTIN_FILESYSTEMS)} or dir:<path>)")


def _where(name: str) -> str:
    return f"filesystems.{name}" if not name.startswith("dir:") else "axes.filesystem"


def check_used(draft: Draft, cells: list[Cell]) -> list[str]:
    """Each used filesystem as the host has it: a dir an existing absolute directory, a device a block device
    that may be formatted and is not mounted. No warnings: what is wrong is refused."""
    for name, fs in used(draft, cells).items():
        _check_filesystem(name, fs)
    return []


def _check_filesystem(name: str, fs: dict) -> None:
    where = _where(name)
    if fs["type"] == "dir":
        path = Path(fs["path"])
        if not path.is_absolute() or not path.is_dir():
            raise ConfigError(f"{where}: {fs['path']!r} is not an existing absolute directory")
    device = fs.get("device")
    if device is None:
        return
    if fs["type"] not in LOOP_TYPES:
        raise ConfigError(f"{where}.device: {device!r} needs type ext4, xfs or btrfs, not {fs['type']}")
    if fs.get("allow_format") is not True:
        raise ConfigError(f"{where}.allow_format: {fs.get('allow_format')!r} must be true to format {device}")
    try:
        is_block = stat.S_ISBLK(os.stat(device).st_mode)
    except FileNotFoundError:
        is_block = False
    if not is_block:
        raise ConfigError(f"{where}.device: {device!r} is not a block device")
    if device_in_use(device):
        raise ConfigError(f"{where}.device: {device!r} is mounted; refusing to format it")


def check_fit(study) -> None:
    """Each filesystem is tried with its own options (fsprobe), and each cell's dataset must fit the space
    it leaves: refused naming both sizes, rather than a disk full inside the job."""
    names = dict.fromkeys(str(cell[AXIS]) for cell in study.cells)  # probed in the order the cells use them
    usable = {name: fsprobe.usable_bytes(study.filesystems[name], _where(name)) for name in names}
    for cell in study.cells:
        values = cell.as_dict()
        room = usable[str(values[AXIS])]
        if room is None:
            continue
        recipe = study.recipe(cell)
        need = workloads.dataset_bytes(recipe.tool, recipe.dataset)
        if need is not None and need > room:
            fs = recipe.filesystem
            raise ConfigError(f"workloads.{values['workload']}: dataset {recipe.dataset} ({_gib(need)}) does not "
                              f"fit filesystem {values[AXIS]} ({fs['type']}, size {fs.get('size')}: "
                              f"{_gib(room)} free)")


def _gib(size: int) -> str:
    return f"{size / 2**30:.2f}G" if size >= 2**30 else f"{size / 2**20:.0f}M"


def check(draft: Draft) -> None:
    """The filesystems a cell may name (draft.filesystems), each checked as declared."""
    draft.filesystems = defined(draft.config)


@contextmanager
def _mounted(repetition: Repetition):
    """The cell's filesystem (storage.filesystem: its image restored, or made empty), its facts and the commands
    that made it into run.json."""
    recipe, record = repetition.recipe, repetition.record
    with storage.filesystem(recipe.filesystem, repetition.scratch, repetition.active, repetition.image) as fs:
        record["filesystem"] = fs.facts
        record["commands"] += fs.commands
        yield fs


def resources(repetition: Repetition) -> list:
    """The repetition's filesystem, the first of its stack after the host's settings."""
    return [("filesystem", repetition.recipe.filesystem["type"], _mounted(repetition))]


CONCERN = Concern(name="filesystems", sections=(SECTION,), check=check, values={AXIS: _defined_value},
                  warnings=check_used, check_study=check_fit, resources=resources,
                  study=lambda draft, cells: {"filesystems": draft.filesystems | used(draft, cells)})
