"""Provisioning a MariaDB replica from the image against a dump-and-load.

The dataset: an image datadir (benchmark user, sysbench tables: 4 x 100,000 rows by default), made
once. Each repetition starts a primary on a copy of it (untimed) and then one replica, timed from the
moment its provisioning begins until its IO and SQL threads run and it has caught up
(`mariadb_cluster.start_cluster`, async replication; the replica's `provision_s` fact):

- image: copy the image's datadir into the replica's root (`cp -a`, as every node gets its own copy of
  the cell's image), start the server, CHANGE MASTER at the image's GTID position, replicate;
- dump: a fresh datadir (mariadb-install-db), start the server, `mariadb-dump --single-transaction`
  of the primary's benchmark database piped into `mariadb` on the replica (sql_log_bin=0, so the load
  stays out of the replica's binary log), then the same CHANGE MASTER and wait.

Repetitions alternate the order (image first, then dump first). Goal: dump / image >= 10.

    .venv/bin/python bench/provisioning.py [--tables 4] [--table-size 100000] [--repeats 3] [--smoke]
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import leftovers, median, table, tempdir, use_pipeline_code  # noqa: E402

use_pipeline_code()
from dbsweep import database  # noqa: E402
from dbsweep.engines import cluster, family  # noqa: E402
from dbsweep.recipe import Recipe  # noqa: E402
from dbsweep.topology.nodes import NodeSpec  # noqa: E402

mariadb = family("innodb")
RECIPE = Recipe.preparing({"engine": "innodb", "tool": "sysbench", "filesystem": {"type": "tmpfs"},
                           "dataset": {}})
GOAL = 10.0


def make_image(root: Path, tables: int, rows: int, log) -> None:
    """root/data with the benchmark user and sysbench's tables, shut down cleanly; root/credentials.json."""
    mariadb.initialize(root / database.DATADIR, log)
    creds = database.new_credentials(root)
    with database.running(RECIPE, root, log) as db:
        mariadb.create_user(db.handle, creds["user"], creds["password"], creds["database"])
        done = subprocess.run(["sysbench", "oltp_read_write", f"--config-file={db.option_file}",
                               f"--tables={tables}", f"--table-size={rows}", "prepare"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"sysbench prepare failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")


def node_root(work: Path, name: str, image: Path) -> Path:
    root = work / name
    root.mkdir()
    root.chmod(0o755)
    shutil.copy2(image / database.CREDENTIALS, root / database.CREDENTIALS)
    return root


def copy_datadir(image: Path, root: Path) -> None:
    subprocess.run(["cp", "-a", str(image / database.DATADIR), str(root / database.DATADIR)], check=True)


def dump_into(primary, replica) -> None:
    """mariadb-dump of the primary's benchmark database | mariadb on the replica, both as root on the socket."""
    dump = subprocess.Popen(["mariadb-dump", "--no-defaults", f"--socket={primary.handle.socket}", "--user=root",
                             "--single-transaction", "--databases", primary.conn.database],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    load = subprocess.run(["mariadb", "--no-defaults", f"--socket={replica.handle.socket}", "--user=root",
                           "--init-command=SET SESSION sql_log_bin = 0"], stdin=dump.stdout,
                          capture_output=True, text=True)
    dump.stdout.close()
    error = dump.stderr.read().decode(errors="replace")
    if dump.wait() != 0 or load.returncode != 0:
        raise RuntimeError(f"dump and load failed: {error}{load.stderr}")


def provision(image: Path, work: Path, how: str, log) -> tuple[float, float]:
    """Seconds from the start of the replica's provisioning to a replicating replica, and of them the
    datadir's making (copy, or mariadb-install-db + dump and load)."""
    work.mkdir()
    work.chmod(0o755)
    nodes = [NodeSpec("primary", "primary", 0, "127.0.0.1", database.free_port(), node_root(work, "primary", image)),
             NodeSpec("replica1", "replica", 1, "127.0.0.1", database.free_port(), node_root(work, "replica1", image))]
    copy_datadir(image, nodes[0].root)
    with ExitStack() as stack:
        started, making = {}, []

        def start(node, options):
            began = time.perf_counter()
            if node.role == "replica" and how == "dump":
                mariadb.initialize(node.root / database.DATADIR, log)
            elif node.role == "replica":
                copy_datadir(image, node.root)
            made = time.perf_counter() - began
            db = started[node.name] = stack.enter_context(
                database.running(RECIPE, node.root, log, node=node, node_options=options))
            if node.role == "replica" and how == "dump":
                began = time.perf_counter()
                dump_into(started["primary"], db)
                made += time.perf_counter() - began
            if node.role == "replica":
                making.append(made)
            return db

        dbs = cluster("innodb").start_cluster("innodb", "async", {"replicas": 1}, nodes, start, ["127.0.0.1"], log)
        count = mariadb.admin_sql(dbs["replica1"].handle, f"SELECT count(*) FROM `{dbs['replica1'].conn.database}`"
                                                          f".sbtest1;\n").strip()
        if int(count) == 0:
            raise RuntimeError(f"{how}: the replica has no rows")
    shutil.rmtree(work)
    return nodes[1].facts["provision_s"], making[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--table-size", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="1 table of 1000 rows, one pair")
    args = parser.parse_args()
    if args.smoke:
        args.tables, args.table_size, args.repeats = 1, 1000, 1
    tmp = tempdir("provisioning")
    tmp.chmod(0o755)
    log = io.StringIO()
    image = tmp / "image"
    image.mkdir()
    began = time.perf_counter()
    make_image(image, args.tables, args.table_size, log)
    made = time.perf_counter() - began
    size = sum(f.stat().st_size for f in (image / database.DATADIR).rglob("*") if f.is_file())
    times, making = {"image": [], "dump": []}, {"image": [], "dump": []}
    for rep in range(args.repeats):
        order = ("image", "dump") if rep % 2 == 0 else ("dump", "image")
        for how in order:
            total, made = provision(image, tmp / f"{how}-{rep}", how, log)
            times[how].append(total)
            making[how].append(made)
            print(f"rep {rep} {how}: {total:.2f} s (datadir {made:.2f} s)", file=sys.stderr, flush=True)
    left = leftovers(tmp)
    if left:
        raise SystemExit(f"left behind: {left}")
    load = os.getloadavg()[0]
    image_s, dump_s = median(times["image"]), median(times["dump"])
    print(f"dataset: {args.tables} x {args.table_size} sysbench rows, datadir {size / 2**20:.0f} MiB "
          f"(made in {made:.1f} s); {args.repeats} alternating pairs, medians; load average {load:.2f}\n")
    print(table(["provisioning", "median s", "of which the datadir s", "runs s"],
                [["image copy + start + replicate", image_s, median(making["image"]),
                  " ".join(f"{t:.2f}" for t in times["image"])],
                 ["fresh datadir + dump, load + replicate", dump_s, median(making["dump"]),
                  " ".join(f"{t:.2f}" for t in times["dump"])]]))
    print()
    print(table(["dump / image", f">= {GOAL:g}x"], [[dump_s / image_s, "yes" if dump_s / image_s >= GOAL else "no"]]))
    print(json.dumps({"image_s": times["image"], "dump_s": times["dump"]}), file=sys.stderr)


if __name__ == "__main__":
    main()
