"""A study's workloads when it loads: each as its module takes it (options, placeholders of the study's axes,
its measured window, the keys beside its options it declares), a cell's options once its axes are
substituted, and why a cell's workload cannot run on its engine."""
from __future__ import annotations

from dbsweep import engines, placeholders, workloads
from dbsweep.concern import Concern, Draft
from dbsweep.errors import ConfigError, shown
from dbsweep.matrix import Cell, axis_order

# Workload keys beside tool, options and warmup; a workload declares which it takes (Workload.settings).
SETTINGS = ("dataset_options", "prepare_threads")


def check(name: str, wl: dict, axes: dict) -> None:
    """A workload as its module takes it: options (placeholders of the study's axes), its measured window,
    and the keys beside its options it declares (Workload.settings, warmup)."""
    workload = workloads.get(wl["tool"])
    for key, value in wl["options"].items():
        placeholders.check(value, axis_order(axes), f"workloads.{name}.options.{key}")
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


def _check_duration(workload, options: dict, where: str) -> None:
    """The measured window's option (Workload.duration_key: time, fio's runtime) is a whole number of seconds
    of at least 1: workload.duration must read it, and a window of 0 or -5 s measures nothing. Left out, the
    tool's default applies (fio then runs until its `size` is done)."""
    key = workload.duration_key
    if key is None or key not in options or placeholders.placeholders(options[key]):
        return  # an axis's value: checked per cell (check_cell)
    try:
        seconds = workload.duration(options)
    except (ValueError, TypeError):
        seconds = None
    if not isinstance(seconds, int) or seconds < 1:
        raise ConfigError(f"{where}.{key}: {shown(options[key])} is not a whole number of seconds of at least 1")


def check_cell(cell: Cell, wls: dict) -> None:
    """A workload option that names an axis ({axis}) is checked as its cell gives it: a duration, a rate."""
    values = cell.as_dict()
    wl = values["workload"]
    given = wls[wl]["options"]
    if not any(placeholders.placeholders(value) for value in given.values()):
        return  # checked when the study loaded
    workload = workloads.get(wls[wl]["tool"])
    options = {key: placeholders.substitute(value, values) for key, value in given.items()}
    _check_duration(workload, options, f"workloads.{wl}.options")
    if workload.takes_rate:  # fio's own `rate` is a bandwidth
        workloads.check_rate(options, f"workloads.{wl}.options")
    if workload.check_cell:
        workload.check_cell(options, f"workloads.{wl}.options")


def defined(value, wls: dict, where: str) -> None:
    if str(value) not in wls:
        raise ConfigError(f"{where}: {shown(value)} is not defined under workloads: ({', '.join(wls)})")


def not_applicable(draft: Draft, cell: Cell) -> str | None:
    """Why the cell's workload cannot run on its engine (the workload module's not_applicable), or None."""
    values = cell.as_dict()
    workload = draft.workload(cell)
    if workload is None or "engine" not in values:
        return None
    family = engines.ENGINES[values["engine"]]
    if workload.families is not None and family not in workload.families:
        return f"{workload.tool} runs on {', '.join(workload.families)}, not {family} ({values['engine']})"
    if workload.not_applicable is None:
        return None
    return workload.not_applicable(draft.options(cell), values["engine"])


CONCERN = Concern(name="workloads", not_applicable=not_applicable)
