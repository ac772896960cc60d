"""Load a study config: schema validation, then the checks a schema cannot express.

Every error is a ConfigError with one line naming the key and the value, raised
before any job exists. What is particular to a concern (topology, events, noise
control, repeat_until, versions, filesystems, the server's memory) is the
concern's own module; this one composes them (CONCERNS, concern.py) and checks
the study's core: axes, workloads, server options and option sets, names, the
matrix.
"""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import jsonschema
import yaml

from dbsweep import config_tree, matrix, option_sets, units, workloads
from dbsweep.concern import Draft
from dbsweep.concerns import CONCERNS
from dbsweep.configfile import load_yaml
from dbsweep.errors import ConfigError, shown
from dbsweep.matrix import axis_order, expand
from dbsweep.names import check_name
from dbsweep.study import Study
from dbsweep.workloads import study as workload_study

SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"
# Plots of rule figures (workflow/R/statistics_plots.R), all by default.
PLOT_KINDS = ["timeseries_steady", "violin", "ci_vs_threads", "ratio_heatmap", "latency_percentiles"]
ANALYSIS_DEFAULTS = {"trim_s": 0, "steady_state": True, "stall_share": 0.5, "plots": PLOT_KINDS,
                     "statistics": ["median", "mean", "sd", "p95", "max"], "include_deviated": False, "scripts": []}


def read(path: str | os.PathLike) -> dict:
    """A study file as a dict (a key given twice is refused, as `./dbsweep run` refuses it)."""
    try:
        return load_yaml(Path(path).read_text()) or {}
    except yaml.constructor.ConstructorError as error:
        raise ConfigError(f"{path}:{error.problem_mark.line + 1}: {error.problem}") from None


def load(config: dict, folder: str | os.PathLike | None = None) -> Study:
    """Validate a config dict (as Snakemake or yaml.safe_load gives it) and build the study. `folder` is
    the study file's: the files the study names (an .sql file, a script) are relative to it (default
    the working directory, for a dict that comes from no file). The concerns' parts (concern.py) run at
    their places in the order of CONCERNS."""
    option_sets.keys(config, {*matrix.BUILTIN_AXES, *(axis for part in CONCERNS for axis in part.axes)})
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
    wls = config["workloads"]
    for name, wl in wls.items():
        workload_study.check(name, wl, axes)
    server = config.get("server", {})
    for key in ("cgroup_overhead",):
        if key in server:
            units.check_size(server[key], f"server.{key}")
    option_sets.check_options(config, axes)
    draft = Draft(config, axes, wls, option_sets.sets(config.get("server_options", {}), axes), server)
    for part in CONCERNS:
        part.check(draft)
    _check_values(draft)
    combinations = matrix.combinations(axes, config.get("include", []))
    if combinations > matrix.MAX_CELLS:
        sizes = " x ".join(f"{a} {len(axes[a])}" for a in axis_order(axes))
        raise ConfigError(f"axes: {combinations:,} combinations of axis values ({sizes}"
                          f"{', with include' if config.get('include') else ''}); a study has at most "
                          f"{matrix.MAX_CELLS:,} cells")
    server_axes = {"engine", *(axis for part in CONCERNS for axis in part.axes)} | set(draft.option_sets)

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
        workload_study.check_cell(cell, wls)
        why = next(filter(None, (part.not_applicable(draft, cell) for part in CONCERNS)), None)
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
    for part in CONCERNS:
        part.check_cells(draft, cells)
    warnings = [warning for part in CONCERNS for warning in part.warnings(draft, cells)]
    order = axis_order(axes)
    study = Study(
        name=config["study"],
        description=config.get("description", ""),
        repetitions=config.get("repetitions", 1),
        interleave=config.get("interleave", True),
        axes=order,
        cells=cells,
        workloads=wls,
        server=server,
        option_sets={a: sets for a, sets in draft.option_sets.items() if a in order},
        baseline=_baseline(config.get("baseline", {}), axes),
        # headline shapes only the summary page: kept out of the analysis rules' params, which rerun them
        analysis=ANALYSIS_DEFAULTS | {k: v for k, v in config.get("analysis", {}).items() if k != "headline"}
        | {"scripts": _scripts(config)},
        cluster=config.get("cluster", {}),
        not_applicable=not_applicable,
        topologies={key: config[key] for part in CONCERNS for key in part.keys if key in config},
        headline=config.get("analysis", {}).get("headline", []),
        warnings=warnings,
        **{name: value for part in CONCERNS for name, value in part.study(draft, cells).items()},
        concerns=CONCERNS,
    )
    for cell in cells:
        study.recipe(cell)  # built once here (planning reads them again): what a recipe refuses stops the load
    for part in CONCERNS:
        part.check_study(study)
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
    for part in CONCERNS:
        part.files(config, absolute)


