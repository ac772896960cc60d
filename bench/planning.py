"""Dry-run (`snakemake -n`) time of the real workflow vs a bare Snakefile with the same jobs.

For each size (cells), a study in a temp dir: filesystem [tmpfs], threads 1..10,
a user axis with cells/10 values, one fio workload, repetitions 1, so no prepare
images. The bare Snakefile has the same rules, paths, job counts and
input/output/log/params/resources shape (run -> collect per cell, aggregate,
tables + plots, all), built with expand() and wildcards and no dbsweep code.

The real workflow is a copy of workflow/ taken at start (--live: workflow/
itself). Both are run with the same flags (`--workflow-profile none -n -c1`, cwd = their
temp dir), interleaved real, bare, real, bare ..., after one untimed warm-up
of each before the first size. Goal: real / bare <= 1.3.

    .venv/bin/python bench/planning.py [--sizes 1000 10000] [--repeats 5] [--large-repeats 3] [--profile]

--profile: run the real workflow once more under cProfile for the smallest
size and print where the time goes (also done by itself when the ratio is above
the goal).
"""
from __future__ import annotations

import argparse
import io
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (PYTHON, SNAKEMAKE, env, job_counts, median, run, snakemake_argv, snapshot,  # noqa: E402
                    table, tempdir, write_yaml)

GOAL = 1.3
THREADS = list(range(1, 11))
FLAGS = ["--workflow-profile", "none", "-n", "-c1"]

BARE = '''\
# Bare Snakefile: the job structure of dbsweep for {cells} cells, no dbsweep code.
THREADS = {threads!r}
USERS = {users!r}
CELLS = expand("filesystem~tmpfs/threads~{{t}}/workload~fio-rr/user~{{u}}", t=THREADS, u=USERS)
REPS = [1]
RUNS = "results/runs"
TABLES = "results/tables"
PLOTS = "results/plots"
REP_DIRS = expand(RUNS + "/{{cell}}/rep~{{rep}}", cell=CELLS, rep=REPS)


wildcard_constraints:
    cell=r"[^/~]+~.+",
    rep=r"\\d+",


rule all:
    input:
        TABLES + "/cells.csv", TABLES + "/cells.md", TABLES + "/saturation.csv", TABLES + "/saturation.md",
        PLOTS + "/throughput_vs_threads.png", PLOTS + "/latency_vs_threads.png", PLOTS + "/jitter.png",
        PLOTS + "/boxplot.png",


rule run:
    output:
        RUNS + "/{{cell}}/rep~{{rep}}/run.json",
    params:
        cell=lambda wildcards: wildcards.cell,
        threads=lambda wildcards: wildcards.cell.split("/")[1],
    log:
        "results/logs/run/{{cell}}/rep~{{rep}}.log",
    resources:
        measure=1,
    script:
        "scripts/run.py"


rule collect:
    input:
        RUNS + "/{{cell}}/rep~{{rep}}/run.json",
    output:
        samples=RUNS + "/{{cell}}/rep~{{rep}}/samples.csv",
        system=RUNS + "/{{cell}}/rep~{{rep}}/system.csv",
        counters=RUNS + "/{{cell}}/rep~{{rep}}/counters.csv",
        summary=RUNS + "/{{cell}}/rep~{{rep}}/summary.json",
    log:
        "results/logs/collect/{{cell}}/rep~{{rep}}.log",
    script:
        "scripts/collect.py"


rule aggregate:
    input:
        expand("{{rep_dir}}/{{name}}", rep_dir=REP_DIRS, name=["run.json", "summary.json", "samples.csv", "system.csv", "counters.csv"]),
    output:
        summary=TABLES + "/summary.csv.gz",
        samples=TABLES + "/samples.csv.gz",
        system=TABLES + "/system.csv.gz",
        counters=TABLES + "/counters.csv.gz",
        provenance=TABLES + "/provenance.json",
        not_applicable=TABLES + "/not_applicable.csv",
    params:
        axes=["filesystem", "threads", "workload", "user"],
        rep_dirs=REP_DIRS,
    log:
        "results/logs/aggregate.log",
    script:
        "scripts/aggregate.py"


rule tables:
    input:
        **rules.aggregate.output,
        script="scripts/tables.R",
    output:
        cells_csv=report(TABLES + "/cells.csv", category="Tables"),
        cells_md=TABLES + "/cells.md",
        saturation_csv=report(TABLES + "/saturation.csv", category="Tables"),
        saturation_md=TABLES + "/saturation.md",
    log:
        "results/logs/tables.log",
    script:
        "scripts/tables.R"


rule plots:
    input:
        **rules.aggregate.output,
        script="scripts/plots.R",
    output:
        throughput=report(PLOTS + "/throughput_vs_threads.png", category="Plots"),
        latency=report(PLOTS + "/latency_vs_threads.png", category="Plots"),
        jitter=report(PLOTS + "/jitter.png", category="Plots"),
        boxplot=report(PLOTS + "/boxplot.png", category="Plots"),
    log:
        "results/logs/plots.log",
    script:
        "scripts/plots.R"
'''


