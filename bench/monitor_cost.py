"""What the measured window's companions cost the host, in CPU time: vmstat, iostat, the server
counter sampler and the progress follower, on a database cell run by the pipeline's own code.

CPU time, not throughput: on a shared, loaded machine a tps difference of 1% drowns in run-to-run
noise, but the CPU seconds a monitor uses are read exactly from the kernel, whatever the load.

1. In the window: each repetition is `run.repetition` of a real database cell (InnoDB or PostgreSQL,
   sysbench oltp_read_write), restored from a prepared image, exactly as the run rule does. The
   Monitors, Sampler and Follow objects it makes are recorded (the classes are wrapped, not changed)
   and report their own CPU seconds: vmstat and iostat from /proc/<pid>/stat just before they are
   stopped, the sampler and follower threads from time.thread_time() when their loops end.
2. The server's side of a counter sample: on the same image, an idle server answers N counter
   samples in a row; its process tree's CPU during those, less its idle CPU over as long, divided
   by N, is what one sample per second costs the server.

Share of the host = CPU seconds / window seconds / host CPUs (os.cpu_count()). Goal: all together
at most 1%.

    .venv/bin/python bench/monitor_cost.py [--engines innodb] [--repeats 3] [--seconds 30]
                                           [--tables 4] [--table-size 100000] [--threads 2] [--smoke]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import leftovers, table, tempdir, use_pipeline_code  # noqa: E402

use_pipeline_code()
from dbsweep import config, database, database_run, measure, progress, run, storage  # noqa: E402
from dbsweep import monitors as monitors_module  # noqa: E402
from dbsweep.recipe import Recipe  # noqa: E402

GOAL = 0.01


def study(engine: str, tables: int, table_size: int, seconds: int, threads: int) -> config.Study:
    return config.load({
        "study": "monitor-cost", "axes": {"engine": [engine], "memory": ["256M"], "filesystem": ["ext4"],
                                          "threads": [threads], "workload": ["oltp"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "2G"}},
        "workloads": {"oltp": {"tool": "sysbench", "options": {
            "script": "oltp_read_write", "tables": tables, "table_size": table_size, "time": seconds}}},
    })


class Recorded:
    """Wrap the classes run.repetition instantiates so that the bench sees each instance."""

    def __init__(self):
        self.instances: list = []
        recorded = self

        def wrap(cls):
            class Wrapped(cls):
                def __init__(self, *a, **kw):
                    super().__init__(*a, **kw)
                    recorded.instances.append(self)
            Wrapped.__name__ = cls.__name__
            return Wrapped

        measure.Monitors = wrap(monitors_module.Monitors)
        measure.Follow = database_run.Follow = wrap(progress.Follow)
        database.Sampler = wrap(database.Sampler)

    def take(self) -> list:
        out, self.instances = self.instances, []
        return out


def window_costs(s: config.Study, image: Path, tmp: Path, rep: int, log, recorded: Recorded) -> dict:
    """One repetition through run.repetition; CPU seconds per monitor and the window's length."""
    cell = s.cells[0]
    out = tmp / "runs" / s.recipe(cell).engine / f"rep~{rep}" / "run.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    record = run.repetition(cell.as_dict(), rep, s.recipe(cell), out, image, tmp / "active", log)
    cpu = {"vmstat": 0.0, "iostat": 0.0, "sampler": 0.0, "follower": 0.0}
    for obj in recorded.take():
        if isinstance(obj, monitors_module.Monitors):
            for name, seconds in obj.cpu_s.items():
                cpu[name] += seconds
        elif isinstance(obj, progress.Follow):
            if obj.label == "run":  # the warm-up's follower runs outside the window
                cpu["follower"] += obj.cpu_s
        else:
            cpu["sampler"] += obj.cpu_s
    return {"window_s": record["measure_end"] - record["measure_start"], "cpu": cpu}


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process and its live children (PostgreSQL's backends and helpers)."""
    root = psutil.Process(pid)
    total = 0.0
    for p in [root, *root.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def server_side(s: config.Study, image: Path, tmp: Path, log, samples: int) -> tuple[float, float]:
    """Server CPU seconds per counter sample (idle CPU taken out), and this side's for comparison."""
    recipe = s.recipe(s.cells[0])
    with storage.filesystem(recipe.filesystem, tmp / "scratch", tmp / "active", image) as fs, \
            database.running(recipe, fs.path, log, recipe.memory) as db:
        db.family.counters(db.conn)  # the session exists before anything is timed
        time.sleep(1)
        pid = db.handle.pid
        before, wall = tree_cpu_s(pid), time.perf_counter()
        here = time.thread_time()
        for _ in range(samples):
            db.family.counters(db.conn)
        busy, wall = tree_cpu_s(pid) - before, time.perf_counter() - wall
        here = time.thread_time() - here
        before = tree_cpu_s(pid)
        time.sleep(wall)
        idle = tree_cpu_s(pid) - before
    return max(0.0, busy - idle) / samples, here / samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=["innodb"], choices=["innodb", "myrocks", "postgresql"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--table-size", type=int, default=100000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--samples", type=int, default=200, help="counter samples for the server's side")
    parser.add_argument("--smoke", action="store_true", help="one short repetition of a tiny dataset")
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.seconds, args.tables, args.table_size, args.samples = 1, 3, 1, 1000, 20
    tmp = tempdir("monitor-cost")
    tmp.chmod(0o755)
    cpus = os.cpu_count()
    recorded = Recorded()
    rows = []
    with open(tmp / "bench.log", "w") as log:
        for engine in args.engines:
            s = study(engine, args.tables, args.table_size, args.seconds, args.threads)
            image = tmp / f"{engine}.img"
            spec = s.image_spec(s.cells[0])
            storage.prepare_image(spec["filesystem"], image,
                                  lambda root, spec=spec: run.fill(Recipe.preparing(spec), root, tmp, log),
                                  tmp / "active")
            load = []
            reps = []
            for rep in range(1, args.repeats + 1):
                load.append(os.getloadavg()[0])
                reps.append(window_costs(s, image, tmp, rep, log, recorded))
            server_cpu, client_cpu = server_side(s, image, tmp, log, args.samples)
            window = sum(r["window_s"] for r in reps)
            shares = {}
            for name in ("vmstat", "iostat", "sampler", "follower"):
                seconds = sum(r["cpu"][name] for r in reps)
                per_rep = " ".join(f"{100 * r['cpu'][name] / r['window_s'] / cpus:.3f}" for r in reps)
                shares[name] = seconds / window / cpus
                rows.append([engine, name, f"{seconds:.3f}", f"{window:.1f}", f"{1000 * seconds / window:.2f}",
                             f"{100 * shares[name]:.3f}%", per_rep])
            shares["server"] = server_cpu / cpus  # one sample per second
            rows.append([engine, "server (counter queries)",
                         f"{server_cpu * args.samples:.3f} / {args.samples} samples",
                         "-", f"{1000 * server_cpu:.2f}", f"{100 * shares['server']:.3f}%",
                         f"this side {1000 * client_cpu:.2f} ms per sample"])
            total = sum(shares.values())
            rows.append([engine, "**all**", "-", "-", f"{1000 * total * cpus:.2f}", f"**{100 * total:.3f}%**",
                         f"load {statistics.median(load):.1f}; goal <= 1%: {'met' if total <= GOAL else 'NOT met'}"])
    print(f"{args.repeats} repetitions x {args.seconds} s, oltp_read_write {args.tables} x {args.table_size} rows, "
          f"{args.threads} threads; host CPUs {cpus}; "
          "load average (1 min) at start of each repetition in the last column\n")
    print(table(["engine", "monitor", "CPU s", "window s", "CPU ms per s", "share of host", "per repetition, %"], rows))
    left = leftovers(tmp)
    if left:
        sys.exit(f"left behind: {left}")


if __name__ == "__main__":
    main()
