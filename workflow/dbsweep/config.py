"""Load a study config: schema validation, then the checks a schema cannot express.

Every error is a ConfigError with one line naming the key and the value, raised
before any job exists.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import string
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import yaml

from dbsweep import workloads
from dbsweep.errors import ConfigError
from dbsweep.matrix import Cell, axis_order, expand
from dbsweep.storage import LOOP_TYPES, device_in_use

SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"
SIZE = re.compile(r"^[1-9][0-9]*(\.[0-9]+)?[KMGT]$")

# Filesystems a study may name without defining them.
BUILTIN_FILESYSTEMS = {
    "ext4": {"type": "ext4", "mkfs_options": ["-E", "lazy_itable_init=0,lazy_journal_init=0"]},
    "xfs": {"type": "xfs"},
    "btrfs": {"type": "btrfs"},
    "tmpfs": {"type": "tmpfs"},
}
FS_DEFAULTS = {"size": "2G", "mkfs_options": [], "mount_options": [], "allow_format": False}


@dataclass(frozen=True)
class Study:
    name: str
    description: str
    repetitions: int
    axes: list[str]
    cells: list[Cell]
    filesystems: dict[str, dict]
    workloads: dict[str, dict]

    def recipe(self, cell: Cell) -> dict:
        """Everything that shapes one cell's measurement, and nothing else."""
        values = cell.as_dict()
        wl = self.workloads[values["workload"]]
        options = {k: _substitute(v, values) for k, v in wl["options"].items()}
        fs = self.filesystems[values["filesystem"]]
        module = workloads.module(wl["tool"])
        return {
            "tool": wl["tool"],
            "options": options,
            "threads": int(values.get("threads", 1)),
            "filesystem": fs,
            "dataset": module.dataset(options),
            "duration_s": workloads.duration(wl["tool"], options),
        }

    def image(self, cell: Cell) -> str | None:
        """The prepared image a cell restores from, or None when its files are prepared in the run."""
        spec = self.image_spec(cell)
        if spec is None:
            return None
        digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
        return f"resources/images/{cell['filesystem']}/{spec['tool']}-{digest}.img"

    def image_spec(self, cell: Cell) -> dict | None:
        """What shapes a cell's prepared image: the filesystem, the tool and its dataset options."""
        r = self.recipe(cell)
        fs = r["filesystem"]
        if fs["type"] not in LOOP_TYPES or fs.get("device"):
            return None
        return {"filesystem": fs, "tool": r["tool"], "dataset": r["dataset"]}


def read(path: str | os.PathLike) -> dict:
    with open(path) as f:
        return yaml.safe_load(f) or {}


def load(config: dict) -> Study:
    """Validate a config dict (as Snakemake or yaml.safe_load gives it) and build the study."""
    _validate_schema(config)
    axes = {name: list(values) for name, values in config["axes"].items()}
    axes.setdefault("filesystem", ["tmpfs"])
    axes.setdefault("threads", [1])
    filesystems = _filesystems(config.get("filesystems", {}))
    wls = config["workloads"]
    for name, wl in wls.items():
        workloads.module(wl["tool"]).check(wl["options"], f"workloads.{name}.options")

    cells = expand(axes, config.get("exclude", []), config.get("include", []))
    if not cells:
        raise ConfigError("exclude: every cell of the matrix is excluded")
    order = axis_order(axes)
    used_fs = {}
    for cell in cells:
        _check_cell(cell, filesystems, wls, order, used_fs)
    for name, fs in used_fs.items():
        _check_filesystem(name, fs)
    return Study(
        name=config["study"],
        description=config.get("description", ""),
        repetitions=config.get("repetitions", 1),
        axes=order,
        cells=cells,
        filesystems=filesystems | used_fs,
        workloads=wls,
    )


def _validate_schema(config: dict) -> None:
    with open(SCHEMA) as f:
        schema = yaml.safe_load(f)
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if error is None:
        return
    key = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in error.absolute_path).replace(".[", "[")
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        raise ConfigError(f"{key + '.' if key else ''}{extra[0]}: unknown key")
    if error.validator == "required":
        missing = error.message.split("'")[1]
        raise ConfigError(f"{key + '.' if key else ''}{missing}: missing")
    raise ConfigError(f"{key or '(top level)'}: {error.instance!r} {_reason(error)}")


def _reason(error) -> str:
    v = error.validator
    if v == "minimum":
        return f"is below the minimum of {error.validator_value}"
    if v == "enum":
        return f"is not one of {', '.join(map(str, error.validator_value))}"
    if v == "type":
        return f"is not of type {error.validator_value}"
    return error.message.replace(repr(error.instance), "").strip()


def _filesystems(user: dict) -> dict[str, dict]:
    out = {}
    for name, spec in BUILTIN_FILESYSTEMS.items():
        out[name] = FS_DEFAULTS | spec
    for name, spec in user.items():
        base = BUILTIN_FILESYSTEMS.get(spec["type"], {}) if name == spec["type"] else {}
        out[name] = FS_DEFAULTS | base | spec
        if not SIZE.match(out[name]["size"]):
            raise ConfigError(f"filesystems.{name}.size: {out[name]['size']!r} is not a size like 512M or 4G")
        if spec["type"] == "dir" and "path" not in spec:
            raise ConfigError(f"filesystems.{name}.path: missing (type dir needs a directory)")
    return out


def _check_cell(cell: Cell, filesystems: dict, wls: dict, order: list[str], used_fs: dict) -> None:
    values = cell.as_dict()
    fs = str(values["filesystem"])
    if fs.startswith("dir:"):
        used_fs[fs] = FS_DEFAULTS | {"type": "dir", "path": fs[4:]}
    elif fs in filesystems:
        used_fs[fs] = filesystems[fs]
    else:
        raise ConfigError(
            f"axes.filesystem: {fs!r} is not defined (define it under filesystems:, or use "
            f"{', '.join(BUILTIN_FILESYSTEMS)} or dir:<path>)")
    threads = values["threads"]
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ConfigError(f"threads: {threads!r} is not a positive integer")
    wl = values["workload"]
    if wl not in wls:
        raise ConfigError(f"axes.workload: {wl!r} is not defined under workloads: ({', '.join(wls)})")
    for key, value in wls[wl]["options"].items():
        for name in _placeholders(value):
            if name not in order:
                raise ConfigError(f"workloads.{wl}.options.{key}: {value!r} names {{{name}}}, which is not an axis")


def _check_filesystem(name: str, fs: dict) -> None:
    where = f"filesystems.{name}" if not name.startswith("dir:") else "axes.filesystem"
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


def _placeholders(value) -> list[str]:
    if not isinstance(value, str):
        return []
    return [field for _, field, _, _ in string.Formatter().parse(value) if field]


def _substitute(value, cell: dict):
    return value.format(**cell) if _placeholders(value) else value
