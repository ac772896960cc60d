"""What the optimizer's statistics in a prepared image change: tps on an image loaded as dbsweep
loads it (the load, then engines' analyze: VACUUM ANALYZE on PostgreSQL, ANALYZE TABLE on the
MySQL family) against the same load without the analyze, as images were made before 2026-11-27.

Per engine: both images are prepared once (sparse file, mkfs, mount, initialize, load, clean
shutdown, with the pipeline's own functions; the analyze step timed). Then pairs, in alternating
order: restore a copy of the image, start the server (cold), a warm-up run, the measured run of
sysbench's oltp_read_only, stop. The ratio of each pair is with/without; the table gives the
median ratio and its distribution-free 95% CI (order statistics of the sign test).

    .venv/bin/python bench/optimizer_statistics.py [--pairs 6] [--tables 2] [--table-size 100000]
                                                   [--seconds 15] [--engines postgresql innodb myrocks]
    .venv/bin/python bench/optimizer_statistics.py --smoke   # PostgreSQL, 1 pair, 1 table x 1,000 rows, 1 s
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, median_ci, table, tempdir, use_pipeline_code  # noqa: E402

use_pipeline_code()
from dbsweep import config, database, engines, run, storage, workloads  # noqa: E402
from dbsweep.recipe import Recipe  # noqa: E402

ENGINES = ("postgresql", "innodb", "myrocks")
TPS = re.compile(r"transactions:\s+\d+\s+\(([\d.]+) per sec\.\)")


def study(engine: str, tables: int, table_size: int, seconds: int) -> config.Study:
    return config.load({
        "study": "bench", "axes": {"engine": [engine], "memory": ["256M"], "filesystem": ["ext4"],
                                   "threads": [2], "workload": ["ro"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "2G"}},
        "workloads": {"ro": {"tool": "sysbench", "options": {
            "script": "oltp_read_only", "tables": tables, "table_size": table_size, "time": seconds}}},
    })


def prepare(spec: dict, image: Path, tmp: Path, log, analyzed: bool) -> float:
    """Load the dataset into image as the prepare rule does, with or without the analyze step;
    the analyze step's seconds (0 without)."""
    family = engines.family(spec["engine"])
    analyze, took = family.analyze, []

    def timed(handle, name):
        start = time.perf_counter()
        try:
            return analyze(handle, name) if analyzed else []
        finally:
            took.append(time.perf_counter() - start)

    family.analyze = timed
    try:
        storage.prepare_image(spec["filesystem"], image, lambda root: run.fill(Recipe.preparing(spec), root, tmp, log),
                              tmp / "active")
    finally:
        family.analyze = analyze
    return sum(took) if analyzed else 0.0


def measure(recipe: Recipe, image: Path, tmp: Path, log, warmup_s: int) -> float:
    """A cold server on a restored copy of image: a warm-up run, then the measured one; its tps."""
    tool = workloads.get("sysbench")
    with storage.filesystem(recipe.filesystem, tmp / "scratch", tmp / "active", image) as fs, \
            database.running(recipe, fs.path, log, recipe.memory) as db:
        warm = db.sysbench(tool.command(recipe.options, recipe.threads, tmp, db.option_file, time_s=warmup_s))
        subprocess.run(warm, capture_output=True, check=True)
        argv = db.sysbench(tool.command(recipe.options, recipe.threads, tmp, db.option_file))
        return float(TPS.search(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--tables", type=int, default=2)
    parser.add_argument("--table-size", type=int, default=100000)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--smoke", action="store_true",
                        help="PostgreSQL, one pair, 1 table x 1,000 rows, 1 s windows: does it still run")
    args = parser.parse_args()
    if args.smoke:
        args.pairs, args.tables, args.table_size, args.seconds, args.engines = 1, 1, 1000, 1, ["postgresql"]
    tmp = tempdir("statistics")
    tmp.chmod(0o755)
    log = open(tmp / "bench.log", "w")
    rows = []
    for engine in args.engines:
        s = study(engine, args.tables, args.table_size, args.seconds)
        cell = s.cells[0]
        recipe, spec = s.recipe(cell), s.image_spec(cell)
        images = {True: tmp / f"{engine}-analyzed.img", False: tmp / f"{engine}-not.img"}
        analyze_s = prepare(spec, images[True], tmp, log, analyzed=True)
        prepare(spec, images[False], tmp, log, analyzed=False)
        tps = {True: [], False: []}
        for i in range(args.pairs):
            for analyzed in ((True, False) if i % 2 == 0 else (False, True)):
                tps[analyzed].append(measure(recipe, images[analyzed], tmp, log, warmup_s=max(1, args.seconds // 3)))
        ratios = [a / b for a, b in zip(tps[True], tps[False], strict=False)]
        low, high = median_ci(ratios)
        rows.append([engine, f"{analyze_s:.2f}", f"{median(tps[True]):.0f}", f"{median(tps[False]):.0f}",
                     f"{median(ratios):.3f}", f"[{low:.3f}, {high:.3f}]", " ".join(f"{r:.3f}" for r in ratios)])
        print(f"{engine} done", file=sys.stderr)
        for image in images.values():
            image.unlink(missing_ok=True)
    print(f"oltp_read_only, {args.tables} tables x {args.table_size} rows, 2 threads, 256M, {args.seconds} s "
          f"windows; {args.pairs} pairs in alternating order, each on a cold server from a fresh copy\n")
    print(table(["engine", "analyze s", "tps analyzed", "tps not", "ratio (median)", "95% CI", "ratios"], rows))


if __name__ == "__main__":
    main()
