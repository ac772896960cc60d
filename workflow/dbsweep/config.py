"""Load a study config: schema validation, then the checks a schema cannot express.

Every error is a ConfigError with one line naming the key and the value, raised
before any job exists.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import yaml

from dbsweep import calibration, canary, config_tree, devices, engines, events, fsprobe, matrix, noise, servers, \
    units, workloads
from dbsweep.configfile import load_yaml
from dbsweep.errors import ConfigError, shown
from dbsweep.matrix import Cell, axis_order, expand
from dbsweep.names import check_name
from dbsweep.recipe import Recipe
from dbsweep.storage import LOOP_TYPES, device_in_use
from dbsweep.topology import settings as topology

SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"
SIZE = re.compile(r"^[1-9][0-9]*[KMGT]$")  # what units.parse_size, truncate and tmpfs all take: no decimals
MAX_SIZE = 2**50  # 1P: the largest filesystem or memory size a study may ask for
MIN_MEMORY = 8 * 2**20  # a server's memory: MariaDB raises an InnoDB buffer pool below 2M to 2M
# An option's {axis}: the axis's value in its place; nothing else may stand in braces
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")

# Filesystems a study may name without defining them.
BUILTIN_FILESYSTEMS = {
    "ext4": {"type": "ext4", "mkfs_options": ["-E", "lazy_itable_init=0,lazy_journal_init=0"]},
    "xfs": {"type": "xfs"},
    "btrfs": {"type": "btrfs"},
    "tmpfs": {"type": "tmpfs"},
}
FS_DEFAULTS = {"size": "2G", "mkfs_options": [], "mount_options": [], "allow_format": False}
# Plots of rule figures (workflow/R/statistics_plots.R), all by default.
PLOT_KINDS = ["timeseries_steady", "violin", "ci_vs_threads", "ratio_heatmap", "latency_percentiles"]
# Workload keys beside tool, options and warmup; a workload declares which it takes (Workload.settings).
SETTINGS = ("dataset_options", "prepare_threads")
ANALYSIS_DEFAULTS = {"trim_s": 0, "steady_state": True, "stall_share": 0.5, "plots": PLOT_KINDS,
                     "statistics": ["median", "mean", "sd", "p95", "max"], "include_deviated": False, "scripts": []}


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
        options = {k: _substitute(v, values) for k, v in wl["options"].items()}
        workload = workloads.get(wl["tool"])
        settings = {key: wl[key] for key in workload.settings if key in wl}
        common = {"tool": wl["tool"], "options": options, "threads": int(values.get("threads", 1)),
                  "filesystem": devices.on_cell(self.filesystems[values["filesystem"]], values, self.device_classes),
                  "dataset": workload.dataset(options, **settings), "duration_s": workload.duration(options)}
        if self.noise_control is not None:
            common["noise_control"] = self.noise_control
        if not workload.database:
            return Recipe(**common)
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
            **common, **topology.recipe(self.topologies, values),
            events=events.of_cell(self.topologies, values),
            engine=engine, version=version, basedir=self.basedir(family, version), memory=memory,
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
        return self.repeat_until["max_repetitions"] if self.repeat_until else self.repetitions

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
        if "basedir" in self.versions.get(version, {}):
            return self.versions[version]["basedir"]
        dest = servers.dest_for(family, version)
        return None if dest is None else str(dest)

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


def read(path: str | os.PathLike) -> dict:
    """A study file as a dict (a key given twice is refused, as `./dbsweep run` refuses it)."""
    try:
        return load_yaml(Path(path).read_text()) or {}
    except yaml.constructor.ConstructorError as error:
        raise ConfigError(f"{path}:{error.problem_mark.line + 1}: {error.problem}") from None


def load(config: dict, folder: str | os.PathLike | None = None) -> Study:
    """Validate a config dict (as Snakemake or yaml.safe_load gives it) and build the study. `folder` is
    the study file's: the files the study names (an .sql file, a script) are relative to it (default
    the working directory, for a dict that comes from no file)."""
    _option_set_keys(config)
    config_tree.check(config)
    _validate_schema(config)
    _check_names(config)
    _in_folder(config, Path(folder) if folder is not None else Path.cwd())
    axes = {name: list(values) for name, values in config["axes"].items()}
    axes.setdefault("filesystem", ["tmpfs"])
    axes.setdefault("threads", [1])
    for name, values in axes.items():
        if not values:
            raise ConfigError(f"axes.{name}: [] has no values, so the matrix has no cells; give at least one")
    filesystems = _filesystems(config.get("filesystems", {}))
    classes = devices.check(config, axes)
    wls = config["workloads"]
    for name, wl in wls.items():
        workload = workloads.get(wl["tool"])
        for key, value in wl["options"].items():
            _check_placeholders(value, axis_order(axes), f"workloads.{name}.options.{key}")
        workload.check(wl["options"], f"workloads.{name}.options")
        _check_duration(workload, wl["options"], f"workloads.{name}.options")
        if wl.get("warmup") and not workload.warmup:
            raise ConfigError(f"workloads.{name}.warmup: {wl['warmup']!r}: the {wl['tool']} workload has no "
                              "warm-up run; remove it")
        for key in SETTINGS:
            if key in wl and key not in workload.settings:
                raise ConfigError(f"workloads.{name}.{key}: {wl[key]!r}: the {wl['tool']} workload does not take "
                                  f"{key}; remove it")
        if any(key in wl for key in workload.settings):
            workload.dataset(wl["options"], **{key: wl[key] for key in workload.settings if key in wl},
                             where=f"workloads.{name}")  # refuses what it cannot take
    server = config.get("server", {})
    for key in ("cgroup_overhead",):
        if key in server:
            _size(server[key], f"server.{key}")
    installed = _debian_only(axes)
    for family, options in server.get("options", {}).items():
        engines.check_options(family, options, f"server.options.{family}", installed)
    for axis, sets in config.get("server_options", {}).items():
        for value, families in sets.items():
            for family, options in families.items():
                engines.check_options(family, options, f"server_options.{axis}.{_word(value)}.{family}", installed)
    option_sets = _option_sets(config.get("server_options", {}), axes)
    versions = _versions(axes)
    topology.check(config, axes)
    events.check(config, axes)
    _check_values(config, axes, wls, filesystems, option_sets, versions)
    combinations = matrix.combinations(axes, config.get("include", []))
    if combinations > matrix.MAX_CELLS:
        sizes = " x ".join(f"{a} {len(axes[a])}" for a in axis_order(axes))
        raise ConfigError(f"axes: {combinations:,} combinations of axis values ({sizes}"
                          f"{', with include' if config.get('include') else ''}); a study has at most "
                          f"{matrix.MAX_CELLS:,} cells")
    declared = {key: config[key] for key in ("topologies", "network", "networks", "proxies", "events")
                if key in config}
    server_axes = {"engine", "version", "memory", *topology.AXES, events.AXIS} | set(option_sets)

    def applicable(cell: dict) -> list[str]:
        """Server axes mean something only to database workloads."""
        wl = wls.get(cell["workload"])
        if wl and workloads.get(wl["tool"]).database:
            return list(cell)
        return [a for a in cell if a not in server_axes]

    expanded = expand(axes, config.get("exclude", []), config.get("include", []), applicable)
    if not expanded:
        raise ConfigError(f"exclude: {shown(config.get('exclude'))} excludes every cell of the matrix")
    cells, not_applicable = [], []
    for cell in expanded:
        _check_cell_options(cell, wls)
        why = (_not_applicable(cell, wls, versions, axes)
               or _topology_not_applicable(cell, wls, declared, server.get("cold_start", False), versions)
               or _events_not_applicable(cell, wls, declared, filesystems))
        if why:
            not_applicable.append((cell.path, why))
        else:
            cells.append(cell)
    if not cells:
        path, why = not_applicable[0]
        raise ConfigError(f"axes: no cell of the matrix can run; {len(not_applicable)} not applicable, e.g. "
                          f"{path}: {why}")
    longest = max((cell.path for cell in cells), key=lambda path: len(path.encode()))
    if len(longest.encode()) > matrix.MAX_CELL_PATH:
        raise ConfigError(f"axes: the cell path {shown(longest)} is {len(longest.encode())} bytes long; at most "
                          f"{matrix.MAX_CELL_PATH}: shorten the axis names or values")
    repeat_until = _repeat_until(config, len(cells))
    repetitions = repeat_until["max_repetitions"] if repeat_until else config.get("repetitions", 1)
    if len(cells) * repetitions > matrix.MAX_RUNS:
        key = "repeat_until.max_repetitions" if repeat_until else "repetitions"
        raise ConfigError(f"{key}: {repetitions} x {len(cells):,} cells is {len(cells) * repetitions:,} "
                          f"runs; a study has at most {matrix.MAX_RUNS:,}")
    order = axis_order(axes)
    used_fs = {}
    warnings = []
    for cell in cells:
        _use_filesystem(cell, filesystems, used_fs)
        _check_server_cell(cell, wls, option_sets)
        _check_events(cell, wls, declared)
        if "engine" in cell.as_dict() and workloads.get(wls[cell["workload"]]["tool"]).database:
            topology.check_cell(cell["engine"], topology.recipe(declared, cell.as_dict()))
    warnings += _check_memory(cells, config.get("allow_oversize_memory", False))
    control = _noise_control(config.get("noise_control", {}))
    warnings += _check_pinning(control, cells, wls)
    for name, fs in used_fs.items():
        _check_filesystem(name, fs)
    study = Study(
        name=config["study"],
        description=config.get("description", ""),
        repetitions=config.get("repetitions", 1),
        interleave=config.get("interleave", True),
        axes=order,
        cells=cells,
        filesystems=filesystems | used_fs,
        workloads=wls,
        server=server,
        option_sets={a: sets for a, sets in option_sets.items() if a in order},
        baseline=_baseline(config.get("baseline", {}), axes),
        # headline shapes only the summary page: kept out of the analysis rules' params, which rerun them
        analysis=ANALYSIS_DEFAULTS | {k: v for k, v in config.get("analysis", {}).items() if k != "headline"}
        | {"scripts": _scripts(config)},
        versions=versions,
        cluster=config.get("cluster", {}),
        not_applicable=not_applicable,
        topologies=declared,
        headline=config.get("analysis", {}).get("headline", []),
        warnings=warnings,
        noise_control=control,
        canary_every=config.get("noise_control", {}).get("canary", {}).get("every"),
        repeat_until=repeat_until,
        device_classes=classes,
    )
    for cell in cells:
        study.recipe(cell)  # built once here (planning reads them again): what a recipe refuses stops the load
    _check_fit(study, used_fs)
    return study


def load_file(path: str | os.PathLike) -> Study:
    """The study of a YAML file, its files relative to the file's folder."""
    return load(read(path), Path(path).absolute().parent)


