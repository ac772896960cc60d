"""tpcc benchmarks: what the TPC-C-like workload costs to prepare, and how much CPU its
sysbench client spends per transaction, with the pipeline's own functions (workflow/dbsweep).

1. prepare: per engine and scale (warehouses), loading the dataset from nothing into an image
   as the prepare rule does (sparse file, mkfs, mount, initialise the datadir, start, create
   the user, the script's parallel prepare with 2 threads, clean shutdown); seconds per
   warehouse and the datadir's size per warehouse.
2. client CPU: per engine, on the restored image, `run` for --seconds with --threads; the
   sysbench process's own CPU (user + system, from wait4's rusage) and the server's (its
   process tree, reaped backends included) per transaction. client share = client / (client +
   server): when the client takes a large share of the 2 cores, it limits the result.

    .venv/bin/python bench/tpcc.py [--scales 1 2] [--seconds 20] [--threads 2]
                                   [--engines innodb myrocks postgresql]
    .venv/bin/python bench/tpcc.py --smoke     # InnoDB, 1 warehouse, 2 s: checks it still runs
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import table, tempdir, use_pipeline_code  # noqa: E402

use_pipeline_code()
from dbsweep import config, database, run, storage  # noqa: E402
from dbsweep.recipe import Recipe  # noqa: E402
from dbsweep.workloads import tpcc  # noqa: E402

ENGINES = ("innodb", "myrocks", "postgresql")
TPS = re.compile(r"transactions:\s+(\d+)\s+\(([\d.]+) per sec\.\)")


def study(engine: str, scale: int, seconds: int, threads: int) -> config.Study:
    return config.load({
        "study": "bench", "axes": {"engine": [engine], "memory": ["256M"], "filesystem": ["ext4"],
                                   "threads": [threads], "workload": ["tpcc"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "4G"}},
        "workloads": {"tpcc": {"tool": "tpcc", "options": {"scale": scale, "isolation": "RC", "time": seconds}}},
    })


def prepare(spec: dict, image: Path, tmp: Path, log) -> tuple[float, int]:
    """Load the dataset from nothing into image; (seconds, datadir bytes)."""
    image.unlink(missing_ok=True)
    size = []

    def fill(root: Path):
        commands = run.fill(Recipe.preparing(spec), root, tmp, log)
        size.append(database.datadir_bytes(root / database.DATADIR))
        return commands

    start = time.perf_counter()
    storage.prepare_image(spec["filesystem"], image, fill, tmp / "active")
    return time.perf_counter() - start, size[0]


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process tree, its reaped children included."""
    root = psutil.Process(pid)
    total = 0.0
    for p in [root, *root.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def client_cpu(recipe: Recipe, image: Path, tmp: Path, log) -> tuple[int, float, float, float]:
    """(transactions, tps, client CPU s, server CPU s) of one run on the restored image."""
    with storage.filesystem(recipe.filesystem, tmp / "scratch", tmp / "active", image) as fs, \
            database.running(recipe, fs.path, log, recipe.memory) as db:
        argv = db.sysbench(tpcc.command(recipe.options, recipe.threads, tmp, db.option_file))
        server_before = tree_cpu(db.handle.pid)
        with open(tmp / "run.stdout.txt", "w") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        time.sleep(0.5)  # the server reaps its backends
        server = tree_cpu(db.handle.pid) - server_before
    text = (tmp / "run.stdout.txt").read_text()
    if proc.returncode != 0:
        raise RuntimeError(f"sysbench exited with {proc.returncode}: {text[-500:]}")
    match = TPS.search(text)
    return int(match[1]), float(match[2]), usage.ru_utime + usage.ru_stime, server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--smoke", action="store_true", help="InnoDB, 1 warehouse, a 2 s run: does it still run")
    args = parser.parse_args()
    if args.smoke:
        args.scales, args.seconds, args.engines = [1], 2, ["innodb"]
    tmp = tempdir("tpcc", where="/var/tmp")
    tmp.chmod(0o755)
    log = open(tmp / "bench.log", "w")
    rows_prepare, rows_cpu = [], []
    for engine in args.engines:
        image = None
        for scale in args.scales:
            s = study(engine, scale, args.seconds, args.threads)
            cell = s.cells[0]
            image = tmp / f"{engine}-{scale}.img"
            seconds, size = prepare(s.image_spec(cell), image, tmp, log)
            rows_prepare.append([engine, scale, f"{seconds:.1f}", f"{seconds / scale:.1f}",
                                 f"{size / 2**20 / scale:.0f}"])
        recipe = study(engine, args.scales[-1], args.seconds, args.threads).recipe(cell)
        txn, tps, client, server = client_cpu(recipe, image, tmp, log)
        rows_cpu.append([engine, args.scales[-1], f"{tps:.0f}", f"{client / txn * 1e6:.0f}",
                         f"{server / txn * 1e6:.0f}", f"{100 * client / (client + server):.0f}%"])
        print(f"{engine} done", file=sys.stderr)

    print(f"prepare: 2 threads, ext4 image; run: {args.threads} threads, {args.seconds} s, RC\n")
    print(table(["engine", "warehouses", "prepare s", "s per warehouse", "datadir MB per warehouse"], rows_prepare))
    print()
    print(table(["engine", "warehouses", "tps", "client CPU us/txn", "server CPU us/txn", "client share"], rows_cpu))


if __name__ == "__main__":
    main()
