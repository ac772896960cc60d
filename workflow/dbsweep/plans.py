"""A query plan's shape, and its fingerprint: what tells whether two cells ran the same plan.

The server's JSON plan (MariaDB's ANALYZE / EXPLAIN FORMAT=JSON, PostgreSQL's EXPLAIN (FORMAT JSON), with or
without ANALYZE and BUFFERS) holds the plan's shape beside figures that change from one run of the same plan
to the next: the optimizer's estimates (costs, rows, widths, filtered), what the run measured (times, rows,
loops, buffers and blocks, memory and disk, hash buckets and batches, sort methods) and how long planning took.
The shape is what is left without those: node and access types, tables, indexes and key parts, conditions,
join order (the order of the lists) and join algorithms and buffer types. A figure is known by its key's name,
the same way in both families' formats, so a plan by ANALYZE and the same plan by EXPLAIN have one shape.

A key that is not a figure stays: a new kind of node or field then counts as a difference of plans, which is
the safe mistake (cells said to have run another plan keep their verdict; "same plan" must never be said of
two plans that differ).
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

FINGERPRINT_LENGTH = 12  # hex digits of the shape's sha256: short enough for a table column
FIGURE = re.compile(
    r"^r_"  # MariaDB's ANALYZE: what the run did (r_rows, r_loops, r_total_time_ms, r_engine_stats, ...)
    r"|cost"  # estimates: MariaDB cost, query_cost, MySQL cost_info; PostgreSQL Startup / Total Cost
    r"|(?<![a-z])(rows|loops|time|width)(?![a-z])"  # Plan Rows, Actual Rows, rows, Actual Loops, Planning Time
    r"|_ms$|filtered|selectivity|blocks|buffer_size|memory|disk|batches|buckets|^planned partitions$"
    r"|^sort (method|space)|sort groups$|heap fetches|^workers( launched)?$|^cache (hits|misses|evictions|"
    r"overflows)$|^wal |^i/o |^planning$|^triggers$|^jit$",
    re.IGNORECASE)


def shape(plan):
    """plan (parsed JSON) without its figures (FIGURE: by key, at any depth); an object or list left empty by
    that is left out too, so that what only ANALYZE adds (MariaDB's query_optimization) leaves nothing."""
    if isinstance(plan, dict):
        out = {}
        for key, value in plan.items():
            if FIGURE.search(key):
                continue
            kept = shape(value)
            if kept in ({}, []) and value not in ({}, []):
                continue
            out[key] = kept
        return out
    if isinstance(plan, list):
        return [shape(item) for item in plan]
    return plan


def fingerprint(text: str) -> str:
    """The fingerprint of a plan given as the server's JSON text: the first FINGERPRINT_LENGTH hex digits of
    the sha256 of its shape (keys sorted, so that only order within lists counts: join order, child plans)."""
    canonical = json.dumps(shape(json.loads(text)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:FINGERPRINT_LENGTH]


COLUMNS = ["query", "statement", "fingerprint", "seconds", "file"]  # a workload's plans table (plans.csv.gz)


def table_row(rawdir: Path, query: str, statement: str, seconds: float, file: str) -> dict:
    """A row of the plans table: the query (or statement) it is the plan of, the statement that asked for it
    (ANALYZE or EXPLAIN), its fingerprint, the seconds it took and its file, relative to the results folder
    (runs/<cell>/...) when it lies in one, else to the raw folder."""
    path = Path(rawdir) / file
    runs = [i for i, part in enumerate(path.parts) if part == "runs"]
    return {"query": query, "statement": statement, "fingerprint": fingerprint(path.read_text()),
            "seconds": seconds, "file": str(Path(*path.parts[runs[-1]:])) if runs else file}
