"""Provisioning a PostgreSQL node: a standby from its copy of the image against pg_dump | psql into a fresh datadir.

One image (database.load: initdb, the benchmark user, `pgbench -i -s SCALE` or tpcc.lua's prepare of
SCALE warehouses, clean shutdown) in a temp
dir under /var/tmp, then `--repeats` interleaved pairs (the order alternating):

- standby: `cp -a` of the image's root to the standby's root and `sync -f` of it, then
  engines.postgresql_cluster.start_cluster("async", 1 replica) with a primary on another copy (copied untimed);
  timed from the primary accepting connections to start_cluster's return (replication role, slot, the
  standby started, streaming and caught up). standby s = copy + sync + that.
- dump: initdb of a fresh datadir, start, the benchmark user, then `pg_dump | psql` of the benchmark
  database from a source server (its own copy of the image, running throughout, untimed), then a CHECKPOINT
  so its data is on disk as the copy's is after sync. dump s = all of it.
- basebackup (for reference: the usual way to make a standby, a full copy over the network):
  `pg_basebackup -X stream -c fast` from the source server over its socket into a new folder, and
  `sync -f` of it; the standby would still have to start.

Goal: dump / standby at least 10x.

    .venv/bin/python bench/provisioning_postgresql.py [--dataset pgbench|tpcc] [--scale 10] [--repeats 3] [--smoke]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, table, tempdir, use_pipeline_code  # noqa: E402

use_pipeline_code()
from dbsweep import database  # noqa: E402
from dbsweep.engines import as_user, chown_tree, cluster, postgresql  # noqa: E402
from dbsweep.recipe import Recipe  # noqa: E402
from dbsweep.topology.nodes import NodeSpec  # noqa: E402
from dbsweep.workloads import tpcc  # noqa: E402

GOAL = 10.0


def recipe(dataset: str, scale: int) -> Recipe:
    """pgbench's tables at scale, or the TPC-C-like tables (tpcc.lua) with scale warehouses."""
    data = tpcc.dataset({"scale": scale}) if dataset == "tpcc" else {"scale": scale, "fillfactor": 100}
    return Recipe.preparing({"engine": "postgresql", "tool": dataset, "dataset": data, "server_options": {},
                             "basedir": None, "filesystem": {"type": "tmpfs"}})


# Rows in every table of the benchmark database's public schema, counted (not the planner's estimate).
ROWS_SQL = ("SELECT sum((xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM %I.%I', "
            "schemaname, tablename), false, true, '')))[1]::text::bigint) FROM pg_tables "
            "WHERE schemaname = 'public';\n")


def rows(handle, database_name: str) -> int:
    return int(postgresql.admin_sql(handle, f"\\c {database_name}\n" + ROWS_SQL).split()[-1])


def copy(image: Path, root: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["cp", "-a", str(image), str(root)], check=True)
    subprocess.run(["sync", "-f", str(root)], check=True)
    return time.perf_counter() - start


def standby(spec: Recipe, image: Path, tmp: Path, log) -> dict:
    """copy s, and start_cluster's time after the primary's start (see the docstring)."""
    primary_root, standby_root = tmp / "primary", tmp / "replica1"
    subprocess.run(["cp", "-a", str(image), str(primary_root)], check=True)
    out = {"copy": copy(image, standby_root)}
    nodes = [NodeSpec("primary", "primary", 0, "127.0.0.1", database.free_port(), primary_root),
             NodeSpec("replica1", "replica", 1, "127.0.0.1", database.free_port(), standby_root)]
    ready = {}
    with ExitStack() as stack:
        def start(node, options):
            db = stack.enter_context(database.running(spec, node.root, log, node=node, node_options=options))
            ready[node.name] = time.perf_counter()
            return db
        cluster("postgresql").start_cluster("postgresql", "async", {"replicas": 1}, nodes, start, ["127.0.0.1"], log)
        out["stream"] = time.perf_counter() - ready["primary"]
    subprocess.run(["rm", "-rf", str(primary_root), str(standby_root)], check=True)
    out["standby"] = out["copy"] + out["stream"]
    return out


