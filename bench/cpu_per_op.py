"""Where a short phase's CPU per operation varies: the server's connection threads against its other
threads, over identical insert-benchmark load phases, beside a fixed compute loop and a fixed memory walk.

The server's own CPU per inserted row spreads 8-46% over identical 1-3 s phases on this host
(bench/phase_efficiency.py). This takes the spread apart. Each repeat restores the same empty image (2 tables,
the pipeline's own functions), starts MariaDB, and runs the insert benchmark's load phase with 2 clients. At
the phase's start and end it reads every server thread's CPU time (/proc/<pid>/task/<tid>/schedstat, in ns);
the connections' thread ids come from information_schema.PROCESSLIST, polled every 50 ms through the phase.
So the server's CPU splits into what its connection threads ran (the inserts themselves) and what the rest
ran (purge, flushing, compaction). Between repeats, in the same order each time, two fixed amounts of work
of one thread: a compute loop (sysbench cpu) and a sequential memory walk (sysbench memory), their CPU
seconds. If the phase's work varies, the connection threads' CPU per row spreads while the fixed loops do
not; if the host's speed varies, the fixed loops spread too.

    .venv/bin/python bench/cpu_per_op.py [--repeats 8] [--table-size 100000] [--engines innodb myrocks]
                                         [--server-option innodb_spin_wait_delay=0 ...]
    .venv/bin/python bench/cpu_per_op.py --smoke     # InnoDB, 2 repeats of 2 x 2,000 rows: checks it still runs
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import table, tempdir, use_pipeline_code  # noqa: E402

use_pipeline_code()
from dbsweep import accounting, config, database, run, storage, workloads  # noqa: E402
from dbsweep.recipe import Recipe  # noqa: E402

ENGINES = ("innodb", "myrocks")  # PROCESSLIST's TID: MariaDB's
# Fixed work of one thread, about 0.4-1 s each here
COMPUTE = ["sysbench", "cpu", "--cpu-max-prime=20000", "--events=600", "--threads=1", "run"]
MEMORY = ["sysbench", "memory", "--memory-block-size=32M", "--memory-total-size=8G",
          "--memory-access-mode=seq", "--threads=1", "run"]


def study(engine: str, table_size: int, options: dict) -> config.Study:
    """bench/phase_efficiency.py's cell: the insert benchmark on 2 tables, 2 clients, 256M, ext4; options:
    MariaDB's server options."""
    return config.load({"server": {"options": {"mariadb": options}}} | {
        "study": "bench", "axes": {"engine": [engine], "memory": ["256M"], "filesystem": ["ext4"],
                                   "threads": [2], "workload": ["ib"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "2G", "mount_options": ["noatime"]}},
        "workloads": {"ib": {"tool": "insert", "options": {
            "tables": 2, "table_size": table_size, "load_batch": 100, "insert_batch": 10, "insert_rate": 100,
            "range_size": 10, "data_length": 100, "time": 3}}},
    })


def thread_cpu(pid: int) -> dict[int, float]:
    """Every thread's CPU seconds so far, by thread id (schedstat's first field: ns on a CPU)."""
    got = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                got[int(tid)] = int(f.read().split()[0]) / 1e9
        except FileNotFoundError:  # ended meanwhile
            pass
    return got


class Connections:
    """The thread ids of the server's client connections (PROCESSLIST's TID), polled every 50 ms in a
    thread for the body of a with-block, the poller's own connection left out."""

    def __init__(self, db):
        self.session = db.family.connect(db.local)
        self.tids: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        with self.session.cursor() as cursor:
            cursor.execute("SELECT CONNECTION_ID()")
            own = cursor.fetchone()[0]
            while not self._stop.is_set():
                cursor.execute("SELECT TID FROM information_schema.PROCESSLIST WHERE ID <> %s", (own,))
                self.tids.update(int(row[0]) for row in cursor.fetchall())
                time.sleep(0.05)

    def __enter__(self) -> Connections:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.session.close()


