"""The study as it loaded (config.load): its cells and the recipe of each, the image a cell restores, its
server's programs, the order of its measuring jobs. Built once per workflow and read by planning and the
rules; what each concern adds to a recipe comes from the concern (Concern.recipe)."""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field

from dbsweep import calibration, canary, devices, engines, noise, placeholders, rounds, servers, units, versions, \
    workloads
from dbsweep.matrix import Cell
from dbsweep.recipe import Recipe
from dbsweep.storage import LOOP_TYPES


@dataclass(frozen=True)
class Study:
    name: str
    description: str
    repetitions: int
    interleave: bool  # repetition k of every cell before repetition k+1 of any
    axes: list[str]
    cells: list[Cell]
    filesystems: dict[str, dict]
    workloads: dict[str, dict]
    server: dict
    option_sets: dict[str, dict]
    baseline: dict
    analysis: dict  # trim_s, steady_state, stall_share, plots (ANALYSIS_DEFAULTS completed)
    versions: dict[str, dict]  # version name -> {"basedir": user's build} (empty for catalogue names)
    cluster: dict  # where measuring jobs go on Slurm: {"partition": …}
    not_applicable: list[tuple[str, str]]  # (cell path, why), reported, never run
    topologies: dict = field(default_factory=dict)  # topologies, network, networks, proxies as declared
    headline: list[str] = field(default_factory=list)  # analysis.headline: the summary's first plots (page only)
    warnings: list[str] = field(default_factory=list)  # printed when the workflow starts (e.g. allowed oversize memory)
    noise_control: noise.NoiseControl | None = None  # what each repetition sets on the host; None: nothing
    canary_every: int | None = None  # noise_control.canary.every: repetitions between two canary runs
    repeat_until: dict | None = None  # {detectable_pct, max_repetitions}: more rounds while the noise needs them
    device_classes: dict = field(default_factory=dict)  # name -> caps (devices.py)
    # the concerns whose recipe parts a cell's recipe takes (concerns.CONCERNS: concern.py)
    concerns: tuple = field(default=(), repr=False, compare=False)
    _recipes: dict = field(default_factory=dict, repr=False, compare=False)  # cell -> recipe, see recipe()

    @functools.cached_property
    def axis_values(self) -> dict[str, list[str]]:
        """Each axis's values in the order the study declares them (the cells are expanded in that order),
        for tables and plots to read in: `network: [lan, near, far]` stays lan, near, far."""
        values: dict[str, list[str]] = {axis: [] for axis in self.axes}
        for cell in self.cells:
            for axis, value in cell.as_dict().items():
                if axis in values and str(value) not in values[axis]:
                    values[axis].append(str(value))
        return values

    def recipe(self, cell: Cell) -> Recipe:
        """Everything that shapes one cell's measurement, and nothing else. Built once per cell:
        planning asks for it several times per job (params, the image, the Slurm time limit, the
        estimate, the analysis targets)."""
        if cell not in self._recipes:
            self._recipes[cell] = self._recipe(cell)
        return self._recipes[cell]

    def _recipe(self, cell: Cell) -> Recipe:
        values = cell.as_dict()
        wl = self.workloads[values["workload"]]
        options = {k: placeholders.substitute(v, values) for k, v in wl["options"].items()}
        workload = workloads.get(wl["tool"])
        settings = {key: wl[key] for key in workload.settings if key in wl}
        common = {"tool": wl["tool"], "options": options, "threads": int(values.get("threads", 1)),
                  "filesystem": devices.on_cell(self.filesystems[values["filesystem"]], values, self.device_classes),
                  "dataset": workload.dataset(options, **settings), "duration_s": workload.duration(options)}
        parts = {key: value for part in self.concerns
                 for key, value in part.recipe(self, values, workload.database).items()}
        if not workload.database:
            return Recipe(**common, **parts)
        engine = values["engine"]
        family = engines.ENGINES[engine]
        server_options = dict(self.server.get("options", {}).get(family, {}))
        for axis, value in values.items():
            if axis in self.option_sets:
                server_options |= self.option_sets[axis][str(value)][family]
        memory = values.get("memory")
        overhead = self.server.get("cgroup_overhead")
        version = str(values.get("version", servers.DEBIAN))
        return Recipe(
            **common, **parts, engine=engine, version=version, basedir=self.basedir(family, version), memory=memory,
            server_options=server_options, warmup_s=wl.get("warmup", 0),
            cold_start=self.server.get("cold_start", False),
            memory_limit=units.parse_size(memory) + units.parse_size(overhead) if memory and overhead else None)

    def calibration(self, cell: Cell) -> tuple[str, Recipe] | None:
        """Where the host's calibration of a cell with `rate: N%` is, and its recipe (calibration.py); None
        for a cell with an absolute rate or none. On the host the cell names, else on this one."""
        r = self.recipe(cell)
        if not calibration.needed(r):
            return None
        run = calibration.of(r)
        return calibration.path(run, cell.get("host")), run

    def priority(self, rep: int, cell: Cell | None = None) -> int:
        """Snakemake's priority of a measuring job: with interleave, repetition 1 highest, so that
        among the runs ready to start (one at a time: they share the `measure` resource) every
        cell's repetition k comes before any repetition k+1. Preparing and fetching, which
        runs wait for, ask as repetition 0: before all runs. With a canary every run has a place of
        its own (position), even numbers, and the canaries the odd ones between (canary_priority), among
        every run the study may make (repeat_until's rounds too)."""
        if self.canary_every is None:
            return self.most_repetitions + 1 - rep if self.interleave else 0
        total = len(self.cells) * self.most_repetitions
        if rep == 0:
            return 2 * total + 2
        return 2 * (total - self.position(cell, rep))

    @property
    def most_repetitions(self) -> int:
        """Repetitions per cell at most: `repetitions`, or repeat_until's max_repetitions."""
        return rounds.most(self.repetitions, self.repeat_until)

    def position(self, cell: Cell, rep: int) -> int:
        """A run's place (from 0) in the order a canary study measures in: interleaved (repetition k of every
        cell before k+1 of any), or without interleave cell by cell."""
        i = self._cell_index[cell]
        return (rep - 1) * len(self.cells) + i if self.interleave else i * self.repetitions + rep - 1

    def canary_priority(self, j: int) -> int:
        """Canary run j comes after canary.after(j) runs of the study, (j - 1) x every but at most all: between
        the runs at positions after - 1 and after."""
        total = len(self.cells) * self.most_repetitions
        return 2 * (total - canary.after(j, self.canary_every, total)) + 1

    @functools.cached_property
    def _cell_index(self) -> dict[Cell, int]:
        return {cell: i for i, cell in enumerate(self.cells)}

    def basedir(self, family: str, version: str) -> str | None:
        """Where a version's server programs are: a user's build, a fetched one, or None for Debian's."""
        return versions.programs(self.versions, family, version)

    def fetched(self, cell: Cell) -> str | None:
        """The resources/servers/… folder a cell's version is fetched into, if it is fetched."""
        r = self.recipe(cell)
        if not r.database or r.version in self.versions or r.basedir is None:
            return None
        return r.basedir

    def image(self, cell: Cell) -> str | None:
        """The prepared image a cell restores from, or None when its files are prepared in the run."""
        spec = self.image_spec(cell)
        if spec is None:
            return None
        digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
        return f"resources/images/{cell['filesystem']}/{spec['tool']}-{digest}.img"

    def image_spec(self, cell: Cell) -> dict | None:
        """What shapes a cell's prepared image: the filesystem, the tool and its dataset options,
        and for a database the engine and the study-wide server options (some fix the on-disk format), with
        the cell's own values of the options that shape the dataset (engines.dataset_options: a charset
        axis makes an image per charset, loaded by a server running with it)."""
        r = self.recipe(cell)
        fs = devices.without_class(r.filesystem)
        if fs["type"] not in LOOP_TYPES or fs.get("device"):
            return None
        spec = {"filesystem": fs, "tool": r.tool, "dataset": r.dataset}
        if r.database:
            family = engines.ENGINES[r.engine]
            spec |= {"engine": r.engine, "version": r.version, "basedir": r.basedir,
                     "server_options": self.server.get("options", {}).get(family, {})
                     | engines.dataset_options(family, r.server_options),
                     "statistics": "analyzed after the load"}  # images made before that are made again
        return spec