def _in_folder(config: dict, folder: Path) -> None:
    """Make each file the study points at absolute, in place: a relative path is relative to the study
    file's folder, so a study runs the same from any working directory (snakemake --directory). These are
    the user's input files and may be anywhere readable; names that become paths of results are not files
    (names.py). A relative one that is not there is refused here, naming the key, the value and where it
    was looked for; an absolute one is checked where its key is (one line, key and value)."""
    def absolute(key: str, value):
        if not isinstance(value, str) or not value or "{" in value or Path(value).is_absolute():
            return value  # a placeholder is substituted per cell, and checked as the workload checks it
        path = os.path.normpath(folder / value)
        if not os.path.exists(path):
            raise ConfigError(f"{key}: {value!r}: no such file (looked for {path}, relative to the study file)")
        return path

    for name, wl in config.get("workloads", {}).items():
        options = wl.get("options", {})
        for key in workloads.get(wl["tool"]).files(options):
            if key in options:
                options[key] = absolute(f"workloads.{name}.options.{key}", options[key])
    analysis = config.get("analysis", {})
    if "scripts" in analysis:
        analysis["scripts"] = [absolute(f"analysis.scripts[{i}]", script)
                               for i, script in enumerate(analysis["scripts"])]
    for i, value in enumerate(config["axes"].get("version", [])):
        if isinstance(value, dict):
            value["basedir"] = absolute(f"axes.version[{i}].basedir", value["basedir"])
    for name, spec in config.get("proxies", {}).items():
        if "path" in spec:
            spec["path"] = absolute(f"proxies.{name}.path", spec["path"])


