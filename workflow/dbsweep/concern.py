"""The contract between the study's load (config.py) and each concern (topology, events, noise control,
repeat_until, versions, filesystems, the server's memory): a concern declares a Concern, and config.py
calls its parts in a fixed order, never asking which concern it is.

The load goes: names (sections), check(draft) before the matrix, each axis value (values: its own axes', in
the axes and in include rules), not_applicable(draft, cell) per cell of the matrix, check_cells(draft, cells)
on the cells that run, warnings(draft, cells) (which may refuse too), study(draft, cells) (what it adds to
the Study), then check_study(study) once every recipe is built; recipe(study, values, database) gives the
Recipe fields it shapes for a cell. Each refuses with one ConfigError line naming key and value.

At run time, resources(repetition) gives what the concern adds to a repetition's stack (runtime.resources): a
list of (kind, name, context manager); run.py enters those of every concern in the stack's order of kinds.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dbsweep import placeholders, workloads
from dbsweep.matrix import Cell


@dataclass
class Draft:
    """The study as the load has checked it so far: the config as given (files made absolute), the axes
    (values as names), the workloads as declared, the option sets, the server section; and what a concern's
    check found that others read: the filesystems defined, the user's builds of the version axis."""
    config: dict
    axes: dict[str, list]
    workloads: dict[str, dict]
    option_sets: dict[str, dict]
    server: dict
    filesystems: dict[str, dict] = field(default_factory=dict)  # by name, defaults filled (filesystems' check)
    builds: dict[str, dict] = field(default_factory=dict)  # the version axis's builds by name (versions' check)

    def workload(self, cell: Cell):
        """The cell's workload module (workloads.get), None for a workload the study does not define."""
        wl = self.workloads.get(cell["workload"])
        return None if wl is None else workloads.get(wl["tool"])

    def options(self, cell: Cell) -> dict:
        """The cell's workload options, each {axis} replaced by the cell's value."""
        values = cell.as_dict()
        return {k: placeholders.substitute(v, values) for k, v in self.workloads[cell["workload"]]["options"].items()}

    def database(self, cell: Cell) -> bool:
        """The cell runs a server: an engine, and a workload that needs one."""
        workload = self.workload(cell)
        return "engine" in cell.as_dict() and workload is not None and workload.database


@dataclass(frozen=True)
class Repetition:
    """What a concern's resources are made of in one attempt of a repetition: the cell's recipe, the attempt's
    scratch folder (image copies, mount points), the prepared image (None: filled in place), the run's
    registry of what it holds (runtime.active), the record that becomes run.json, and the run log."""
    recipe: object  # recipe.Recipe (not imported: recipe.py builds on the concerns)
    scratch: Path
    image: Path | None
    active: Path
    record: dict
    log: object


def _nothing(*_args) -> None:
    return None


@dataclass(frozen=True)
class Concern:
    """What one concern adds to the study's load; a part it does not have is a no-op."""

    name: str
    keys: tuple[str, ...] = ()  # its top-level keys the recipe reads, kept as declared (Study.topologies)
    sections: tuple[str, ...] = ()  # top-level keys whose entries' names become parts of paths (names.py)
    names: Callable[[dict], None] = _nothing  # its other names that become parts of paths (names.py)
    files: Callable[[dict, Callable], None] = _nothing  # files(config, absolute): its paths made absolute
    axes: tuple[str, ...] = ()  # its axes that mean something to database cells only (server axes)
    check: Callable[[Draft], None] = _nothing  # before the matrix: what the schema cannot say
    values: dict[str, Callable] = field(default_factory=dict)  # axis -> check(draft, value, where)
    not_applicable: Callable[[Draft, Cell], str | None] = _nothing  # why a cell cannot run, or None
    check_cells: Callable[[Draft, list[Cell]], None] = _nothing  # the cells that run, together
    warnings: Callable[[Draft, list[Cell]], list[str]] = lambda draft, cells: []
    study: Callable[[Draft, list[Cell]], dict] = lambda draft, cells: {}  # the Study's fields it gives
    check_study: Callable = _nothing  # the Study with its recipes built
    recipe: Callable = lambda study, values, database: {}  # its Recipe fields for a cell's values
    resources: Callable[[Repetition], list] = lambda repetition: []  # [(kind, name, context manager)] to enter
