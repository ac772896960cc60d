"""Run-to-run noise with and without noise control: the same study twice, its repetitions interleaved.

Study (--cell database): InnoDB, sysbench oltp_read_only on 4 tables x 20,000 rows in a 256M buffer pool,
ext4 on a loop image, threads 1 and 2, a 5 s warm-up and a --seconds window; (--cell storage) fio
randread 4k psync on a 4M file in tmpfs, one thread, a --seconds window. It runs as `off` (no noise_control) and as
`on` (noise_control, by default drop_caches, thp never, cpu_pinning, or --on's; pinning needs 3 CPUs for a database
cell and is recorded "not applied" on this 2-CPU host; a storage cell's fio gets a CPU of its own, the monitors
the other), each in a folder of its own, from one copy of workflow/. The
repetitions are interleaved: for k = 1..--reps, each study runs again with `repetitions: k` (Snakemake
runs only the missing repetition k, then the analysis), off first for odd k, on first for even k, so
neither always runs on a warmer machine.

Reported per variant, from its summary page's own figure (dbsweep.answer.noise on results/tables):
run-to-run noise, the median over cells of the sd of their repetitions' medians relative to the median,
and the smallest difference it could detect; then per cell. Goal (issue 18): noise control halves it.

    .venv/bin/python bench/noise_control.py [--cell database|storage] [--reps 4] [--seconds 15] [--on JSON]
    .venv/bin/python bench/noise_control.py --smoke     # --cell storage, 2 repetitions of 2 s, the tables
                                                        # after the last only
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import env, leftovers, run, snakemake_argv, snapshot, table, tempdir, use_pipeline_code, write_yaml  # noqa: E402

CONTROL = {"drop_caches": True, "thp": "never", "cpu_pinning": True}
TABLES = ["results/tables/comparisons.csv", "results/tables/cell_stats.csv"]


def study(variant: str, reps: int, seconds: int, cell: str, control: dict = CONTROL) -> dict:
    if cell == "storage":
        config = {"axes": {"filesystem": ["tmpfs"], "threads": [1], "workload": ["fio-rr"]},
                  "filesystems": {"tmpfs": {"type": "tmpfs", "size": "64M"}},
                  "workloads": {"fio-rr": {"tool": "fio", "options": {
                      "rw": "randread", "bs": "4k", "size": "4M", "ioengine": "psync", "direct": 0,
                      "runtime": seconds}}}}
    else:
        config = {"axes": {"engine": ["innodb"], "memory": ["256M"], "filesystem": ["ext4"], "threads": [1, 2],
                           "workload": ["oltp-ro"]},
                  "filesystems": {"ext4": {"type": "ext4", "size": "2G", "mount_options": ["noatime"]}},
                  "workloads": {"oltp-ro": {"tool": "sysbench", "warmup": 5, "options": {
                      "script": "oltp_read_only", "tables": 4, "table_size": 20000, "time": seconds}}}}
    config |= {"study": f"noise-{variant}", "repetitions": reps}
    if variant == "on":
        config["noise_control"] = control
    return config


def cell_noise(tables: Path) -> list[list]:
    """Per cell (throughput metrics): repetitions, median and sd of the repetitions' medians, sd / median."""
    rows = []
    with open(tables / "cell_stats.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["metric"].startswith("lat") or row.get("rep_sd") in (None, "", "NA"):
                continue
            median, sd = float(row["median"]), float(row["rep_sd"])
            rows.append([row.get("threads", ""), row["metric"], row["reps"], median, sd,
                         f"{100 * sd / median:.1f}%" if median else "n/a"])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cell", choices=("database", "storage"), default="database")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--on", type=json.loads, default=CONTROL, metavar="JSON",
                    help=f"the `on` variant's noise_control (default {json.dumps(CONTROL)})")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="2 repetitions of a 2 s fio cell: does it still run")
    args = ap.parse_args()
    if args.smoke:
        args.cell, args.reps, args.seconds = "storage", 2, 2
    tmp = tempdir("noise-control", args.keep)
    tmp.chmod(0o755)  # the database server's user reaches its datadir under it
    workflow = snapshot(tmp)
    use_pipeline_code(workflow)
    from dbsweep import answer

    environ = env(tmp)
    print(f"temp dir: {tmp}", flush=True)
    walls = {"off": [], "on": []}
    for k in range(1, args.reps + 1):
        for variant in (("off", "on") if k % 2 else ("on", "off")):
            work = tmp / variant
            work.mkdir(exist_ok=True)
            write_yaml(work / "study.yaml", study(variant, k, args.seconds, args.cell, args.on))
            # the two tables the noise is read from (answer.noise), not the plots, the page and the report;
            # --smoke: only after the last repetition (what it checks is that they are made and read)
            targets = ["--until", "collect"] if args.smoke and k < args.reps else TABLES
            seconds, _ = run(snakemake_argv(work, "-c2", *targets, snakefile=workflow / "Snakefile"), work, environ,
                             log=work / f"log-{k}")
            walls[variant].append(seconds)
            print(f"repetition {k}: {variant} {seconds:.1f} s", flush=True)
    noise, cells = {}, []
    for variant in ("off", "on"):
        tables = tmp / variant / "results" / "tables"
        noise[variant] = answer.noise(tables / "comparisons.csv", tables / "cell_stats.csv")
        cells += [[variant, *row] for row in cell_noise(tables)]
        assert leftovers(tmp / variant) == [], leftovers(tmp / variant)
    off, on = noise["off"].run_to_run_pct, noise["on"].run_to_run_pct
    print(f"\n{args.cell} cells, {args.seconds} s windows, {args.reps} interleaved repetitions per variant; "
          f"noise control on: {json.dumps(args.on)}\n")
    print(table(["variant", "run-to-run noise", "smallest detectable difference", "cells"],
                [[v, f"{n.run_to_run_pct:.2f}%" if n.run_to_run_pct is not None else "n/a",
                  f"±{n.detectable_pct:.1f}%" if n.detectable_pct is not None else "n/a", n.cells_with_reps]
                 for v, n in noise.items()]))
    if off and on is not None:
        print(f"\non / off: {on / off:.2f} (goal: at most 0.5)")
    print("\nper cell:\n")
    print(table(["variant", "threads", "metric", "reps", "median", "sd of rep medians", "sd / median"], cells))


if __name__ == "__main__":
    main()
