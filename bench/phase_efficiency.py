"""How repeatable is CPU and IO per operation of an insert-benchmark phase: host-wide (vmstat, iostat each
second) against the server's own accounting (its process tree's /proc totals read at the phase's exact
start and end)?

Study: the insert benchmark (config/studies/insert-benchmark.yaml's workload, shortened so that load and
index last a second or two), one cell per engine (InnoDB and MyRocks), --reps repetitions of each: every
repetition is an identical cell (a fresh copy of the same prepared image, the same recipe). Run by the
real workflow (a copy of workflow/ taken at start; `snakemake -c2`, its default profile), target the
phases table only (results/tables/phases.csv.gz).

Per engine and phase, over the repetitions: the median of each figure and its spread, max/min - 1 and
the coefficient of variation (sd / mean), for CPU µs per operation (cpu_us_per_op, host-wide, against
server_cpu_us_per_op) and KB read and written per operation (kb_*_per_op against server_kb_*_per_op).
An operation is a row for load and index, a query for qr and qp. Goal: the server's figures within 5 %
(max/min - 1) for phases of a second or more. A figure whose values are all 0 (KB read with the data in
the page cache) has no spread: "0".

    .venv/bin/python bench/phase_efficiency.py [--reps 3] [--table-size 100000] [--time 3] [--threads 2]
                                               [--engines innodb myrocks postgresql]
    .venv/bin/python bench/phase_efficiency.py --smoke     # InnoDB, 2 reps of a tiny table: checks it still runs
"""
from __future__ import annotations

import argparse
import csv
import gzip
import itertools
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import env, leftovers, median, run, snakemake_argv, snapshot, table, tempdir, write_yaml  # noqa: E402

ENGINES = ("innodb", "myrocks", "postgresql")
PHASES = ("load", "index", "qr", "qp")
GOAL = 0.05
# (what, host-wide column, server column)
FIGURES = [("CPU µs/op", "cpu_us_per_op", "server_cpu_us_per_op"),
           ("KB read/op", "kb_read_per_op", "server_kb_read_per_op"),
           ("KB written/op", "kb_written_per_op", "server_kb_written_per_op")]


def study(engines: list[str], reps: int, table_size: int, seconds: int, threads: int = 2) -> dict:
    """config/studies/insert-benchmark.yaml's workload at rate 100, on smaller tables and shorter phases."""
    return {
        "study": "phase-efficiency",
        "repetitions": reps,
        "axes": {"engine": engines, "memory": ["256M"], "filesystem": ["ext4"], "threads": [threads],
                 "workload": ["ib"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "2G", "mount_options": ["noatime"]}},
        "workloads": {"ib": {"tool": "insert", "options": {
            "tables": 2, "table_size": table_size, "load_batch": 100, "insert_batch": 10, "insert_rate": 100,
            "range_size": 10, "data_length": 100, "time": seconds}}},
    }


def spread(values: list[float]) -> tuple[float | None, float | None]:
    """(max/min - 1, sd/mean); (0, 0) when all are 0; None where undefined (a 0 beside other values)."""
    if not values:
        return None, None
    if max(values) == 0:
        return 0.0, 0.0
    ratio = max(values) / min(values) - 1 if min(values) > 0 else None
    cv = statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0
    return ratio, cv


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def rows_of(path: Path) -> list[dict]:
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


def number(value: str) -> float | None:
    return float(value) if value not in ("", "NA", None) else None


def report(phases: list[dict], engines: list[str]) -> tuple[list[list], bool]:
    """The table's rows (engine, phase, figure) and whether the goal is met for phases of >= 1 s."""
    out, met = [], True
    for engine in engines:
        for phase in PHASES:
            got = [r for r in phases if r["engine"] == engine and r["phase"] == phase]
            if not got:
                continue
            seconds = median([float(r["seconds"]) for r in got])
            for what, host, server in FIGURES:
                h = [v for v in (number(r[host]) for r in got) if v is not None]
                s = [v for v in (number(r[server]) for r in got) if v is not None]
                (h_ratio, h_cv), (s_ratio, s_cv) = spread(h), spread(s)
                ok = s_ratio is not None and s_ratio <= GOAL and len(s) == len(got)
                if seconds >= 1 and not ok:
                    met = False
                out.append([engine, phase, f"{seconds:.2f}", len(got), what,
                            f"{median(h):.4g}" if h else "-", pct(h_ratio), pct(h_cv),
                            f"{median(s):.4g}" if s else "-", pct(s_ratio), pct(s_cv),
                            ("yes" if ok else "NO") if seconds >= 1 else "(< 1 s)"])
    return out, met