def _check_names(config: dict) -> None:
    """Every name that becomes part of a path (names.py); values are encoded instead."""
    check_name("study", config["study"])
    for section in ("axes", "filesystems", "workloads", "server_options", "topologies", "networks", "proxies",
                    "events"):
        for name in config.get(section, {}):
            check_name(section, name)
    for name, values in config["axes"].items():
        if name in matrix.RESERVED_AXES:
            raise ConfigError(f"axes.{name}: {shown(values)}: {name} is a name dbsweep uses itself (a column of "
                              "every result table, or a part of a run's identity); give the axis another name")
    for axis, sets in config.get("server_options", {}).items():
        for value in sets:
            check_name(f"server_options.{axis}", _word(value))
    for i, value in enumerate(config["axes"].get("version", [])):
        if isinstance(value, dict):
            check_name(f"axes.version[{i}].name", value["name"])
    for i, host in enumerate(config["axes"].get("host", [])):
        check_name(f"axes.host[{i}]", host)


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    """The schema's validator, read once per process."""
    # libyaml's loader when there: 3 ms instead of 20 at every start
    schema = yaml.load(SCHEMA.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return jsonschema.Draft202012Validator(schema)


def _scripts(config: dict) -> list[str]:
    """analysis.scripts: each an existing .R or .py file (absolute: _in_folder), with a stem unique among
    them (the stem names its folder, results/user/<stem>/)."""
    scripts = config.get("analysis", {}).get("scripts", [])
    stems = {}
    for i, script in enumerate(scripts):
        path = Path(script)
        if path.suffix not in (".R", ".py"):
            raise ConfigError(f"analysis.scripts[{i}]: {script!r} is neither an R (.R) nor a Python (.py) script")
        if not path.is_file():
            raise ConfigError(f"analysis.scripts[{i}]: {script!r}: no such file")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", path.stem):
            raise ConfigError(f"analysis.scripts[{i}]: {script!r}: its name may hold letters, digits, '_', '-', '.'")
        if path.stem in stems:
            raise ConfigError(f"analysis.scripts[{i}]: {script!r} has the same name as {stems[path.stem]!r}")
        stems[path.stem] = script
    return list(scripts)


def _validate_schema(config: dict) -> None:
    error = jsonschema.exceptions.best_match(_validator().iter_errors(config))
    if error is None:
        return
    key = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in error.absolute_path).replace(".[", "[")
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        raise ConfigError(f"{key + '.' if key else ''}{extra[0]}: unknown key")
    if error.validator == "required":
        missing = error.message.split("'")[1]
        raise ConfigError(f"{key + '.' if key else ''}{missing}: missing")
    raise ConfigError(f"{key or '(top level)'}: {shown(error.instance)} {_reason(error)}")


