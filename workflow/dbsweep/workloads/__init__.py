"""Workload adapters, one module per tool.

Each module exposes TOOL, check, dataset, prepare, command, samples, summary and
version (see fio.py); adding a tool is one module plus its name in TOOLS and in
the schema's `tool` enum.
"""
from importlib import import_module

TOOLS = {"fio": "fio", "sysbench-fileio": "sysbench_fileio", "sysbench": "sysbench_oltp"}
DATABASE_TOOLS = {"sysbench"}  # tools that run against a database server


def module(tool: str):
    return import_module(f"dbsweep.workloads.{TOOLS[tool]}")


def duration(tool: str, options: dict) -> int | None:
    """The measured window in seconds, as configured (warm-up excluded)."""
    if tool == "fio":
        value = options.get("runtime")
    else:  # sysbench runs 10 s unless told otherwise
        value = options.get("time", 10)
    return None if value is None else int(str(value).rstrip("s"))
