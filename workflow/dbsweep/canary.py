"""The canary (noise_control.canary): one fixed cell, the study's first, run again and again while the study
runs, so that drift of the host (a neighbour, heat, a slower disk) shows as a series of its own rather than
as a difference between cells.

Canary run j (results/canary/<first cell>/rep~j/run.json, rule canary in rules/run.smk) comes after
(j - 1) x every repetitions of the study: the first before any, then one after every `every`, and the last
after the study's last. The order
is Snakemake's priorities (study.Study.priority, canary_priority): with a canary every measuring job
has its own place, the repetitions in the interleaved order (or cell by cell without interleave) and each
canary between two of them. Its table, results/tables/canary.csv, has one row per canary run: when it
measured, after how many repetitions, and its throughput; the summary page states the drift, max / min - 1
of that throughput over the study.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

from dbsweep import workloads
from dbsweep.recipe import Recipe

ROOT = "results/canary"
COLUMNS = ["canary", "after", "time", "metric", "throughput"]
# The summary's figure a canary compares, the first a workload's summary has: transactions, operations,
# IO requests per second.
METRICS = ("tps", "qps", "iops")


def count(total: int, every: int) -> int:
    """Canary runs of a study of `total` measuring jobs: one before the first, one after every `every`, and
    one after the last."""
    return -(-total // every) + 1


def after(j: int, every: int, total: int) -> int:
    """How many of the study's runs come before canary run j (from 1)."""
    return min((j - 1) * every, total)


def rows(run_jsons: list[Path], every: int, total: int) -> list[dict]:
    """One row per canary run.json (results/canary/<cell>/rep~j/run.json), in the order they ran."""
    out = []
    for path in run_jsons:
        record = json.loads(Path(path).read_text())
        tool = workloads.get(Recipe.from_dict(record["recipe"]).tool)
        final = tool.summary(Path(path).parent / record["attempt"] / "raw")
        metric = next((m for m in METRICS if final.get(m) is not None), None)
        out.append({"canary": record["rep"], "after": after(record["rep"], every, total),
                    "time": round(record["measure_start"], 3), "metric": metric,
                    "throughput": final.get(metric) if metric else None})
    return sorted(out, key=lambda row: row["time"])


def write(run_jsons: list[Path], every: int, total: int, out: Path) -> None:
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows(run_jsons, every, total))


def drift(values: list[float]) -> float | None:
    """max / min - 1 of the canary's throughput, None with fewer than two runs (or a zero)."""
    values = [v for v in values if v is not None]
    if len(values) < 2 or min(values) <= 0:
        return None
    return max(values) / min(values) - 1


def line(table: Path) -> str:
    """The summary's sentence about the canary, from canary.csv; empty without one."""
    if not table.exists():
        return ""
    with open(table, newline="") as f:
        table_rows = list(csv.DictReader(f))
    values = [float(r["throughput"]) for r in table_rows if r["throughput"] not in ("", None)]
    d = drift(values)
    metric = table_rows[0]["metric"] if table_rows else "throughput"
    if d is None:
        return f"Canary: {len(values)} run(s), too few to show drift (results/tables/canary.csv)."
    return (f"Canary drift: {d * 100:.1f} % ({metric} max / min - 1 over {len(values)} runs of the study's first "
            f"cell, {min(values):,.0f} to {max(values):,.0f}; results/tables/canary.csv).")
