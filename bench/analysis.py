"""Statistics of 10 million per-second samples: time and peak memory of rule statistics (and its series).

Generates the long tables the aggregate step writes (summary.csv.gz, samples.csv.gz with every sample
column, and samples.parquet as aggregate converts it) for a synthetic study: --cells cells (engine x
memory x threads) x --reps repetitions x --seconds per-second samples each, with a warm-up ramp and a few
stalls. Then, each under /usr/bin/time (wall, CPU, peak RSS): rule statistics_series' step
(dbsweep/statistics_series.py: samples.parquet -> binary columns) and workflow/R's rule_statistics() on
them: the steady-state windows and stalls, per-cell statistics with the bootstrap CIs of both metrics, the
ratio tables of every axis. The row gives their sums (peak: the larger). Goal (issue 37): under 20 s and
2 GB for 10 million.

--pairs N also runs main's code (`git show main:workflow/R/...`, which reads samples.csv.gz) N times,
interleaved with this tree's, and prints the medians of both.

    .venv/bin/python bench/analysis.py [--cells 10000] [--seconds 1000] [--reps 1] [--pairs 0]
    .venv/bin/python bench/analysis.py --smoke     # 40 cells x 120 s: checks it still runs
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, snapshot, tempdir

GENERATE = r"""
suppressPackageStartupMessages(library(data.table))
args <- commandArgs(TRUE)
cells <- as.integer(args[1]); seconds <- as.integer(args[2]); reps <- as.integer(args[3]); dir <- args[4]
set.seed(1)
engines <- c("innodb", "myrocks")
threads <- 2L^(0:9)
memory <- paste0(seq_len(ceiling(cells / (length(engines) * length(threads)))) * 64L, "M")
grid <- CJ(engine = engines, memory = memory, threads = threads, sorted = FALSE)[seq_len(cells)]
grid[, `:=`(filesystem = "xfs", workload = "oltp")]
grid <- grid[rep(seq_len(.N), each = reps)][, rep := rowid(engine, memory, threads)]
grid[, level := 500 + 50 * (.I %% 20)]
summary <- grid[, .(engine, memory, filesystem, threads, workload, rep, tool = "sysbench", kind = "database",
                    per_second = 1L,
                    duration_s = seconds, seconds = seconds, iops = NA, read_iops = NA,
                    write_iops = NA, mibs = NA, fsyncs = NA, tps = level, qps = 20 * level,
                    transactions = level * seconds, ignored_errors = 0, reconnects = 0,
                    lat_mean_ms = 8, lat_p95_ms = 12, lat_p99_ms = 20, lat_max_ms = 90)]
fwrite(summary, file.path(dir, "summary.csv.gz"))
n <- nrow(grid) * seconds
s <- grid[rep(seq_len(.N), each = seconds), .(engine, memory, filesystem, threads, workload, rep, level)]
s[, second := rep(seq_len(seconds), nrow(grid))]
s[, tps := level * pmin(1, 0.2 + second / 60) * rnorm(n, 1, 0.03)]
s[second %% 97L == 0L, tps := 0]
s[, `:=`(time = 1.7e9 + second, iops = NA_real_, mibs = NA_real_, qps = 20 * tps, reads = 14 * tps,
         writes = 4 * tps, other = 2 * tps, lat_ms = NA_real_, lat_pct_ms = 8000 / pmax(tps, 1),
         err_s = 0, reconn_s = 0, queue = 0, level = NULL)]
setcolorder(s, c("engine", "memory", "filesystem", "threads", "workload", "rep", "second", "time"))
fwrite(s, file.path(dir, "samples.csv.gz"))
cat(nrow(s), "\n")
"""

ANALYSE = r"""
args <- commandArgs(TRUE)
library_dir <- args[1]; dir <- args[2]; input <- args[3]
source(file.path(library_dir, "library.R"), chdir = TRUE)
invisible(compiler::enableJIT(3L))  # as workflow/scripts/analysis.R for data over 2 MB
axes <- c("engine", "memory", "filesystem", "threads", "workload")
out <- as.list(setNames(file.path(dir, input, c("steady_state.csv", "cell_stats.csv", "cell_stats.md",
                                                "comparisons.csv", "comparisons.md")),
                        c("steady_state", "cell_stats_csv", "cell_stats_md", "comparisons_csv",
                          "comparisons_md")))
dir.create(file.path(dir, input), showWarnings = FALSE)
tables <- list(summary = file.path(dir, "summary.csv.gz"))
if (input == "series") tables$series <- file.path(dir, "series") else tables$samples <- file.path(dir, "samples.csv.gz")
rule_statistics(tables, out, list(axes = axes, baseline = list(), analysis = list()), log = NULL)
"""

SERIES = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from dbsweep.statistics_series import write_series
write_series(Path(sys.argv[2]) / "samples.parquet", ["engine", "memory", "filesystem", "threads", "workload"],
             Path(sys.argv[2]) / "series")
"""

