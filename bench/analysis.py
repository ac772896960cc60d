"""Statistics of 10 million per-second samples: time and peak memory of rule statistics' R script.

Generates the long tables the aggregate step writes (summary.csv.gz, samples.csv.gz with every sample
column) for a synthetic study: --cells cells (engine x memory x threads) x --reps repetitions x
--seconds per-second samples each, with a warm-up ramp and a few stalls; then runs
workflow/R's rule_statistics() on them under /usr/bin/time (wall time and peak RSS): reading
the gzipped table, the steady-state windows and stalls, per-cell statistics with the bootstrap CIs of
both metrics, the ratio tables of every axis. Goal (issue 6): under 60 s and 4 GB for 10 million.

    .venv/bin/python bench/analysis.py [--cells 10000] [--seconds 1000] [--reps 1]
    .venv/bin/python bench/analysis.py --smoke     # 40 cells x 120 s: checks it still runs
"""
from __future__ import annotations

import argparse
import os
import re
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
summary <- grid[, .(engine, memory, filesystem, threads, workload, rep, tool = "sysbench", kind = "database", per_second = 1L,
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
library_dir <- args[1]; dir <- args[2]
source(file.path(library_dir, "library.R"), chdir = TRUE)
axes <- c("engine", "memory", "filesystem", "threads", "workload")
out <- as.list(setNames(file.path(dir, c("steady_state.csv", "cell_stats.csv", "cell_stats.md",
                                         "comparisons.csv", "comparisons.md")),
                        c("steady_state", "cell_stats_csv", "cell_stats_md", "comparisons_csv",
                          "comparisons_md")))
rule_statistics(list(summary = file.path(dir, "summary.csv.gz"), samples = file.path(dir, "samples.csv.gz")),
     out, list(axes = axes, baseline = list(), analysis = list()), log = NULL)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", type=int, default=10_000)
    parser.add_argument("--seconds", type=int, default=1_000)
    parser.add_argument("--reps", type=int, default=1)
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
    size = (tmp / "samples.csv.gz").stat().st_size
    load = os.getloadavg()
    done = subprocess.run(["/usr/bin/time", "-v", "Rscript", str(tmp / "analyse.R"), str(workflow / "R"),
                           str(tmp)], capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", done.stderr)[1]
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)[1])
    cpu = sum(float(re.search(rf"{kind} time \(seconds\): (\S+)", done.stderr)[1]) for kind in ("User", "System"))
    parts = [float(p) for p in wall.split(":")]
    seconds = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    print("| samples | cells x reps x seconds | samples.csv.gz | wall time | CPU (user + sys) | peak RSS | load avg | goal |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {int(rows):,} | {args.cells:,} x {args.reps} x {args.seconds:,} | {size / 2**20:.0f} MiB "
          f"| {seconds:.1f} s | {cpu:.1f} s | {peak_kb / 2**20:.2f} GiB | {load[0]:.1f} -> {os.getloadavg()[0]:.1f} "
          f"| < 60 s, < 4 GiB |")
    print()
    print("R's own log:")
    for line in done.stdout.splitlines():
        print("   ", line)


if __name__ == "__main__":
    main()
