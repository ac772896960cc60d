"""Axes, include/exclude rules, cells and their paths."""
from __future__ import annotations

import functools
import itertools
import math
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from dbsweep.errors import ConfigError, shown

# Built-in axes in the fixed order they take in a cell path; user axes follow in config order.
BUILTIN_AXES = ("host", "engine", "version", "storage", "memory", "filesystem", "threads", "workload")
# Names a user axis cannot take: the columns every long table has beside the axes (workflow/R/read.R refuses
# an axis named like one of its SUMMARY, SAMPLES and SYSTEM columns), where a repetition ran, and the
# catalog's identity of a run (docs/catalog.md). `storage` is a built-in position no axis fills.
RESERVED_AXES = frozenset({
    "rep", "attempt", "cell", "study", "node", "kind", "per_second", "tool", "storage",
    "duration_s", "seconds", "iops", "read_iops", "write_iops", "mibs", "fsyncs", "lat_mean_ms", "lat_p95_ms",
    "lat_p99_ms", "lat_max_ms", "tps", "qps", "second", "time", "lat_ms", "lat_pct_ms", "name", "value",
    "us", "sy", "id", "wa", "bi", "bo", "cs", "device", "r_s", "w_s", "rkb_s", "wkb_s", "r_await", "w_await",
    "aqu_sz", "util"})
MAX_CELLS = 100_000  # cells of a study: planning 10,000 takes about 50 s (BENCHMARKS.md, planning)
MAX_RUNS = 100_000  # cells x repetitions: each is two or more jobs of Snakemake's DAG
MAX_SEGMENT = 255  # bytes of one folder name, `axis~value` (NAME_MAX of Linux filesystems)
# bytes of a cell path: results/runs/<cell>/rep~N/attempt~…/raw/<file> under any working directory stays
# far below PATH_MAX (4096)
MAX_CELL_PATH = 1024
# Snakemake takes a wildcard value that ends in one sequence repeated 20 times or more for an endless
# recursion of rules (PeriodicWildcardError, snakemake.io.PeriodicityDetector's min_repeat); a cell path ends
# in its last value.
PERIODIC = re.compile(r"(.+?)\1{19,}$")
_SAFE = ":+-.,=@_"


def segment(axis: str, value) -> str:
    """One folder of a cell path: `threads~4`, the value percent-encoded (parse_path reads it back)."""
    return f"{axis}~{quote(str(value), safe=_SAFE)}"


def check_value(axis: str, value, where: str) -> None:
    """A value that would make a folder name too long for the filesystem, or one Snakemake refuses."""
    folder = segment(axis, value)
    size = len(folder.encode())
    if size > MAX_SEGMENT:
        raise ConfigError(f"{where}: {shown(value)} makes a folder name of {size} bytes ({axis}~ and the value "
                          f"percent-encoded); at most {MAX_SEGMENT}: shorten the value")
    repeated = PERIODIC.search(folder)
    if repeated:
        times = len(repeated[0]) // len(repeated[1])
        raise ConfigError(f"{where}: {shown(value)} ends in {repeated[1]!r} repeated {times} times, which Snakemake "
                          "takes for an endless recursion of rules (PeriodicWildcardError); change the value")


def combinations(axes: dict, include: list[dict]) -> int:
    """How many cells expand() makes at most, from the sizes of the axes and include rules alone: the
    product of the axes plus each include rule's product (cells equal on their applicable axes are merged
    later, so a study may end with fewer)."""
    order = axis_order(axes)
    total = math.prod(len(axes[a]) for a in order)
    for rule in include:
        total += math.prod(len(rule[a]) if isinstance(rule.get(a), list) else 1 if a in rule else len(axes[a])
                           for a in order)
    return total


@dataclass(frozen=True)
class Cell:
    """One point of the matrix: axis name -> value, in axis order."""

    items: tuple[tuple[str, object], ...]

    def __getitem__(self, axis: str):
        return dict(self.items)[axis]

    def get(self, axis: str, default=None):
        return dict(self.items).get(axis, default)

    def as_dict(self) -> dict:
        return dict(self.items)

    @functools.cached_property
    def path(self) -> str:
        """`filesystem~ext4/threads~4/workload~randread`: readable, and parsed back by parse_path.
        Computed once per cell: planning asks for it several times per cell."""
        return "/".join(segment(axis, value) for axis, value in self.items)


def parse_path(path: str) -> dict[str, str]:
    """The axis values of a cell path, as strings."""
    out = {}
    for part in path.strip("/").split("/"):
        axis, sep, value = part.partition("~")
        if not sep:
            raise ValueError(f"not a cell path segment: {part!r}")
        out[axis] = unquote(value)
    return out


def axis_order(axes: dict) -> list[str]:
    builtin = [a for a in BUILTIN_AXES if a in axes]
    return builtin + [a for a in axes if a not in BUILTIN_AXES]


def _values(rule: dict, axis: str, where: str) -> list:
    value = rule[axis]
    values = value if isinstance(value, list) else [value]
    for v in values:
        if isinstance(v, (dict, list)):
            raise ConfigError(f"{where}.{axis}: {shown(v)} is not a single value")
    return values


def check_rule(rule: dict, order: list[str], where: str) -> None:
    """An include or exclude rule names only axes of the study."""
    for axis in rule:
        if axis not in order:
            raise ConfigError(f"{where}.{axis}: unknown axis (axes are {', '.join(order)})")


def _same(a, b) -> bool:
    return str(a) == str(b)


def _matches(cell: dict, rule: dict, where: str) -> bool:
    return all(any(_same(cell[a], v) for v in _values(rule, a, where)) for a in rule)


def expand(axes: dict, exclude: list[dict], include: list[dict], applicable=None) -> list[Cell]:
    """Cells of the cartesian product of `axes`, less `exclude`, plus `include`, in a stable order.

    `applicable(cell) -> list of axis names` keeps only the axes that mean something for that
    cell (a server's memory means nothing to a fio cell); cells equal on those are one cell.
    """
    order = axis_order(axes)
    for axis in order:
        seen = set()
        for value in axes[axis]:
            if str(value) in seen:
                raise ConfigError(f"axes.{axis}: {value!r} appears twice")
            seen.add(str(value))
    for i, rule in enumerate(exclude):
        check_rule(rule, order, f"exclude[{i}]")
    for i, rule in enumerate(include):
        check_rule(rule, order, f"include[{i}]")

    cells: dict[tuple, Cell] = {}

    def add(cell: dict) -> None:
        kept = applicable(cell) if applicable else order
        items = tuple((a, cell[a]) for a in order if a in kept)
        cells.setdefault(tuple((a, str(v)) for a, v in items), Cell(items))

    for combo in itertools.product(*(axes[a] for a in order)):
        cell = dict(zip(order, combo, strict=True))
        if not any(_matches(cell, rule, f"exclude[{i}]") for i, rule in enumerate(exclude)):
            add(cell)
    for i, rule in enumerate(include):
        where = f"include[{i}]"
        choices = [_values(rule, a, where) if a in rule else axes[a] for a in order]
        for combo in itertools.product(*choices):
            add(dict(zip(order, combo, strict=True)))
    return list(cells.values())