def per_rep(phases: list[dict], engines: list[str]) -> list[list]:
    """Each repetition's CPU figures, to see what the spread is made of."""
    out = []
    for engine in engines:
        for phase in PHASES:
            for r in sorted((r for r in phases if r["engine"] == engine and r["phase"] == phase),
                            key=lambda r: int(r["rep"])):
                out.append([engine, phase, r["rep"], f"{float(r['seconds']):.2f}"]
                           + [f"{v:.4g}" if v is not None else "-" for v in
                              (number(r[k]) for k in ("cpu_us_per_op", "server_cpu_us_per_op",
                                                      "server_kb_written_per_op"))])
    return out


def gaps(runs: Path) -> list[float]:
    """The seconds between one phase's end and the next one's start, in every repetition's phases.json:
    what runs between two phases (the engine status texts, the next client's start)."""
    out = []
    for path in runs.glob("**/raw/phases.json"):
        done = json.loads(path.read_text())
        out += [b["start"] - a["end"] for a, b in itertools.pairwise(done)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3, help="identical cells (repetitions) per engine")
    ap.add_argument("--table-size", type=int, default=100000, help="rows per table (2 tables)")
    ap.add_argument("--time", type=int, default=3, help="seconds of each rate-limited phase (qr, qp)")
    ap.add_argument("--threads", type=int, default=2, help="clients of load and index (qr, qp: twice as many)")
    ap.add_argument("--engines", nargs="+", default=["innodb", "myrocks"], choices=ENGINES)
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--live", action="store_true", help="run workflow/ itself, not a copy taken at start")
    ap.add_argument("--smoke", action="store_true", help="InnoDB, 2 reps of 2 x 5,000 rows, 1 s phases")
    args = ap.parse_args()
    if args.smoke:
        args.reps, args.table_size, args.time, args.engines = 2, 5000, 1, ["innodb"]
    tmp = tempdir("phase-efficiency", args.keep, "/var/tmp")  # the servers (mysql) must reach it
    tmp.chmod(0o755)
    environ = env(tmp)
    workflow = snapshot(tmp, args.live)
    work = tmp / "study"
    work.mkdir()
    work.chmod(0o755)
    write_yaml(work / "study.yaml", study(args.engines, args.reps, args.table_size, args.time, args.threads))
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    try:
        elapsed, _ = run(snakemake_argv(work, "-c2", "--workflow-profile", workflow / "profiles" / "default",
                                        "results/tables/phases.csv.gz", snakefile=workflow / "Snakefile"),
                         work, environ, tmp / "snakemake.txt")
    finally:
        if leftovers(tmp):
            print(f"WARNING: left behind: {leftovers(tmp)}", file=sys.stderr)
    phases = rows_of(work / "results" / "tables" / "phases.csv.gz")
    rows, met = report(phases, args.engines)
    print(f"{started}; {args.reps} identical cells per engine; 2 tables x {args.table_size} rows, "
          f"threads {args.threads}, "
          f"qr/qp {args.time} s at 100 inserts/s per client; workflow {elapsed:.0f} s; load average "
          f"before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, after "
          + " ".join(f"{v:.2f}" for v in os.getloadavg()) + "\n")
    print(table(["engine", "phase", "seconds", "reps", "figure", "host median", "host max/min-1", "host CV",
                 "server median", "server max/min-1", "server CV", f"server within {100 * GOAL:.0f}%"], rows))
    print()
    print(table(["engine", "phase", "rep", "seconds", "host CPU µs/op", "server CPU µs/op", "server KB written/op"],
                per_rep(phases, args.engines)))
    between = gaps(work / "results" / "runs")
    if between:
        print(f"\nbetween two phases: median {median(between):.3f} s, {min(between):.3f}-{max(between):.3f} s "
              f"({len(between)} gaps)")
    print(f"\ngoal (server's own figures within {100 * GOAL:.0f}% for phases of 1 s or more): "
          + ("met" if met else "NOT met"))
    if not args.keep:
        shutil.rmtree(work / "resources", ignore_errors=True)


if __name__ == "__main__":
    main()