def dump_load(spec: Recipe, source, tmp: Path, log) -> dict:
    """initdb, start, user, pg_dump | psql from source, CHECKPOINT: seconds."""
    root = tmp / "fresh"
    root.mkdir(mode=0o755)
    start = time.perf_counter()
    postgresql.initialize(root / database.DATADIR, log)
    creds = database.new_credentials(root)
    with database.running(spec, root, log) as db:
        postgresql.create_user(db.handle, creds["user"], creds["password"], creds["database"])
        dump, dump_env = postgresql.client("pg_dump", None)
        psql, psql_env = postgresql.client("psql", None)
        with postgresql.client_env(source.conn, source.handle.rundir) as src, \
                postgresql.client_env(db.conn, db.handle.rundir) as dst:
            reader = subprocess.Popen([dump, "-w", "--no-password"], stdout=subprocess.PIPE, stderr=log,
                                      env=dump_env | src)
            loaded = subprocess.run([psql, "-w", "-X", "-q", "-v", "ON_ERROR_STOP=1"], stdin=reader.stdout,
                                    stdout=subprocess.DEVNULL, stderr=log, env=psql_env | dst)
            reader.stdout.close()
            if reader.wait() != 0 or loaded.returncode != 0:
                raise RuntimeError(f"pg_dump | psql failed ({reader.returncode}, {loaded.returncode}); see the log")
        postgresql.admin_sql(db.handle, "CHECKPOINT;\n")
        seconds = time.perf_counter() - start
        loaded_rows = rows(db.handle, creds["database"])
    subprocess.run(["rm", "-rf", str(root)], check=True)
    return {"dump": seconds, "rows": loaded_rows}


def running_in(folder: Path) -> list[int]:
    """Processes whose working folder is below folder (a server chdirs to its datadir)."""
    found = []
    for proc in psutil.process_iter(["cwd"]):
        if (proc.info["cwd"] or "").startswith(str(folder)):
            found.append(proc.pid)
    return found


def basebackup(source, tmp: Path, log) -> dict:
    """pg_basebackup of source (as postgres, peer login on its socket) and sync: seconds."""
    target = tmp / "basebackup"
    program, env = postgresql.client("pg_basebackup", None)
    target.mkdir(mode=0o700)
    chown_tree(target, "postgres")
    start = time.perf_counter()
    subprocess.run([program, "-h", str(source.handle.rundir), "-p", str(source.handle.port), "-U", "postgres",
                    "-D", str(target), "-X", "stream", "-c", "fast", "--no-password"],
                   check=True, stdout=log, stderr=log, env=env, cwd="/", **as_user("postgres"))
    subprocess.run(["sync", "-f", str(target)], check=True)
    seconds = time.perf_counter() - start
    subprocess.run(["rm", "-rf", str(target)], check=True)
    return {"basebackup": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=("pgbench", "tpcc"), default="pgbench")
    parser.add_argument("--scale", type=int, default=10, help="pgbench -i -s (100,000 accounts each), or warehouses")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="scale 1, one pair")
    args = parser.parse_args()
    if args.smoke:
        args.scale, args.repeats = 1, 1
    tmp = tempdir("provisioning-pg", where="/var/tmp")
    tmp.chmod(0o755)
    spec = recipe(args.dataset, args.scale)
    image = tmp / "image"
    image.mkdir(mode=0o755)
    log = open(tmp / "bench.log", "w")
    try:
        load_s = time.perf_counter()
        database.load(spec, image, log)
        load_s = time.perf_counter() - load_s
        size, wal = (int(subprocess.run(["du", "-sb", str(image / database.DATADIR / sub)], capture_output=True,
                                        text=True, check=True).stdout.split()[0]) for sub in ("", "pg_wal"))
        subprocess.run(["cp", "-a", str(image), str(tmp / "source")], check=True)
        pairs, load = [], os.getloadavg()[0]
        with database.running(spec, tmp / "source", log) as source:
            source_rows = rows(source.handle, source.conn.database)
            for i in range(args.repeats):
                steps = [lambda: standby(spec, image, tmp, log), lambda: dump_load(spec, source, tmp, log),
                         lambda: basebackup(source, tmp, log)]
                pair = {}
                for step in (steps if i % 2 == 0 else steps[::-1]):
                    pair |= step()
                assert pair["rows"] == source_rows > 0, (pair, source_rows)
                pairs.append(pair)
                print(f"pair {i + 1}: {pair}", file=sys.stderr, flush=True)
    finally:
        log.close()
    left = running_in(tmp)
    if left:
        sys.exit(f"left running: {left}")

    def med(key):
        return median([p[key] for p in pairs])
    ratios = [p["dump"] / p["standby"] for p in pairs]
    print(f"{args.dataset} scale {args.scale}, datadir {size / 2**20:.0f} MiB of which pg_wal {wal / 2**20:.0f} MiB "
          f"(image load {load_s:.1f} s); "
          f"{args.repeats} interleaved pairs, medians; load average (1 min) at start {load:.1f}\n")
    print(table(["dataset", "copy + sync s", "primary ready -> standby streaming s", "standby s",
                 "dump and load s", "dump / standby", f">= {GOAL:.0f}x", "per pair", "pg_basebackup s"],
                [[f"{args.dataset} scale {args.scale}", f"{med('copy'):.2f}", f"{med('stream'):.2f}",
                  f"{med('standby'):.2f}", f"{med('dump'):.1f}", f"**{median(ratios):.1f}x**",
                  "met" if median(ratios) >= GOAL else "NOT met",
                  " ".join(f"{r:.1f}" for r in ratios), f"{med('basebackup'):.2f}"]]))


if __name__ == "__main__":
    main()
