"""What a new server version costs the first time, and every later time.

First time: fetch (download with the registry's client, checksum, unpack into
resources/servers/...), initialise a datadir, start until ready. Later times:
the build is there, so only the start until ready (on a datadir restored from
an image, which is what every repetition does). Per version, with the pipeline's
own functions (dbsweep.servers, dbsweep.engines).

    .venv/bin/python bench/versions.py [--versions postgresql:16 mariadb:11.4] [--repeats 3]
    .venv/bin/python bench/versions.py --smoke     # PostgreSQL 16 once: checks it still runs
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, table, tempdir, use_pipeline_code  # noqa: E402

use_pipeline_code()
from dbsweep import database, engines, servers  # noqa: E402

ENGINE = {"postgresql": "postgresql", "mariadb": "innodb"}


def start(family, engine: str, datadir: Path, basedir: Path, log) -> float:
    """Seconds from starting the server to its first accepted connection."""
    rundir = Path(tempfile.mkdtemp(prefix="dbsweep-"))
    rundir.chmod(0o755)
    try:
        config = family.config_text(engine, "64M", {}, datadir, rundir, database.free_port(), basedir=basedir)
        with family.server(engine, datadir, rundir, config, log, basedir=basedir) as handle:
            return handle.ready_seconds
    finally:
        shutil.rmtree(rundir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", nargs="+", default=["postgresql:16", "mariadb:11.4"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true",
                        help="PostgreSQL 16 only (the smaller download), one later start: does it still run")
    args = parser.parse_args()
    if args.smoke:
        args.versions, args.repeats = ["postgresql:16"], 1
    tmp = tempdir("versions")
    tmp.chmod(0o755)
    log = open(tmp / "bench.log", "w")
    rows = []
    for item in args.versions:
        name, version = item.split(":")
        family = engines.family(ENGINE[name])
        dest = tmp / f"{name}-{version}"
        t0 = time.perf_counter()
        servers.fetch(name, version, dest, log)
        fetch_s = time.perf_counter() - t0
        datadir = tmp / f"data-{name}-{version}"
        t0 = time.perf_counter()
        family.initialize(datadir, log, basedir=dest)
        init_s = time.perf_counter() - t0
        first_ready = start(family, ENGINE[name], datadir, dest, log)
        later = [start(family, ENGINE[name], datadir, dest, log) for _ in range(args.repeats)]
        size_mb = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file()) / 2**20
        rows.append([item, f"{fetch_s:.1f}", f"{init_s:.1f}", f"{first_ready:.2f}",
                     f"{fetch_s + init_s + first_ready:.1f}", f"{median(later):.2f}",
                     f"{(fetch_s + init_s + first_ready) / median(later):.0f}x", f"{size_mb:.0f}"])
    print(f"{args.repeats} later starts each; medians\n")
    print(table(["version", "fetch s", "initialise s", "first start s", "first time s", "later start s",
                 "first/later", "unpacked MB"], rows))


if __name__ == "__main__":
    main()
