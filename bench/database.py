"""Database benchmarks of the pipeline itself, with its own functions (workflow/dbsweep).

1. restore vs reload: per engine, restoring a prepared image (copy, loop device,
   mount, server start until ready) against loading the same dataset again
   (sparse file, mkfs, mount, initialize the datadir, start the server, create
   the user, sysbench prepare, clean shutdown). Goal: restore at least 10x faster.
2. start-to-ready: per engine, the time from starting the server to its first
   accepted connection, on a restored datadir.
3. monitoring cost: per engine, sysbench oltp_read_write tps on one running server
   with the measured window's companions (vmstat, iostat, server counters every
   second, datadir size every 5 s) and without them, interleaved A B A B.
   Goal: under 1%.

Interleaved, medians; one run of this script gives the ratios.

    .venv/bin/python bench/database.py [--repeats 3] [--tables 4] [--table-size 50000] [--seconds 10]
                                       [--engines innodb myrocks postgresql]
    .venv/bin/python bench/database.py --smoke     # InnoDB, 1 table x 1,000 rows, 2 s: checks it still runs
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, table, tempdir, use_pipeline_code  # noqa: E402

use_pipeline_code()
from dbsweep import config, database, run, storage  # noqa: E402
from dbsweep.monitors import Monitors  # noqa: E402
from dbsweep.recipe import Recipe  # noqa: E402

ENGINES = ("innodb", "myrocks", "postgresql")
TPS = re.compile(r"transactions:\s+\d+\s+\(([\d.]+) per sec\.\)")


def study(engine: str, tables: int, table_size: int, seconds: int) -> config.Study:
    return config.load({
        "study": "bench", "axes": {"engine": [engine], "memory": ["64M"], "filesystem": ["ext4"],
                                   "threads": [2], "workload": ["oltp"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "2G"}},
        "workloads": {"oltp": {"tool": "sysbench", "options": {
            "script": "oltp_read_write", "tables": tables, "table_size": table_size, "time": seconds}}},
    })


def reload(spec: dict, image: Path, tmp: Path, log) -> float:
    """Load the dataset from nothing into `image` (as the prepare rule does); seconds."""
    image.unlink(missing_ok=True)
    start = time.perf_counter()
    storage.prepare_image(spec["filesystem"], image, lambda root: run.fill(Recipe.preparing(spec), root, tmp, log),
                          tmp / "active")
    return time.perf_counter() - start


def restore(recipe: Recipe, image: Path, tmp: Path, log) -> tuple[float, float]:
    """Restore image and start the server until ready; (seconds, of which start-to-ready)."""
    start = time.perf_counter()
    with storage.filesystem(recipe.filesystem, tmp / "scratch", tmp / "active", image) as fs:
        with database.running(recipe, fs.path, log, recipe.memory) as db:
            elapsed = time.perf_counter() - start
            ready = db.handle.ready_seconds
    return elapsed, ready


def tps(db, recipe: Recipe, raw: Path, devices: list[str], datadir: Path, monitored: bool) -> float:
    from dbsweep import workloads
    tool = workloads.get("sysbench")
    argv = db.sysbench(tool.command(recipe.options, recipe.threads, raw, db.option_file))
    if monitored:
        with Monitors(raw, devices), database.Sampler(database.server_counters(db), datadir, raw / "counters.jsonl"):
            out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    else:
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return float(TPS.search(out)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--table-size", type=int, default=50000)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--smoke", action="store_true",
                        help="InnoDB, one repeat, 1 table x 1,000 rows, 2 s windows: does it still run")
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.tables, args.table_size, args.seconds, args.engines = 1, 1, 1000, 2, ["innodb"]
    tmp = tempdir("database")
    tmp.chmod(0o755)
    log = open(tmp / "bench.log", "w")
    rows_restore, rows_cost = [], []
    for engine in args.engines:
        s = study(engine, args.tables, args.table_size, args.seconds)
        cell = s.cells[0]
        recipe, spec = s.recipe(cell), s.image_spec(cell)
        image = tmp / f"{engine}.img"
        loads, restores, readies = [], [], []
        for _ in range(args.repeats):
            loads.append(reload(spec, image, tmp, log))
            elapsed, ready = restore(recipe, image, tmp, log)
            restores.append(elapsed)
            readies.append(ready)
        rows_restore.append([engine, f"{median(loads):.1f}", f"{median(restores):.2f}",
                             f"{median(loads) / median(restores):.1f}x", f"{median(readies):.2f}"])

        with_, without = [], []
        with storage.filesystem(recipe.filesystem, tmp / "scratch", tmp / "active", image) as fs, \
                database.running(recipe, fs.path, log, recipe.memory) as db:
            for i in range(args.repeats * 2):
                raw = tmp / f"raw-{engine}-{i}"
                raw.mkdir()
                monitored = i % 2 == 0
                value = tps(db, recipe, raw, fs.devices, fs.path / database.DATADIR, monitored)
                (with_ if monitored else without).append(value)
        rows_cost.append([engine, f"{median(with_):.0f}", f"{median(without):.0f}",
                          f"{100 * (1 - median(with_) / median(without)):+.1f}%",
                          " ".join(f"{v:.0f}" for v in with_), " ".join(f"{v:.0f}" for v in without)])
        print(f"{engine} done", file=sys.stderr)

    print(f"dataset: {args.tables} tables x {args.table_size} rows; {args.repeats} interleaved repeats; medians\n")
    print(table(["engine", "reload s", "restore+start s", "reload/restore", "start-to-ready s"], rows_restore))
    print()
    print(table(["engine", "tps monitored", "tps bare", "cost", "monitored runs", "bare runs"], rows_cost))


if __name__ == "__main__":
    main()