def _reason(error) -> str:
    v = error.validator
    if v == "minimum":
        return f"is below the minimum of {error.validator_value}"
    if v == "maximum":
        return f"is above the maximum of {error.validator_value}"
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
        _size(out[name]["size"], f"filesystems.{name}.size")
        if spec["type"] == "dir" and "path" not in spec:
            raise ConfigError(f"filesystems.{name}.path: missing (type dir needs a directory)")
    return out


def _use_filesystem(cell: Cell, filesystems: dict, used_fs: dict) -> None:
    """The cell's filesystem among those the study uses (its values were checked: _check_values)."""
    fs = str(cell["filesystem"])
    used_fs[fs] = FS_DEFAULTS | {"type": "dir", "path": fs[4:]} if fs.startswith("dir:") else filesystems[fs]


def _check_cell_options(cell: Cell, wls: dict) -> None:
    """A workload option that names an axis ({axis}) is checked as its cell gives it: a duration, a rate."""
    values = cell.as_dict()
    wl = values["workload"]
    given = wls[wl]["options"]
    if not any(_placeholders(value) for value in given.values()):
        return  # checked when the study loaded
    workload = workloads.get(wls[wl]["tool"])
    options = {key: _substitute(value, values) for key, value in given.items()}
    _check_duration(workload, options, f"workloads.{wl}.options")
    if workload.takes_rate:  # fio's own `rate` is a bandwidth
        workloads.check_rate(options, f"workloads.{wl}.options")
    if workload.check_cell:
        workload.check_cell(options, f"workloads.{wl}.options")


def _check_duration(workload, options: dict, where: str) -> None:
    """The measured window's option (Workload.duration_key: time, fio's runtime) is a whole number of seconds
    of at least 1: workload.duration must read it, and a window of 0 or -5 s measures nothing. Left out, the
    tool's default applies (fio then runs until its `size` is done)."""
    key = workload.duration_key
    if key is None or key not in options or _placeholders(options[key]):
        return  # an axis's value: checked per cell (_check_cell_options)
    try:
        seconds = workload.duration(options)
    except (ValueError, TypeError):
        seconds = None
    if not isinstance(seconds, int) or seconds < 1:
        raise ConfigError(f"{where}.{key}: {shown(options[key])} is not a whole number of seconds of at least 1")


def _check_values(config: dict, axes: dict, wls: dict, filesystems: dict, option_sets: dict, builds: dict) -> None:
    """Every value of an axis, and every value an include rule gives an axis, passes the same checks: an
    include rule adds cells, and their values become folder names, recipes and server options as the axes'
    do. An include rule's values are checked against the axis's schema here too (the schema sees only a
    rule's shape); a bare on / off of an option-set axis, in include or exclude, means the word."""
    checks = {
        "host": lambda value, where: check_name(where, value),
        "version": lambda value, where: _known_version(value, builds, where),
        "memory": _memory_value,
        "filesystem": lambda value, where: _defined_filesystem(value, filesystems, where),
        "workload": lambda value, where: _defined_workload(value, wls, where),
        events.AXIS: lambda value, where: events.check_value(config, value, where),
    } | {axis: functools.partial(topology.check_value, config, axis) for axis in topology.AXES} \
      | {axis: functools.partial(_option_set_value, axis, option_sets[axis]) for axis in option_sets}
    for axis, values in axes.items():
        for value in values:
            matrix.check_value(axis, value, f"axes.{axis}")
            checks.get(axis, lambda value, where: None)(value, f"axes.{axis}")
    order = axis_order(axes)
    for kind in ("include", "exclude"):
        for i, rule in enumerate(config.get(kind, [])):
            matrix.check_rule(rule, order, f"{kind}[{i}]")
            for axis in set(rule) & set(option_sets):
                rule[axis] = [_word(v) for v in rule[axis]] if isinstance(rule[axis], list) else _word(rule[axis])
    for i, rule in enumerate(config.get("include", [])):
        for axis, given in rule.items():
            where = f"include[{i}].{axis}"
            for value in given if isinstance(given, list) else [given]:
                _axis_schema(axis, value, where)
                matrix.check_value(axis, value, where)
                checks.get(axis, lambda value, where: None)(value, where)


