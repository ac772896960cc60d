"""Workload adapters, one module per tool, each declaring a Workload (contract.py) as WORKLOAD.

The registry below reads those declarations; adding a tool is one module, its name in MODULES,
and its name in the schema's `tool` enum (tests/test_workloads.py checks the two agree).
"""
import re
from functools import cache
from importlib import import_module

from dbsweep.errors import ConfigError
from dbsweep.workloads.contract import DATABASE, STORAGE, Table, Workload, percent_of  # noqa: F401 - the contract

MODULES = ("fio", "sysbench_fileio", "sysbench_oltp", "tpcc", "insert_bench", "query", "pgbench")


@cache
def registry() -> dict[str, Workload]:
    """Tool name -> its declaration, in MODULES order."""
    out = {}
    for name in MODULES:
        workload = import_module(f"{__name__}.{name}").WORKLOAD
        if workload.tool in out:
            raise RuntimeError(f"workloads.{name}: tool {workload.tool!r} is declared twice")
        out[workload.tool] = workload
    return out


def get(tool: str) -> Workload:
    try:
        return registry()[tool]
    except KeyError:
        raise ConfigError(f"tool: {tool!r} is not one of {', '.join(registry())}") from None


def dataset_bytes(tool: str, dataset: dict) -> int | None:
    """Bytes a tool's dataset takes on its filesystem (Workload.dataset_bytes); None when it cannot tell in
    advance (a database's size depends on its engine)."""
    size = get(tool).dataset_bytes
    return size(dataset) if size else None


def dataset_tables(tool: str, dataset: dict) -> int | None:
    """How many tables a tool's prepare makes for `dataset` (Workload.dataset_tables, else its `tables` where that
    is a number); None when it does not say."""
    count = get(tool).dataset_tables
    if count:
        return count(dataset)
    declared = dataset.get("tables")
    return declared if isinstance(declared, int) and not isinstance(declared, bool) else None


def summary_keys() -> list[str]:
    """Summary keys some workloads add to the common ones, in registry order."""
    return _union(w.summary_keys for w in registry().values())


def sample_columns() -> list[str]:
    """Per-second columns some workloads add to the common ones, in registry order."""
    return _union(w.sample_columns for w in registry().values())


def analyses() -> list[str]:
    """Every analysis rule some workload feeds, in registry order."""
    return _union(w.analyses for w in registry().values())


def tables() -> dict[str, tuple[str, ...]]:
    """Every workload's own per-repetition table: name -> columns."""
    out = {}
    for w in registry().values():
        for name, table in w.tables.items():
            if out.setdefault(name, table.columns) != table.columns:
                raise RuntimeError(f"table {name!r} is declared with different columns")
    return out


def _union(groups) -> list[str]:
    keys = []
    for group in groups:
        keys += [k for k in group if k not in keys]
    return keys


def rate(tool: str, options: dict) -> int | None:
    """The fixed arrival rate of an open-loop run, or None (see Workload.takes_rate)."""
    return get(tool).rate(options)


def rate_percent(tool: str, options: dict) -> float | None:
    """The arrival rate as a share of the host's calibrated capacity (`rate: 80%`), or None."""
    return get(tool).rate_percent(options)


def open_loop(tool: str, options: dict) -> bool:
    """An open-loop cell: a fixed arrival rate, absolute or relative to a calibration."""
    return bool(rate_percent(tool, options) or rate(tool, options))


def sysbench_time(options: dict) -> int | None:
    """sysbench runs 10 s unless told otherwise (`time`, with or without an s)."""
    return int(str(options.get("time", 10)).rstrip("s"))


MAX_PERCENT = 1000  # ten times the calibrated capacity: beyond it the run measures only its queue


def check_rate(options: dict, where: str) -> None:
    """sysbench takes --rate=0 as "no limit" and reads a fraction as 0: either would silently
    measure a closed loop, so only a whole number of at least 1 per second passes, or a share of
    the host's calibrated capacity, a percentage in (0, 1000] (calibration.py)."""
    for name, value in options.items():
        if str(name) != "rate" or (isinstance(value, str) and "{" in value):
            continue  # a placeholder is checked per cell, once substituted
        if isinstance(value, str) and "%" in value:
            percent = percent_of(value)
            if percent is None or not 0 < percent <= MAX_PERCENT:
                raise ConfigError(f"{where}.{name}: {value!r} is not a percentage of the calibrated capacity "
                                  f"in (0, {MAX_PERCENT}]% (e.g. 80%)")
            continue
        if isinstance(value, bool):
            number = None
        elif isinstance(value, int):
            number = value
        else:
            number = int(value) if isinstance(value, str) and value.strip().isdigit() else None
        if number is None or number < 1:
            raise ConfigError(f"{where}.{name}: {value!r} is not a positive whole number of arrivals per second "
                              "(or a percentage of the calibrated capacity, e.g. 80%)")


# An option name as the tools spell theirs: a letter, then letters, digits, _ and -. Anything else (=, a space, a
# line break, a quote) would put a second option, or a value, on the tool's command line: fio reads
# `--filename=/dev/vda:=` from the name "filename=/dev/vda:".
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")

# Why an option is refused, said after its value: `workloads.w.options.exec_prerun: 'x' runs a command; remove it`.
SET_BY_DBSWEEP = "is set by dbsweep"
CHANGES_OUTPUT = "changes the output dbsweep reads"
RUNS_COMMAND = "runs a command"
NAMES_PATH = "names a path outside the cell's folders"


def check_names(options: dict, where: str, tool: str, pattern: re.Pattern = NAME,
                spelled: str = "a letter, then letters, digits, _ and -") -> None:
    """Refuse an option name that is not one name of the tool's (the whole name matches pattern), before
    anything is built from it."""
    for name, value in options.items():
        if not isinstance(name, str) or not pattern.fullmatch(name):
            shown = "'***'" if "password" in str(name).lower() else repr(value)
            raise ConfigError(f"{where}: {name!r} (set to {shown}) is not an option name of {tool} ({spelled})")


def refuse(options: dict, where: str, reserved: dict, key, command: str) -> None:
    """Refuse names that are not option names, options the study may not set (reserved: key(name) -> why,
    e.g. SET_BY_DBSWEEP) and values that are not one scalar."""
    check_names(options, where, command)
    for name, value in options.items():
        if key(name) in reserved:
            raise ConfigError(f"{where}.{name}: {value!r} {reserved[key(name)]}; remove it")
        if value is None or isinstance(value, (list, dict)):
            raise ConfigError(f"{where}.{name}: {value!r} is not a single value ({command} takes --{name}=<value>)")