def users(cells: int) -> list[str]:
    if cells % len(THREADS):
        raise SystemExit(f"--sizes: {cells} is not a multiple of {len(THREADS)}")
    return [f"u{i:05d}" for i in range(cells // len(THREADS))]


def study(cells: int) -> dict:
    return {
        "study": f"plan{cells}",
        "repetitions": 1,
        "axes": {"filesystem": ["tmpfs"], "threads": THREADS, "user": users(cells), "workload": ["fio-rr"]},
        "workloads": {"fio-rr": {"tool": "fio", "options": {"rw": "randread", "bs": "16k", "size": "1M",
                                                            "runtime": 2}}},
    }


def setup(tmp: Path, cells: int, snakefile: Path) -> tuple[list, Path, list, Path]:
    real = tmp / f"real-{cells}"
    real.mkdir()
    write_yaml(real / "study.yaml", study(cells))
    bare = tmp / f"bare-{cells}"
    (bare / "scripts").mkdir(parents=True)
    for name in ("run.py", "collect.py", "aggregate.py", "tables.R", "plots.R"):
        (bare / "scripts" / name).write_text("# placeholder; a dry run does not execute it\n")
    (bare / "Snakefile").write_text(BARE.format(cells=cells, threads=THREADS, users=users(cells)))
    return (snakemake_argv(real, *FLAGS, snakefile=snakefile), real,
            [SNAKEMAKE, "-s", bare / "Snakefile", "-d", bare, *FLAGS], bare)


def profile(real_argv: list, cwd: Path, environ: dict, out: Path, workflow: Path, top: int = 25) -> str:
    """cProfile of one dry run of the real workflow; the top costs by cumulative time, dbsweep's own
    functions separately."""
    prof = out.with_suffix(".prof")
    run([PYTHON, "-m", "cProfile", "-o", prof, *real_argv], cwd, environ, out)
    text = []
    for title, restrictions in (("cumulative, all", ()), ("cumulative, workflow/ code (Snakefile, rules, dbsweep)",
                                                            (str(workflow),))):
        buf = io.StringIO()
        stats = pstats.Stats(str(prof), stream=buf)
        stats.sort_stats("cumulative").print_stats(*restrictions, top)
        text.append(f"--- {title} ---\n" + buf.getvalue().split("ncalls", 1)[-1])
    buf = io.StringIO()
    pstats.Stats(str(prof), stream=buf).sort_stats("tottime").print_stats(top)
    text.append("--- own time (tottime), all ---\n" + buf.getvalue().split("ncalls", 1)[-1])
    return "\n".join(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--repeats", type=int, default=5, help="interleaved pairs for sizes up to 1000 cells")
    ap.add_argument("--large-repeats", type=int, default=3, help="interleaved pairs for larger sizes")
    ap.add_argument("--profile", action="store_true", help="profile the real workflow even if within the goal")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--live", action="store_true", help="run workflow/ itself, not a copy taken at start")
    args = ap.parse_args()

    tmp = tempdir("planning", args.keep)
    environ = env(tmp)
    snakefile = snapshot(tmp, args.live) / "Snakefile"
    print(f"temp dir: {tmp}; workflow: {snakefile.parent}")
    rows, over = [], []
    for cells in args.sizes:
        real_argv, real, bare_argv, bare = setup(tmp, cells, snakefile)
        if cells == args.sizes[0]:  # untimed warm-up: fills the bytecode cache of both
            for name, argv, cwd in (("real", real_argv, real), ("bare", bare_argv, bare)):
                run(argv, cwd, environ, tmp / f"{name}-{cells}-warmup.txt")
        repeats = args.repeats if cells <= 1000 else args.large_repeats
        times = {"real": [], "bare": []}
        counts = {}
        for i in range(repeats):
            for name, argv, cwd in (("real", real_argv, real), ("bare", bare_argv, bare)):
                log = tmp / f"{name}-{cells}-{i}.txt"
                elapsed, _ = run(argv, cwd, environ, log)
                times[name].append(elapsed)
                counts.setdefault(name, job_counts(log.read_text()))
                print(f"  {cells} cells, repeat {i + 1}: {name} {elapsed:.2f} s", flush=True)
            if counts["real"] != counts["bare"]:  # both must plan the same jobs
                raise SystemExit(f"{cells} cells: job counts differ: real {counts['real']} bare {counts['bare']}")
        ratios = [r / b for r, b in zip(times["real"], times["bare"])]
        ratio = median(ratios)
        rows.append([cells, sum(counts["real"].values()), repeats, median(times["real"]), median(times["bare"]), ratio,
                     " ".join(f"{r:.2f}" for r in ratios), "yes" if ratio <= GOAL else "NO"])
        if ratio > GOAL:
            over.append((cells, real_argv, real))
    print()
    print(table(["cells", "jobs", "pairs", "real s (median)", "bare s (median)", "real/bare (median)",
                 "per-pair ratios", f"<= {GOAL}"], rows))
    if args.profile and not over:
        cells = min(args.sizes)
        over.append((cells, snakemake_argv(tmp / f"real-{cells}", *FLAGS, snakefile=snakefile), tmp / f"real-{cells}"))
    if over:
        cells, argv, cwd = min(over, key=lambda o: o[0])
        print(f"\nprofile of the real workflow's dry run, {cells} cells (cProfile):\n")
        print(profile(argv, cwd, environ, tmp / f"profile-{cells}.txt", snakefile.parent))


if __name__ == "__main__":
    main()
