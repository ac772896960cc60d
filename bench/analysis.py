"""Statistics of 10 and 100 million per-second samples: time and peak memory of rule statistics (and its series).

Generates the long tables the aggregate step writes (summary.csv.gz, samples.csv.gz with every sample
column, and samples.parquet as aggregate converts it) for a synthetic study: --cells cells (engine x
memory x threads) x --reps repetitions x --seconds per-second samples each, with a warm-up ramp and a few
stalls. With --no-csv, samples.parquet is written straight from numpy in row groups (100 million samples:
the CSV and its conversion would not fit). Then, each timed (wall, CPU of the process and its children,
peak: the largest sum of their resident sets): rule statistics_series' step (dbsweep/statistics_series.py:
samples.parquet -> binary columns) and workflow/R's rule_statistics() on them with --cores processes: the
steady-state windows and stalls, per-cell statistics with the bootstrap CIs of both metrics, the ratio
tables of every axis. Goals (issue 37): under 20 s and 2 GB for 10 million; under 4 minutes and 8 GB for
100 million.

--pairs N also runs main's rule statistics (`git show main:workflow/R/...`, --cores processes as this tree's) N
times on the folder of main's series step (its format), interleaved with this tree's, prints the medians of both,
and stops unless every run's five tables are the same bytes.

--add-one: the one-cell addition. The study gains one cell (a copy of the first cell's samples under a memory
value of its own, appended as the last row group; one more summary row). Rule statistics runs on the study
and writes its cache (main's code and this tree's, each its own); then, on the study with the added cell,
--pairs times interleaved (at least once, this tree alone without --pairs): each code's series step and rule
statistics with its cache (the added cell computed, the others read back); this tree's series step also
with its own cache of the study's run (its row groups of the same bytes copied, not decoded again; main's
step had none). Every output must be the bytes of a full recompute (this tree without a cache, run once at
the end).

    .venv/bin/python bench/analysis.py [--cells 10000] [--seconds 1000] [--reps 1] [--pairs 0] [--cores 2]
    .venv/bin/python bench/analysis.py --samples 100000000 --no-csv --keep /tmp/analysis-100m   # 10,000 x 10,000 s
    .venv/bin/python bench/analysis.py --no-csv --add-one --pairs 3 --keep /tmp/analysis-10m   # one cell added
    .venv/bin/python bench/analysis.py --smoke     # 40 cells x 120 s: checks it still runs
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
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
library_dir <- args[1]; dir <- args[2]; input <- args[3]; out_dir <- file.path(args[5], input)
cache <- if (length(args) > 5 && nzchar(args[6])) args[6]  # rule statistics' cache folder (params cache)
options(dbsweep.plots = FALSE)  # as workflow/scripts/analysis.R for rule statistics: no ggplot2 (0.9 s of R's start)
source(file.path(library_dir, "library.R"), chdir = TRUE)
invisible(compiler::enableJIT(3L))  # as workflow/scripts/analysis.R for data over 2 MB
options(dbsweep.cores = as.integer(args[4]))  # as workflow/scripts/analysis.R: the rule's threads
axes <- c("engine", "memory", "filesystem", "threads", "workload")
out <- as.list(setNames(file.path(out_dir, c("steady_state.csv", "cell_stats.csv", "cell_stats.md",
                                             "comparisons.csv", "comparisons.md")),
                        c("steady_state", "cell_stats_csv", "cell_stats_md", "comparisons_csv",
                          "comparisons_md")))
dir.create(out_dir, recursive = TRUE, showWarnings = FALSE)
tables <- list(summary = file.path(dir, "summary.csv.gz"))
if (input == "series") tables$series <- file.path(dir, "series") else tables$samples <- file.path(dir, "samples.csv.gz")
rule_statistics(tables, out, list(axes = axes, baseline = list(), analysis = list(), cache = cache), log = NULL)
"""