def load_phase(db, recipe: Recipe, scratch: Path) -> dict:
    """The load phase against a started server: its seconds and the server's CPU seconds, all of it
    (the process) and split by thread into connections and the rest."""
    tool = workloads.get(recipe.tool)
    name, argv = tool.phases(recipe.options, recipe.threads, db.option_file)[0]
    assert name == "load", name
    pid = db.handle.pid
    with tool.client(db, argv) as (argv, env), Connections(db) as connections:
        before, server = thread_cpu(pid), accounting.reading([pid])  # the process's, ended threads included
        start = time.perf_counter()
        subprocess.run(argv, cwd=scratch, env=env, check=True, capture_output=True)
        seconds = time.perf_counter() - start
        after, total = thread_cpu(pid), accounting.delta(server, accounting.reading([pid]))["cpu_s"]
    used = {tid: after[tid] - before.get(tid, 0.0) for tid in after}
    own = sum(used[tid] for tid in connections.tids if tid in used)
    return {"seconds": seconds, "server": total, "connections": own, "other": sum(used.values()) - own,
            "connection_threads": len(connections.tids & used.keys())}


def cpu_seconds(argv: list[str]) -> float:
    """The CPU seconds a child running argv used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def spread(values: list[float]) -> str:
    """max/min - 1 as a percentage."""
    return f"{100 * (max(values) / min(values) - 1):.1f}%" if min(values) > 0 else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--table-size", type=int, default=100000, help="rows per table (2 tables)")
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--server-option", action="append", default=[], metavar="NAME=VALUE",
                        help="a MariaDB server option for every cell (server.options.mariadb)")
    parser.add_argument("--smoke", action="store_true", help="InnoDB, 2 repeats of 2 x 2,000 rows: does it still run")
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.table_size, args.engines = 2, 2000, ["innodb"]
        COMPUTE[3], MEMORY[3] = "--events=20", "--memory-total-size=256M"
    options = dict(option.split("=", 1) for option in args.server_option)
    tmp = tempdir("cpu-per-op")
    tmp.chmod(0o755)
    log = open(tmp / "bench.log", "w")
    rows, summary = [], []
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; load average {os.getloadavg()[0]:.2f}; "
          f"2 tables x {args.table_size} rows, 2 clients; {args.repeats} repeats per engine; server options {options}",
          flush=True)
    for engine in args.engines:
        s = study(engine, args.table_size, options)
        cell = s.cells[0]
        recipe, spec = s.recipe(cell), s.image_spec(cell)
        image = tmp / f"{engine}.img"
        storage.prepare_image(spec["filesystem"], image,
                              lambda root, spec=spec: run.fill(Recipe.preparing(spec), root, tmp, log), tmp / "active")
        rows_of_engine = []
        for rep in range(args.repeats):
            with storage.filesystem(recipe.filesystem, tmp / "scratch", tmp / "active", image) as fs, \
                    database.running(recipe, fs.path, log, recipe.memory) as db:
                phase = load_phase(db, recipe, tmp)
            phase |= {"compute": cpu_seconds(COMPUTE), "memory": cpu_seconds(MEMORY)}
            rows_of_engine.append(phase)
            per_row = 1e6 / (2 * args.table_size)
            rows.append([engine, rep + 1, f"{phase['seconds']:.2f}", f"{phase['server'] * per_row:.2f}",
                         f"{phase['connections'] * per_row:.2f}", f"{phase['other'] * per_row:.2f}",
                         phase["connection_threads"], f"{phase['compute']:.3f}", f"{phase['memory']:.3f}"])
            print(" | ".join(map(str, rows[-1])), file=sys.stderr, flush=True)
        summary.append([engine] + [spread([r[k] for r in rows_of_engine])
                                   for k in ("seconds", "server", "connections", "other", "compute", "memory")]
                       + [f"{statistics.median(r['other'] / r['server'] for r in rows_of_engine):.1%}"])
    print()
    print(table(["engine", "repeat", "phase s", "server CPU µs/row", "connections µs/row", "other threads µs/row",
                 "connection threads", "compute loop CPU s", "memory walk CPU s"], rows))
    print("\nspread (max/min - 1) over the repeats:\n")
    print(table(["engine", "phase s", "server CPU", "connections", "other threads", "compute loop", "memory walk",
                 "other threads' share (median)"], summary))


if __name__ == "__main__":
    main()