def _axis_schema(axis: str, value, where: str) -> None:
    """value as the schema takes an item of the axis (include rules are only objects to the schema)."""
    spec = _validator().schema["properties"]["axes"]
    items = spec["properties"].get(axis, spec["additionalProperties"])["items"]
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(items).iter_errors(value))
    if error is not None:
        raise ConfigError(f"{where}: {shown(value)} {_reason(error)}")


def _known_version(value, builds: dict, where: str) -> None:
    if isinstance(value, dict) or str(value) in builds:
        return  # a build of the axis (checked by _versions), or its name
    if not any(str(value) in servers.available(f) for f in engines.FAMILIES):
        raise ConfigError(f"{where}: {shown(value)} is not a version dbsweep knows; available: "
                          + "; ".join(f"{f} {', '.join(servers.available(f))}" for f in engines.FAMILIES)
                          + "; or a build of the version axis")


def _memory_value(value, where: str) -> None:
    """A server's memory: a size, and not below MIN_MEMORY."""
    _size(value, where)
    if units.parse_size(value) < MIN_MEMORY:
        raise ConfigError(f"{where}: {shown(value)} is below the minimum of {units.format_size(MIN_MEMORY)} (MariaDB "
                          "raises an InnoDB buffer pool below 2M to 2M: the cell would not run the memory it names)")


def _size(value, where: str) -> None:
    """A size as every user of it reads it (units.parse_size, truncate, tmpfs): a whole number and K, M, G or T,
    at most MAX_SIZE."""
    if not isinstance(value, str) or not SIZE.match(value):
        decimal = isinstance(value, (str, float)) and re.fullmatch(r"[0-9]*\.[0-9]+[KMGT]?", str(value))
        raise ConfigError(f"{where}: {shown(value)} is not a size like 512M or 4G"
                          + (" (a whole number: 1536M, not 1.5G)" if decimal else ""))
    if units.parse_size(value) > MAX_SIZE:
        raise ConfigError(f"{where}: {shown(value)} is above the largest size dbsweep makes, 1024T")


def _defined_filesystem(value, filesystems: dict, where: str) -> None:
    if not str(value).startswith("dir:") and str(value) not in filesystems:
        raise ConfigError(f"{where}: {shown(value)} is not defined (define it under filesystems:, or use "
                          f"{', '.join(BUILTIN_FILESYSTEMS)} or dir:<path>)")


def _defined_workload(value, wls: dict, where: str) -> None:
    if str(value) not in wls:
        raise ConfigError(f"{where}: {shown(value)} is not defined under workloads: ({', '.join(wls)})")


def _option_set_value(axis: str, sets: dict, value, where: str) -> None:
    if str(_word(value)) not in sets:
        raise ConfigError(f"{where}: {shown(value)} is not an option set ({', '.join(sets)}); "
                          f"define it under server_options.{axis}")


def _option_set_keys(config: dict) -> None:
    """server_options.<axis>.<value>: each value is one of the axis's values, which YAML reads as a number or
    a boolean when bare (`1:`, `on:`); as a key it is the value as text (a bare on / off the word, as on the
    axis: _word), in place. Only the study's own axes and the built-in option-set axes choose options."""
    sets = config.get("server_options")
    if not isinstance(sets, dict):
        return  # the schema says what it should be
    for axis, values in sets.items():
        if axis in matrix.BUILTIN_AXES or axis in topology.AXES or axis == events.AXIS:
            raise ConfigError(f"server_options.{axis}: {shown(values)}: {axis} is a built-in axis; option sets "
                              "are chosen by an axis of your own (or binlog, durability, isolation)")
        if not isinstance(values, dict):
            continue
        words = {}
        for value, spec in values.items():
            word = str(_word(value)) if isinstance(value, (bool, int, float)) else value
            if word in words:
                raise ConfigError(f"server_options.{axis}.{word}: {shown(value)} names the value {word!r} again")
            words[word] = spec
        sets[axis] = words