AXES = ["engine", "memory", "filesystem", "threads", "workload"]


def timed(argv: list) -> dict:
    """Wall and CPU seconds and peak RSS (GiB) of one command under /usr/bin/time -v; its stdout."""
    done = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", done.stderr)[1]
    parts = [float(p) for p in wall.split(":")]
    cpu = sum(float(re.search(rf"{kind} time \(seconds\): (\S+)", done.stderr)[1]) for kind in ("User", "System"))
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)[1])
    return {"wall": sum(p * 60 ** i for i, p in enumerate(reversed(parts))), "cpu": cpu, "peak": peak_kb / 2**20,
            "out": done.stdout}


def this_tree(workflow: Path, tmp: Path) -> dict:
    """Rule statistics_series' step, then rule statistics on its output: summed wall and CPU, larger peak."""
    series = timed([sys.executable, "-c", SERIES, str(workflow), str(tmp)])
    stats = timed(["Rscript", str(tmp / "analyse.R"), str(workflow / "R"), str(tmp), "series"])
    return {"wall": series["wall"] + stats["wall"], "cpu": series["cpu"] + stats["cpu"],
            "peak": max(series["peak"], stats["peak"]), "out": stats["out"],
            "parts": f"series {series['wall']:.1f} s wall / {series['cpu']:.1f} s CPU / {series['peak']:.2f} GiB"}


def main_tree(tmp: Path) -> Path:
    """workflow/R as on branch main (git show), for the before of --pairs."""
    folder = tmp / "main-R"
    folder.mkdir()
    names = subprocess.run(["git", "ls-tree", "--name-only", "main", "workflow/R/"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    for name in names:
        text = subprocess.run(["git", "show", f"main:{name}"], cwd=ROOT, check=True, capture_output=True).stdout
        (folder / Path(name).name).write_bytes(text)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", type=int, default=10_000)
    parser.add_argument("--seconds", type=int, default=1_000)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=0, help="interleaved runs of main's code and this tree's")
    parser.add_argument("--live", action="store_true", help="run workflow/ itself, not a copy")
    parser.add_argument("--smoke", action="store_true", help="40 cells x 1 repetition x 120 s: does it still run")
    args = parser.parse_args()
    if args.smoke:
        args.cells, args.seconds, args.reps = 40, 120, 1
    tmp = tempdir("analysis")
    workflow = snapshot(tmp, args.live)
    (tmp / "generate.R").write_text(GENERATE)
    (tmp / "analyse.R").write_text(ANALYSE)
    rows = subprocess.run(["Rscript", str(tmp / "generate.R"), str(args.cells), str(args.seconds),
                           str(args.reps), str(tmp)], check=True, capture_output=True, text=True).stdout
    sys.path.insert(0, str(workflow))
    from dbsweep.aggregate import to_parquet  # what rule aggregate writes beside samples.csv.gz
    to_parquet(tmp / "samples.csv.gz", tmp / "samples.parquet", AXES)
    size = (tmp / "samples.csv.gz").stat().st_size
    load = os.getloadavg()
    before, after = [], []
    old = main_tree(tmp) if args.pairs else None
    for _ in range(max(args.pairs, 1)):
        if old:
            before.append(timed(["Rscript", str(tmp / "analyse.R"), str(old), str(tmp), "samples"]))
        after.append(this_tree(workflow, tmp))
    print("| samples | cells x reps x seconds | code | runs | wall time (median) | CPU (user + sys) | peak RSS "
          "| load avg | goal |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, runs in (("main (samples.csv.gz)", before), ("this tree (series)", after)):
        if not runs:
            continue
        print(f"| {int(rows):,} | {args.cells:,} x {args.reps} x {args.seconds:,} | {name} | {len(runs)} "
              f"| {statistics.median(r['wall'] for r in runs):.1f} s "
              f"| {statistics.median(r['cpu'] for r in runs):.1f} s "
              f"| {statistics.median(r['peak'] for r in runs):.2f} GiB "
              f"| {load[0]:.1f} -> {os.getloadavg()[0]:.1f} | < 20 s, < 2 GB |")
    print()
    print(f"samples.csv.gz {size / 2**20:.0f} MiB; this tree's last run: {after[-1]['parts']}")
    print("R's own log (this tree, last run):")
    for line in after[-1]["out"].splitlines():
        print("   ", line)


if __name__ == "__main__":
    main()
