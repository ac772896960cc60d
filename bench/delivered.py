"""What reading back a database cell's settings costs: the server's variables and its dataset's catalog read
in the run (raw/variables.tsv, raw/dataset.tsv), and their comparison with the declaration in collect
(dbsweep/delivered.py).

Per engine, one image of the sysbench dataset (--tables x --table-size) made by the pipeline's own functions,
restored once, its server started with two declared options (one size, one the server ignores: a loose_ option
for MariaDB, an unknown-to-nothing custom one skipped for PostgreSQL); then, --repeats times, interleaved: the
live read (variables() and dataset_facts() through the run's own connection) and the comparison
(delivered.checks on the files just written). Median and 95% CI of each, in ms.

    .venv/bin/python bench/delivered.py [--repeats 20] [--tables 8] [--table-size 10000]
    .venv/bin/python bench/delivered.py --smoke     # InnoDB, 3 repeats of 2 x 1,000 rows: checks it still runs
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, median_ci, table, tempdir, use_pipeline_code  # noqa: E402

use_pipeline_code()
from dbsweep import config, database, database_run, delivered, run, storage  # noqa: E402
from dbsweep.recipe import Recipe  # noqa: E402

ENGINES = ("innodb", "myrocks", "postgresql")
OPTIONS = {"mariadb": {"sort_buffer_size": "4M", "loose-no_such_option_bench": 1},
           "postgresql": {"work_mem": "8MB", "checkpoint_timeout": "15min"}}


def study(engine: str, tables: int, table_size: int) -> config.Study:
    return config.load({
        "study": "bench", "axes": {"engine": [engine], "memory": ["64M"], "filesystem": ["ext4"], "threads": [2],
                                   "workload": ["ro"]},
        "server": {"options": OPTIONS},
        "filesystems": {"ext4": {"type": "ext4", "size": "1G"}},
        "workloads": {"ro": {"tool": "sysbench", "options": {"script": "oltp_read_only", "tables": tables,
                                                            "table_size": table_size, "time": 3}}},
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--tables", type=int, default=8)
    parser.add_argument("--table-size", type=int, default=10000)
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--smoke", action="store_true", help="InnoDB, 3 repeats of 2 x 1,000 rows")
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.tables, args.table_size, args.engines = 3, 2, 1000, ["innodb"]
    tmp = tempdir("delivered")
    tmp.chmod(0o755)
    log = open(tmp / "bench.log", "w")
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; load average {os.getloadavg()[0]:.2f}; "
          f"{args.tables} tables x {args.table_size} rows; {args.repeats} repeats per engine", flush=True)
    rows = []
    for engine in args.engines:
        s = study(engine, args.tables, args.table_size)
        cell = s.cells[0]
        recipe, spec = s.recipe(cell), s.image_spec(cell)
        image = tmp / f"{engine}.img"
        storage.prepare_image(spec["filesystem"], image,
                              lambda root, spec=spec: run.fill(Recipe.preparing(spec), root, tmp, log), tmp / "active")
        raw = tmp / f"raw-{engine}"
        raw.mkdir()
        reads, compares, checks = [], [], []
        with storage.filesystem(recipe.filesystem, tmp / "scratch", tmp / "active", image) as fs, \
                database.running(recipe, fs.path, log, recipe.memory) as db:
            record = {"filesystem": fs.facts, "server": {"version": db.family.version(db.local)}}
            for _ in range(args.repeats):
                start = time.perf_counter()
                with open(raw / "variables.tsv", "w") as f:
                    f.writelines("\t".join(row) + "\n" for row in db.family.variables(db.local))
                database_run.dataset_facts(db, raw, log)
                reads.append(1000 * (time.perf_counter() - start))
                start = time.perf_counter()
                checks = delivered.checks(recipe, record, raw)
                compares.append(1000 * (time.perf_counter() - start))
        low, high = median_ci(reads)
        clow, chigh = median_ci(compares)
        counts = delivered.counts(checks)
        rows.append([engine, f"{median(reads):.1f} [{low:.1f}, {high:.1f}]",
                     f"{median(compares):.1f} [{clow:.1f}, {chigh:.1f}]", counts["settings_checked"],
                     counts["deviations"], counts["settings_not_read"]])
        print(" | ".join(map(str, rows[-1])), file=sys.stderr, flush=True)
        for check in checks:
            if check.verdict == delivered.DEVIATED:
                print(f"  deviated: {check.line()}", file=sys.stderr, flush=True)
    print()
    print(table(["engine", "read back in the run, ms (median [95% CI])", "compared in collect, ms", "checks",
                 "deviated", "not read"], rows))


if __name__ == "__main__":
    main()