def _option_sets(user: dict, axes: dict) -> dict[str, dict]:
    """Built-in option sets, with the study's own added by axis and value. YAML reads a bare
    on / off as a boolean; on option-set axes it means the words (binlog: [off, sync1])."""
    sets = {axis: dict(values) for axis, values in engines.option_sets().items()}
    for axis, values in user.items():
        sets.setdefault(axis, {}).update({_word(value): spec for value, spec in values.items()})
    for axis, values in axes.items():
        if axis in sets:
            values[:] = [_word(v) for v in values]
            for value in values:
                if str(value) not in sets[axis]:
                    raise ConfigError(f"axes.{axis}: {value!r} is not an option set ({', '.join(sets[axis])}); "
                                      f"define it under server_options.{axis}")
    return sets


def _versions(axes: dict) -> dict[str, dict]:
    """The version axis as names (in place), and the user's own builds by name."""
    builds = {}
    values = axes.get("version", [])
    for i, value in enumerate(values):
        if isinstance(value, dict):
            basedir = Path(value["basedir"])
            try:
                family = servers.basedir_family(basedir)
            except ConfigError as e:
                raise ConfigError(f"axes.version[{i}].basedir: {value['basedir']!r}: {e}") from None
            builds[value["name"]] = {"basedir": str(basedir.resolve()), "family": family}
            values[i] = value["name"]
        else:
            values[i] = str(value)
            known = [f for f in engines.FAMILIES if values[i] in servers.available(f)]
            if not known:
                raise ConfigError(f"axes.version: {values[i]!r} is not a version dbsweep knows; available: "
                                  + "; ".join(f"{f} {', '.join(servers.available(f))}" for f in engines.FAMILIES)
                                  + "; or give {name: …, basedir: /path}")
    for family in engines.FAMILIES:
        same = {}
        for value in values:
            if value in builds or value not in servers.available(family):
                continue
            entry = servers.entry(family, value)
            key = entry.get("version") or entry["package"]
            if key in same:
                raise ConfigError(f"axes.version: {same[key]!r} and {value!r} are the same {family} build; keep one")
            same[key] = value
    if "version" in axes:
        engines_families = {engines.ENGINES[e] for e in axes.get("engine", [])}
        for name, build in builds.items():
            if _family_group(build["family"]) not in engines_families:
                raise ConfigError(f"axes.version: {name!r} is a {build['family']} build, and no engine of the "
                                  f"study runs it (engines: {', '.join(axes.get('engine', []))})")
    return builds


def _debian_only(axes: dict) -> bool:
    """Every database cell runs Debian's installed servers (no version axis, or only their versions), so
    their own lists of option names apply."""
    for value in axes.get("version", []):
        if isinstance(value, dict):
            return False
        for family in engines.FAMILIES:
            if str(value) in servers.available(family) and not servers.is_debian(family, str(value)):
                return False
    return True


def _family_group(build_family: str) -> str:
    """The family whose adapter runs a build (MySQL and Percona builds: MariaDB's; engines.BUILDS)."""
    return engines.BUILDS.get(build_family, build_family)


def _not_applicable(cell: Cell, wls: dict, builds: dict, axes: dict) -> str | None:
    """Why a database cell cannot run (a version of another server family, MyRocks on a build
    without its plugin, a workload the engine cannot run), or None."""
    values = cell.as_dict()
    if "engine" not in values or "version" not in values:
        return _workload_not_applicable(cell, wls)
    engine, version = values["engine"], str(values["version"])
    family = engines.ENGINES.get(engine)
    if version in builds:
        build = builds[version]
        if _family_group(build["family"]) != family:
            return f"{version} is a {build['family']} build; {engine} runs on {family}"
        if not engines.family(engine).supports(engine, Path(build["basedir"])):
            return f"{engine} is not in the build {version} (MyRocks needs its ha_rocksdb plugin)"
        return _workload_not_applicable(cell, wls)
    if version not in servers.available(family):
        return f"{version} is not a {family} version"
    why = engines.family(engine).DEBIAN_ONLY.get(engine)
    if why and not servers.is_debian(family, version):
        return f"{why} ({version} has not)"
    return _workload_not_applicable(cell, wls)


def _topology_not_applicable(cell: Cell, wls: dict, declared: dict, cold_start: bool,
                             versions: dict) -> str | None:
    """Why the cell's topology cannot run its engine or workload (topology.not_applicable), or None."""
    values = cell.as_dict()
    wl = wls.get(values["workload"])
    if wl is None or "engine" not in values or not topology.has_topology(values):
        return None
    in_process = workloads.get(wl["tool"]).measure is not None
    family = engines.ENGINES[values["engine"]]
    version = str(values.get("version", servers.DEBIAN))
    basedir = versions[version]["basedir"] if version in versions else servers.dest_for(family, version) \
        if version in servers.available(family) else None
    return topology.not_applicable(values["engine"], topology.recipe(declared, values), in_process, cold_start,
                                   basedir)