def generate_parquet(cells: int, seconds: int, reps: int, folder: Path, cells_per_piece: int = 1000) -> int:
    """GENERATE's study (same cells, levels, ramp and stalls; its own random numbers) written straight to
    samples.parquet in row groups, and summary.csv.gz: no samples.csv.gz, whose writing and conversion (the
    aggregate step reads the whole CSV into memory) would not fit 100 million samples in this machine's
    time and memory. The number of samples."""
    import csv
    import gzip

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    engines, threads = ["innodb", "myrocks"], [2 ** i for i in range(10)]
    memory = [f"{64 * (i + 1)}M" for i in range(-(-cells // (len(engines) * len(threads))))]
    grid = [(e, m, t) for e in engines for m in memory for t in threads][:cells]
    rows = [(e, m, t, r) for e, m, t in grid for r in range(1, reps + 1)]
    levels = np.array([500 + 50 * ((i + 1) % 20) for i in range(len(rows))], dtype=float)
    with gzip.open(folder / "summary.csv.gz", "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(["engine", "memory", "filesystem", "threads", "workload", "rep", "tool", "kind", "per_second",
                    "duration_s", "seconds", "iops", "read_iops", "write_iops", "mibs", "fsyncs", "tps", "qps",
                    "transactions", "ignored_errors", "reconnects", "lat_mean_ms", "lat_p95_ms", "lat_p99_ms",
                    "lat_max_ms"])
        for (e, m, t, r), level in zip(rows, levels, strict=True):
            w.writerow([e, m, "xfs", t, "oltp", r, "sysbench", "database", 1, seconds, seconds, "", "", "", "", "",
                        level, 20 * level, level * seconds, 0, 0, 8, 12, 20, 90])
    rng = np.random.default_rng(1)
    second = np.arange(1, seconds + 1)
    ramp = np.minimum(1, 0.2 + second / 60)
    writer = None
    per_piece = cells_per_piece * reps
    for start in range(0, len(rows), per_piece):
        piece = rows[start:start + per_piece]
        n = len(piece) * seconds
        tps = np.repeat(levels[start:start + len(piece)], seconds) * np.tile(ramp, len(piece)) * rng.normal(1, 0.03, n)
        sec = np.tile(second, len(piece))
        tps[sec % 97 == 0] = 0
        nan = pa.nulls(n, pa.float64())  # no value: null, as aggregate's to_parquet reads an empty CSV field
        zero = np.zeros(n)
        axis = [pa.array(np.repeat([p[i] for p in piece], seconds), kind)
                for i, kind in enumerate((pa.string(), pa.string(), pa.int64(), pa.int64()))]
        table = pa.table({"engine": axis[0], "memory": axis[1], "filesystem": pa.array(np.full(n, "xfs")),
                          "threads": axis[2], "workload": pa.array(np.full(n, "oltp")),
                          "rep": axis[3], "second": pa.array(sec, pa.int64()),
                          "time": 1.7e9 + sec, "iops": nan, "mibs": nan, "tps": tps, "qps": 20 * tps,
                          "reads": 14 * tps, "writes": 4 * tps, "other": 2 * tps, "lat_ms": nan,
                          "lat_pct_ms": 8000 / np.maximum(tps, 1), "err_s": zero, "reconn_s": zero, "queue": zero})
        if writer is None:
            writer = pq.ParquetWriter(folder / "samples.parquet", table.schema, compression="zstd")
        writer.write_table(table)
    writer.close()
    return len(rows) * seconds


def with_one_more_cell(source: Path, folder: Path) -> None:
    """source's study (summary.csv.gz, samples.parquet) with one more cell in `folder`: the first cell's
    summary rows and samples under the memory value 1000000M (no other cell has it), its samples appended as
    the parquet's last row group, its summary rows as the last rows."""
    import gzip

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    lines = gzip.open(source / "summary.csv.gz", "rt").read().splitlines()
    header = lines[0].split(",")
    first = lines[1].split(",")
    at = [header.index(a) for a in AXES]
    added = [",".join(["1000000M" if h == "memory" else v for h, v in zip(header, r.split(","), strict=True)])
             for r in lines[1:] if [r.split(",")[i] for i in at] == [first[i] for i in at]]
    with gzip.open(folder / "summary.csv.gz", "wt") as f:
        f.write("\n".join([*lines, *added]) + "\n")
    parquet = pq.ParquetFile(source / "samples.parquet")
    with pq.ParquetWriter(folder / "samples.parquet", parquet.schema_arrow, compression="zstd") as writer:
        for i in range(parquet.num_row_groups):
            writer.write_table(parquet.read_row_group(i))
        table = parquet.read_row_group(0)
        mask = None
        for axis, value in zip(AXES, first[:len(AXES)], strict=True):
            column = table.column(axis)
            same = pc.equal(pc.cast(column, "string"), value)
            mask = same if mask is None else pc.and_(mask, same)
        cell = table.filter(mask)
        memory = cell.schema.get_field_index("memory")
        added = pa.array(["1000000M"] * cell.num_rows).cast(cell.schema.field("memory").type)
        writer.write_table(cell.set_column(memory, "memory", added))


SERIES = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from dbsweep.statistics_series import write_series
cache = {"cache": Path(sys.argv[3])} if len(sys.argv) > 3 else {}  # main's code of before has no cache
write_series(Path(sys.argv[2]) / "samples.parquet", ["engine", "memory", "filesystem", "threads", "workload"],
             Path(sys.argv[2]) / "series", **cache)
"""

AXES = ["engine", "memory", "filesystem", "threads", "workload"]


def timed(argv: list) -> dict:
    """Wall and CPU seconds of one command and its child processes (the forked R processes of rule statistics'
    chunks); peak: the largest sum of their proportional set sizes (GiB: a page a fork shares with its parent
    counts once, split between them), sampled every PEAK_POLL_S; its stdout."""
    import psutil

    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        top = psutil.Process(proc.pid)
        peak = 0
        while proc.poll() is None:
            try:
                tree = [top, *top.children(recursive=True)]
                peak = max(peak, sum(p.memory_full_info().pss for p in tree))
            except psutil.Error:
                pass
            time.sleep(PEAK_POLL_S)
        wall = time.perf_counter() - start
        out.seek(0)
        text = out.read().decode(errors="replace")
    if proc.returncode:
        raise SystemExit(text[-6000:])
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - CHILDREN_CPU[0]
    CHILDREN_CPU[0] = usage.ru_utime + usage.ru_stime
    return {"wall": wall, "cpu": cpu, "peak": peak / 2**30, "out": text}


CHILDREN_CPU = [0.0]  # CPU seconds of the children waited for so far (getrusage adds them up)
# Reading a process's PSS walks its page tables under its memory map's lock, which stalls the process's own
# mmap and munmap (R's large vectors): every 50 ms it added about 4 s to a 20 s rule statistics at 10 M samples.
PEAK_POLL_S = 0.5


def this_tree(workflow: Path, data: Path, tmp: Path, out: Path, cores: int) -> dict:
    """Rule statistics_series' step, then rule statistics on its output (its tables into out/series): summed wall
    and CPU, larger peak."""
    series = timed([sys.executable, "-c", SERIES, str(workflow), str(data)])
    stats = rule(tmp, workflow / "R", data, out, cores)
    return {"wall": series["wall"] + stats["wall"], "cpu": series["cpu"] + stats["cpu"],
            "peak": max(series["peak"], stats["peak"]), "out": stats["out"], "rule": stats, "tables": out,
            "parts": f"series {series['wall']:.1f} s wall / {series['cpu']:.1f} s CPU / {series['peak']:.2f} GiB"}


TABLES = ("steady_state.csv", "cell_stats.csv", "cell_stats.md", "comparisons.csv", "comparisons.md")


def same_tables(runs: list[Path]) -> None:
    """Stops unless every run's five tables (folder/series/...) are the bytes of the first run's."""
    import filecmp

    for folder in runs[1:]:
        for table in TABLES:
            if not filecmp.cmp(folder / "series" / table, runs[0] / "series" / table, shallow=False):
                raise SystemExit(f"{table}: {folder.name} differs from {runs[0].name}")


def rule(tmp: Path, library: Path, data: Path, out: Path, cores: int, cache: Path | None = None) -> dict:
    """timed() rule statistics (tmp/analyse.R, the R library `library`) on data's series folder, its outputs
    into out/series, with the cache folder `cache` (or none)."""
    return timed(["Rscript", str(tmp / "analyse.R"), str(library), str(data), "series", str(cores), str(out),
                  str(cache or "")])


def add_one(workflow: Path, data: Path, tmp: Path, args) -> None:
    """--add-one: the analysis of the study with one more cell, each code with its cache of the study's run.
    With --pairs N: N interleaved pairs of main's code (its series step and rule statistics, its cache) and
    this tree's; without, this tree's alone, once. Then one full recompute (this tree, no cache): every run
    with a cache must give its bytes."""
    import filecmp
    import shutil

    plus = Path(f"{data}-plus-one") if args.keep else tmp / "plus-one"  # without --keep: removed with tmp
    if not (plus / "samples.parquet").exists():
        with_one_more_cell(data, plus)
    codes = {"this tree": (workflow, workflow / "R")}
    if args.pairs:
        codes = {"main": main_code(tmp), **codes}
    for name, (python, library) in codes.items():  # each code's cache of the study, on its own series step
        timed([sys.executable, "-c", SERIES, str(python), str(data), *series_cache(tmp, name, python, workflow)])
        rule(tmp, library, data, tmp / f"out-study-{slug(name)}", args.cores, tmp / f"cache-{slug(name)}")
    load = os.getloadavg()
    runs: dict[str, list] = {name: [] for name in codes}
    for i in range(max(args.pairs, 1)):
        for name, (python, library) in codes.items():
            cache = tmp / f"cache-{slug(name)}"
            shutil.rmtree(tmp / "cache", ignore_errors=True)
            shutil.copytree(cache, tmp / "cache")  # each run starts from the study's caches
            study_series = series_cache(tmp, name, python, workflow)
            if study_series:
                shutil.rmtree(tmp / "series-cache", ignore_errors=True)
                shutil.copytree(study_series[0], tmp / "series-cache")
            series = timed([sys.executable, "-c", SERIES, str(python), str(plus),
                            *([str(tmp / "series-cache")] if study_series else [])])
            out = tmp / f"out-{slug(name)}-{i}"
            stats = rule(tmp, library, plus, out, args.cores, tmp / "cache")
            runs[name].append({"series": series, "rule": stats, "out": out,
                               "wall": series["wall"] + stats["wall"], "cpu": series["cpu"] + stats["cpu"],
                               "peak": max(series["peak"], stats["peak"])})
    full = rule(tmp, workflow / "R", plus, tmp / "out-full", args.cores)
    for name, done in runs.items():
        for r in done:
            for table in TABLES:
                if not filecmp.cmp(r["out"] / "series" / table, tmp / "out-full" / "series" / table, shallow=False):
                    raise SystemExit(f"{table}: {name} with its cache differs from the full recompute")
    cells = sum(1 for _ in open(data / "series" / "cells.csv")) - 1
    print("| one cell added to | code | runs | part | wall time (median) | CPU (user + sys) | peak PSS | load avg |")
    print("|---|---|---|---|---|---|---|---|")
    for name, done in runs.items():
        for part, pick in (("series step + rule statistics", lambda r: r),
                           ("series step", lambda r: r["series"]), ("rule statistics", lambda r: r["rule"])):
            wall, cpu, peak = (statistics.median(pick(r)[k] for r in done) for k in ("wall", "cpu", "peak"))
            print(f"| {cells:,} cells | {name} | {len(done)} | {part} | {wall:.1f} s | {cpu:.1f} s | {peak:.2f} GiB "
                  f"| {load[0]:.1f} -> {os.getloadavg()[0]:.1f} |")
    print(f"| {cells:,} cells | this tree, no cache (full recompute) | 1 | rule statistics | {full['wall']:.1f} s "
          f"| {full['cpu']:.1f} s | {full['peak']:.2f} GiB | |")
    print(f"\nevery run with a cache: the same bytes as the full recompute ({sum(map(len, runs.values()))} runs)")
    for name, done in runs.items():
        print(f"R's own log ({name} with its cache, last run):")
        for line in done[-1]["rule"]["out"].splitlines():
            print("   ", line)


def series_cache(tmp: Path, name: str, python: Path, workflow: Path) -> list[str]:
    """The series step's cache folder of code `name` as SERIES' argument (none for main's code, python not
    this tree's: before the step had one)."""
    return [str(tmp / f"series-cache-{slug(name)}")] if python == workflow else []


def slug(name: str) -> str:
    return name.replace(" ", "-")


def main_code(tmp: Path) -> tuple[Path, Path]:
    """(folder with main's dbsweep/statistics_series.py, main's workflow/R): the code of branch main."""
    folder = tmp / "main-py"
    (folder / "dbsweep").mkdir(parents=True)
    (folder / "dbsweep" / "__init__.py").write_text("")
    text = subprocess.run(["git", "show", "main:workflow/dbsweep/statistics_series.py"], cwd=ROOT, check=True,
                          capture_output=True).stdout
    (folder / "dbsweep" / "statistics_series.py").write_bytes(text)
    return folder, main_tree(tmp)


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
    parser.add_argument("--samples", type=int, help="per-second samples in all: sets --seconds to it / (cells x reps)")
    parser.add_argument("--cores", type=int, default=2, help="R processes of rule statistics (its threads)")
    parser.add_argument("--no-csv", action="store_true",
                        help="write samples.parquet straight from numpy (generate_parquet), no samples.csv.gz: "
                             "for 100 million samples")
    parser.add_argument("--keep", type=Path, help="generate into this folder, or reuse what it holds")
    parser.add_argument("--live", action="store_true", help="run workflow/ itself, not a copy")
    parser.add_argument("--smoke", action="store_true", help="40 cells x 1 repetition x 120 s: does it still run")
    parser.add_argument("--add-one", action="store_true", help="one cell added: rule statistics with its cache and "
                        "without (see above)")
    args = parser.parse_args()
    if args.smoke:
        args.cells, args.seconds, args.reps = 40, 120, 1
    if args.samples:
        args.seconds = args.samples // (args.cells * args.reps)
    tmp = tempdir("analysis")
    workflow = snapshot(tmp, args.live)
    data = args.keep or tmp
    data.mkdir(parents=True, exist_ok=True)
    (tmp / "generate.R").write_text(GENERATE)
    (tmp / "analyse.R").write_text(ANALYSE)
    sys.path.insert(0, str(workflow))
    if (data / "samples.parquet").exists():
        rows = int((data / "rows.txt").read_text())
    elif args.no_csv:
        rows = generate_parquet(args.cells, args.seconds, args.reps, data)
    else:
        rows = int(subprocess.run(["Rscript", str(tmp / "generate.R"), str(args.cells), str(args.seconds),
                                   str(args.reps), str(data)], check=True, capture_output=True, text=True).stdout)
        from dbsweep.aggregate import to_parquet  # what rule aggregate writes beside samples.csv.gz
        to_parquet(data / "samples.csv.gz", data / "samples.parquet", AXES)
    (data / "rows.txt").write_text(f"{rows}\n")
    size = (data / "samples.parquet").stat().st_size
    if args.add_one:
        add_one(workflow, data, tmp, args)
        return
    load = os.getloadavg()
    before, after = [], []
    old = main_code(tmp) if args.pairs else None
    for i in range(max(args.pairs, 1)):
        after.append(this_tree(workflow, data, tmp, tmp / f"out-this-tree-{i}", args.cores))
        if old:  # main's rule on main's series step (its folder's format), as many processes
            timed([sys.executable, "-c", SERIES, str(old[0]), str(data)])
            out = tmp / f"out-main-{i}"
            before.append(rule(tmp, old[1], data, out, args.cores) | {"tables": out})
    same_tables([r["tables"] for r in after + before])
    goal = "< 20 s, < 2 GB" if rows <= 10_500_000 else "< 4 min, < 8 GB" if rows <= 105_000_000 else "-"
    print("| samples | cells x reps x seconds | code | runs | wall time (median) | CPU (user + sys) | peak PSS "
          "| load avg | goal |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, runs in (("main (rule statistics)", before), ("this tree (statistics_series + statistics)", after),
                       ("this tree (rule statistics)", [r["rule"] for r in after])):
        if not runs:
            continue
        print(f"| {int(rows):,} | {args.cells:,} x {args.reps} x {args.seconds:,} | {name} | {len(runs)} "
              f"| {statistics.median(r['wall'] for r in runs):.1f} s "
              f"| {statistics.median(r['cpu'] for r in runs):.1f} s "
              f"| {statistics.median(r['peak'] for r in runs):.2f} GiB "
              f"| {load[0]:.1f} -> {os.getloadavg()[0]:.1f} | {goal} |")
    print()
    print(f"samples.parquet {size / 2**20:.0f} MiB; this tree's last run: {after[-1]['parts']}")
    print(f"every run's tables: the same bytes ({len(after) + len(before)} runs, {', '.join(TABLES)})")
    print("R's own log (this tree, last run):")
    for line in after[-1]["out"].splitlines():
        print("   ", line)


if __name__ == "__main__":
    main()