def _check_names(config: dict) -> None:
    """Every name that becomes part of a path (names.py); values are encoded instead."""
    check_name("study", config["study"])
    for section in ("axes", "workloads", "server_options", *(s for part in CONCERNS for s in part.sections)):
        for name in config.get(section, {}):
            check_name(section, name)
    for name, values in config["axes"].items():
        if name in matrix.RESERVED_AXES:
            raise ConfigError(f"axes.{name}: {shown(values)}: {name} is a name dbsweep uses itself (a column of "
                              "every result table, or a part of a run's identity); give the axis another name")
    for axis, sets in config.get("server_options", {}).items():
        for value in sets:
            check_name(f"server_options.{axis}", option_sets.word(value))
    for part in CONCERNS:
        part.names(config)
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


def _check_values(draft: Draft) -> None:
    """Every value of an axis, and every value an include rule gives an axis, passes the same checks: an
    include rule adds cells, and their values become folder names, recipes and server options as the axes'
    do. An include rule's values are checked against the axis's schema here too (the schema sees only a
    rule's shape); a bare on / off of an option-set axis, in include or exclude, means the word."""
    config, axes, sets = draft.config, draft.axes, draft.option_sets
    checks = {
        "host": lambda value, where: check_name(where, value),
        "workload": lambda value, where: workload_study.defined(value, draft.workloads, where),
    } | {axis: functools.partial(check, draft) for part in CONCERNS for axis, check in part.values.items()} \
      | {axis: functools.partial(option_sets.value, axis, sets[axis]) for axis in sets}
    for axis, values in axes.items():
        for value in values:
            matrix.check_value(axis, value, f"axes.{axis}")
            checks.get(axis, lambda value, where: None)(value, f"axes.{axis}")
    order = axis_order(axes)
    for kind in ("include", "exclude"):
        for i, rule in enumerate(config.get(kind, [])):
            matrix.check_rule(rule, order, f"{kind}[{i}]")
            for axis in set(rule) & set(sets):
                given = rule[axis]
                rule[axis] = [option_sets.word(v) for v in given] if isinstance(given, list) \
                    else option_sets.word(given)
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


def _baseline(baseline: dict, axes: dict) -> dict:
    """Each named axis exists and has the value; a bare YAML off / on means the word, as on the axes."""
    out = {}
    for axis, value in baseline.items():
        if axis not in axes:
            raise ConfigError(f"baseline.{axis}: unknown axis")
        value = option_sets.word(value)
        if str(value) not in map(str, axes[axis]):
            booleans = any(isinstance(v, bool) for v in axes[axis])
            raise ConfigError(f"baseline.{axis}: {value!r} is not a value of the axis {axis} "
                              f"({', '.join(map(str, axes[axis]))})"
                              + ("; YAML reads a bare on, off, yes, no, true or false as a boolean: quote the "
                                 "axis's values ('on', 'off') to mean the words" if booleans else ""))
        out[axis] = value
    return out