def _events_not_applicable(cell: Cell, wls: dict, declared: dict, filesystems: dict) -> str | None:
    """Why the cell cannot run its timed events (events.not_applicable), or None."""
    values = cell.as_dict()
    wl = wls.get(values["workload"])
    if wl is None or "engine" not in values:
        return None
    workload = workloads.get(wl["tool"])
    options = {k: _substitute(v, values) for k, v in wl["options"].items()}
    fs_type = filesystems.get(str(values["filesystem"]), {}).get("type")
    return events.not_applicable(events.of_cell(declared, values), workload.duration(options),
                                 workload.measure is not None, fs_type)


def _check_events(cell: Cell, wls: dict, declared: dict) -> None:
    """A schedule the cell cannot keep (an event after its window, a node its topology lacks) is refused."""
    values = cell.as_dict()
    schedule = events.of_cell(declared, values)
    if not schedule or not workloads.get(wls[values["workload"]]["tool"]).database:
        return
    workload = workloads.get(wls[values["workload"]]["tool"])
    options = {k: _substitute(v, values) for k, v in wls[values["workload"]]["options"].items()}
    part = topology.recipe(declared, values)
    nodes = part["topology"]["nodes"] if part else None
    events.check_cell(schedule, workload.duration(options), nodes, f"events.{values[events.AXIS]}")


def _workload_not_applicable(cell: Cell, wls: dict) -> str | None:
    """Why the cell's workload cannot run on its engine (the workload module's not_applicable), or None."""
    values = cell.as_dict()
    wl = wls.get(values["workload"])
    if wl is None or "engine" not in values:
        return None
    workload = workloads.get(wl["tool"])
    family = engines.ENGINES[values["engine"]]
    if workload.families is not None and family not in workload.families:
        return f"{wl['tool']} runs on {', '.join(workload.families)}, not {family} ({values['engine']})"
    if workload.not_applicable is None:
        return None
    options = {k: _substitute(v, values) for k, v in wl["options"].items()}
    return workload.not_applicable(options, values["engine"])


def _baseline(baseline: dict, axes: dict) -> dict:
    """Each named axis exists and has the value; a bare YAML off / on means the word, as on the axes."""
    out = {}
    for axis, value in baseline.items():
        if axis not in axes:
            raise ConfigError(f"baseline.{axis}: unknown axis")
        value = _word(value)
        if str(value) not in map(str, axes[axis]):
            booleans = any(isinstance(v, bool) for v in axes[axis])
            raise ConfigError(f"baseline.{axis}: {value!r} is not a value of the axis {axis} "
                              f"({', '.join(map(str, axes[axis]))})"
                              + ("; YAML reads a bare on, off, yes, no, true or false as a boolean: quote the "
                                 "axis's values ('on', 'off') to mean the words" if booleans else ""))
        out[axis] = value
    return out


def _word(value):
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


def _check_server_cell(cell: Cell, wls: dict, option_sets: dict) -> None:
    values = cell.as_dict()
    if not workloads.get(wls[values["workload"]]["tool"]).database:
        return
    if "engine" not in values:
        raise ConfigError(f"axes.engine: missing, and workload {values['workload']!r} needs a database server")
    family = engines.ENGINES[values["engine"]]
    for axis, value in values.items():
        if axis in option_sets and family not in option_sets[axis][str(value)]:
            raise ConfigError(f"server_options.{axis}.{value}: nothing for {family} (cell {cell.path}); "
                              f"give it `{family}: {{}}` or exclude those cells")


def _check_fit(study: Study, used_fs: dict) -> None:
    """Each filesystem is tried with its own options (fsprobe), and each cell's dataset must fit the space
    it leaves: refused naming both sizes, rather than a disk full inside the job."""
    usable = {name: fsprobe.usable_bytes(fs, f"filesystems.{name}" if not name.startswith("dir:") else
                                         "axes.filesystem") for name, fs in used_fs.items()}
    for cell in study.cells:
        values = cell.as_dict()
        room = usable[str(values["filesystem"])]
        if room is None:
            continue
        recipe = study.recipe(cell)
        need = workloads.dataset_bytes(recipe.tool, recipe.dataset)
        if need is not None and need > room:
            fs = recipe.filesystem
            raise ConfigError(f"workloads.{values['workload']}: dataset {recipe.dataset} ({_gib(need)}) does not "
                              f"fit filesystem {values['filesystem']} ({fs['type']}, size {fs.get('size')}: "
                              f"{_gib(room)} free)")


