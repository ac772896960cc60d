"""Workload adapters, one module per tool.

Each module exposes TOOL, check, dataset, prepare, command, samples, summary, live and
version (see fio.py); adding a tool is one module plus its name in TOOLS and in
the schema's `tool` enum. Optional (see tpcc.py): EXTRA_KEYS (summary figures that
become columns of the summary table), DETAIL_KEYS (summary.json only),
not_applicable(options, engine) (a reason, or None), and after_run(options, threads,
option_file) (a command run against the server after the measured window, and the raw
file for its stdout). Database tools may instead offer phases (several
sysbench runs in one measured window, insert_bench.py) or measure (the tool
drives the server itself, query.py), and load (the dataset loaded through the
engine's client rather than sysbench prepare).
"""
from importlib import import_module

from dbsweep.errors import ConfigError

TOOLS = {"fio": "fio", "sysbench-fileio": "sysbench_fileio", "sysbench": "sysbench_oltp", "tpcc": "tpcc",
         "insert": "insert_bench", "query": "query"}
DATABASE_TOOLS = {"sysbench", "tpcc", "insert", "query"}  # tools that run against a database server
OWN_ANALYSIS = {"insert", "query"}  # database tools with tables and plots of their own (not db_tables / db_plots)
SYSBENCH_TOOLS = {"sysbench", "sysbench-fileio", "tpcc"}  # tools that take --rate


def module(tool: str):
    return import_module(f"dbsweep.workloads.{TOOLS[tool]}")


def dataset_bytes(tool: str, dataset: dict) -> int | None:
    """Bytes a tool's dataset takes on its filesystem, from its module's dataset_bytes(dataset); None when the
    module cannot tell in advance (a database's size depends on its engine)."""
    size = getattr(module(tool), "dataset_bytes", None)
    return size(dataset) if size else None


def extra_keys() -> list[str]:
    """Summary keys some workloads add to the common ones (their EXTRA_KEYS), in TOOLS order."""
    keys = []
    for tool in TOOLS:
        keys += [k for k in getattr(module(tool), "EXTRA_KEYS", []) if k not in keys]
    return keys


def duration(tool: str, options: dict) -> int | None:
    """The measured window in seconds, as configured (warm-up excluded)."""
    if tool == "fio":
        value = options.get("runtime")
    elif tool == "query":
        return None  # as many executions as it takes
    else:  # sysbench runs 10 s unless told otherwise
        value = options.get("time", 10)
    return None if value is None else int(str(value).rstrip("s"))


def rate(tool: str, options: dict) -> int | None:
    """The fixed arrival rate of an open-loop run (sysbench's --rate, transactions or events per
    second), or None for a closed loop (fio's own `rate` is a bandwidth limit, not arrivals).
    check_rate() has refused anything but a positive whole number."""
    if tool not in SYSBENCH_TOOLS or options.get("rate") is None:
        return None
    return int(str(options["rate"]))


def check_rate(options: dict, where: str) -> None:
    """sysbench takes --rate=0 as "no limit" and reads a fraction as 0: either would silently
    measure a closed loop, so only a whole number of at least 1 per second passes."""
    for name, value in options.items():
        if str(name) != "rate" or (isinstance(value, str) and "{" in value):
            continue  # a placeholder is checked per cell, once substituted
        if isinstance(value, bool):
            number = None
        elif isinstance(value, int):
            number = value
        else:
            number = int(value) if isinstance(value, str) and value.strip().isdigit() else None
        if number is None or number < 1:
            raise ConfigError(f"{where}.{name}: {value!r} is not a positive whole number of arrivals per second")


def refuse(options: dict, where: str, reserved: set, key, command: str) -> None:
    """Refuse options dbsweep sets itself (compared as key(name)) and values that are not one scalar."""
    for name, value in options.items():
        if key(name) in reserved:
            raise ConfigError(f"{where}.{name}: {value!r} is set by dbsweep; remove it")
        if value is None or isinstance(value, (list, dict)):
            raise ConfigError(f"{where}.{name}: {value!r} is not a single value ({command} takes --{name}=<value>)")