def _gib(size: int) -> str:
    return f"{size / 2**30:.2f}G" if size >= 2**30 else f"{size / 2**20:.0f}M"


def host_memory() -> int:
    """Bytes of RAM of this host."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _check_memory(cells: list[Cell], allow: bool) -> list[str]:
    """A server memory above the host's RAM measures swapping (or an OOM kill), not the engine: refused,
    or with allow_oversize_memory a warning."""
    ram = host_memory()
    seen, warnings = set(), []
    for cell in cells:
        memory = cell.get("memory")
        if memory is None or str(memory) in seen:
            continue
        seen.add(str(memory))
        if units.parse_size(memory) > ram:
            message = f"axes.memory: {memory!r} is above this host's RAM ({ram / 2**30:.1f}G)"
            if not allow:
                raise ConfigError(message + "; set allow_oversize_memory: true to run it anyway")
            warnings.append(message)
    return warnings


def _repeat_until(config: dict, cells: int) -> dict | None:
    """repeat_until (the schema checked its values) against the keys it goes with: the noise it reads needs
    2 repetitions per cell or more to start from, and a canary ends every round (its places must not move
    when a round is added): the rounds interleaved, and canary.every dividing the study's cells."""
    spec = config.get("repeat_until")
    if spec is None:
        return None
    repetitions = config.get("repetitions", 1)
    if repetitions < 2:
        raise ConfigError(f"repetitions: {repetitions}; repeat_until needs 2 or more to measure the noise from")
    if spec["max_repetitions"] < repetitions:
        raise ConfigError(f"repeat_until.max_repetitions: {spec['max_repetitions']} is fewer than repetitions "
                          f"({repetitions})")
    every = config.get("noise_control", {}).get("canary", {}).get("every")
    if every is not None and not config.get("interleave", True):
        raise ConfigError("interleave: false; repeat_until with noise_control.canary needs the rounds "
                          "interleaved (a canary ends every round)")
    if every is not None and cells % every:
        raise ConfigError(f"noise_control.canary.every: {every}; with repeat_until it must divide the study's "
                          f"{cells} cells, so that a canary ends every round")
    return dict(spec)


def _noise_control(spec: dict) -> noise.NoiseControl | None:
    """The per-repetition part of noise_control (the schema checked its values), or None when nothing
    is set: a recipe without it stays equal to one recorded before noise control existed."""
    control = noise.NoiseControl(**{k: v for k, v in spec.items() if k != "canary"})
    return control if control.any else None


def _check_pinning(control: noise.NoiseControl | None, cells: list[Cell], wls: dict) -> list[str]:
    """cpu_pinning on a host with fewer CPUs than a cell's parts: one warning for the study (each run
    records "not applied" in its run.json), not a refusal."""
    if control is None or not control.cpu_pinning:
        return []
    cpus = len(noise.available_cpus())
    need = max(noise.needed(workloads.get(wls[cell["workload"]]["tool"]).database) for cell in cells)
    if cpus >= need:
        return []
    return [f"noise_control.cpu_pinning: not applied where a cell needs {need} CPUs: this host has {cpus}"]


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
    return list(_fields(value)) if isinstance(value, str) else []


@functools.cache
def _fields(text: str) -> tuple[str, ...]:
    """The {names} in an option's text; parsed once per text (it is asked per cell and option)."""
    return tuple(PLACEHOLDER.findall(text))


def _check_placeholders(value, order: list[str], where: str) -> None:
    """An option's braces are placeholders {axis} of the study's axes, and nothing else: no format spec
    ({threads:>4}), conversion ({mode!r}), attribute or index, no empty {} and no lone brace. Each is
    replaced by the cell's value as it is written (its str), never through str.format."""
    if not isinstance(value, str):
        return
    for name in _fields(value):
        if not name:
            raise ConfigError(f"{where}: {shown(value)}: {{}} names no axis; write {{axis}} with an axis's name")
        if name not in order:
            bare = re.split(r"[^A-Za-z0-9_.+-]|\.", name, maxsplit=1)[0]
            if bare in order:
                raise ConfigError(f"{where}: {shown(value)}: {{{name}}} is not a placeholder; write {{{bare}}} "
                                  "(an axis's name in braces, no format spec, conversion or attribute)")
            raise ConfigError(f"{where}: {shown(value)} names {{{name}}}, which is not an axis")
    if "{" in PLACEHOLDER.sub("", value) or "}" in PLACEHOLDER.sub("", value):
        raise ConfigError(f"{where}: {shown(value)} has a brace outside a placeholder {{axis}}")


def _substitute(value, cell: dict):
    if not _placeholders(value):
        return value
    return PLACEHOLDER.sub(lambda match: str(cell[match[1]]), value)
