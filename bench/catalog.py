"""The results catalog at scale: a synthetic catalog of study runs x cells x per-second samples with injected
shifts; the time to add one study run, to query one cell's history, to find the change points of one cell and
of all cells; the catalog's size; the detector's hits and false alarms.

A study run is a result tree of --cells cells, one repetition each, --seconds per-second samples each (tps),
written in dbsweep's format (tables/*.csv.gz, runs/…/run.json, provenance.json). The first and the last are
added through `catalog.add` (the last one timed, into the full catalog); the ones between are inserted by SQL
in the same shape, since adding 1,000 trees one by one would only repeat the timed step. Each cell's level
moves from run to run by 2% noise (normal, sd 2% of the level) plus 5% per-second noise; --shifts of its
cells get one or two shifts of 5-20% (up or down) at random runs, at least 10 runs from the ends and from each
other. A hit: a change point found within 2 runs of an injected shift; a false alarm: any other.

    .venv/bin/python bench/catalog.py [--runs 1000] [--cells 100] [--seconds 300] [--shifts 40]
    .venv/bin/python bench/catalog.py --smoke     # 20 runs x 5 cells x 30 s (the tests run it)
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import random
import sys
import time
from datetime import datetime, timedelta, UTC
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import table, tempdir, use_pipeline_code  # noqa: E402

use_pipeline_code()
from dbsweep import catalog, history  # noqa: E402
from dbsweep.changepoints import change_points  # noqa: E402
from dbsweep.collect import COUNTER_COLUMNS, PERCENTILE_COLUMNS, SAMPLE_COLUMNS, SYSTEM_COLUMNS  # noqa: E402

STUDY = "synthetic"
START = datetime(2026, 1, 1, tzinfo=UTC)
TOLERANCE = 2


def plan(runs: int, cells: int, shifts: int, rng: random.Random) -> tuple[list[float], dict[int, list[tuple]]]:
    """Each cell's base level and its injected shifts: cell -> [(first run, factor)]."""
    levels = [rng.uniform(500, 5000) for _ in range(cells)]
    injected: dict[int, list[tuple]] = {}
    for cell in rng.sample(range(cells), min(shifts, cells)):
        at = sorted(rng.sample(range(10, runs - 10, 10), rng.choice((1, 2)))) if runs > 40 else [runs // 2]
        injected[cell] = [(a, 1 + rng.choice((-1, 1)) * rng.uniform(0.05, 0.20)) for a in at]
    return levels, injected


def level(levels, injected, cell: int, run: int) -> float:
    out = levels[cell]
    for at, factor in injected.get(cell, []):
        if run >= at:
            out *= factor
    return out


def write_tree(root: Path, run: int, cells: int, seconds: int, levels, injected, rng: random.Random) -> None:
    """Study run `run` as a dbsweep result tree."""
    tables = root / "tables"
    tables.mkdir(parents=True)
    started = START + timedelta(days=run)
    (tables / "provenance.json").write_text(json.dumps({"study": STUDY, "host": "bench", "tools": {}}))
    keys = ["case", "rep", "host"]
    with gzip.open(tables / "summary.csv.gz", "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(keys + ["tool", "seconds", "tps"])
        for c in range(cells):
            w.writerow([f"{c:03d}", 1, "bench", "sysbench", seconds, ""])
    with gzip.open(tables / "samples.csv.gz", "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(keys + SAMPLE_COLUMNS)
        for c in range(cells):
            mean = level(levels, injected, c, run) * rng.gauss(1, 0.02)
            for s in range(1, seconds + 1):
                row = dict.fromkeys(SAMPLE_COLUMNS, "") | {"second": s, "tps": round(mean * rng.gauss(1, 0.05), 2)}
                w.writerow([f"{c:03d}", 1, "bench"] + [row[k] for k in SAMPLE_COLUMNS])
    for name, columns in (("system", SYSTEM_COLUMNS), ("counters", COUNTER_COLUMNS),
                          ("percentiles", PERCENTILE_COLUMNS)):
        with gzip.open(tables / f"{name}.csv.gz", "wt", newline="") as f:
            csv.writer(f).writerow(keys + columns)
    for c in range(cells):
        rep = root / "runs" / f"case~{c:03d}" / "rep~1"
        rep.mkdir(parents=True)
        (rep / "run.json").write_text(json.dumps({
            "cell": {"case": f"{c:03d}"}, "rep": 1, "recipe": {"tool": "sysbench"},
            "attempt": f"attempt~{run:04d}", "host": {"hostname": "bench"}, "tools": {"sysbench": "synthetic"},
            "started": started.isoformat(), "ended": (started + timedelta(seconds=seconds)).isoformat(),
            "status": "ok"}))


def bulk_insert(con, first: int, last: int, cells: int, seconds: int, levels, injected, seed: int) -> None:
    """Study runs first .. last - 1 inserted by SQL in the shape catalog.add gives them."""
    con.execute("SELECT setseed(?)", [seed / 2**31])
    con.execute("CREATE TEMP TABLE gen (run_id INTEGER, source_id INTEGER, run INTEGER, c INTEGER, level DOUBLE)")
    rows = []
    base = con.execute("SELECT max(run_id), max(source_id) FROM runs").fetchone()
    for run in range(first, last):
        for c in range(cells):
            rows.append((base[0] + (run - first) * cells + c + 1, base[1] + run - first + 1, run, c,
                         level(levels, injected, c, run)))
    con.executemany("INSERT INTO gen VALUES (?, ?, ?, ?, ?)", rows)
    # run-to-run noise: 2% normal (Box-Muller)
    con.execute("ALTER TABLE gen ADD COLUMN mean DOUBLE")
    con.execute("UPDATE gen SET mean = level * (1 + 0.02 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))")
    con.execute("INSERT INTO sources SELECT DISTINCT source_id, 'bulk ' || run, ?, now(), ?, NULL FROM gen",
                [STUDY, cells])
    con.execute(f"""INSERT INTO runs (run_id, source_id, study, cell, rep, attempt, host, series, started, ended, tool,
                    metric, window_start, window_end, seconds, digest)
                    SELECT run_id, source_id, ?, 'case~' || lpad(c::VARCHAR, 3, '0'), 1,
                           'attempt~' || lpad(run::VARCHAR, 4, '0'), 'bench', 'case~' || lpad(c::VARCHAR, 3, '0'),
                           ?::TIMESTAMPTZ + run * INTERVAL 1 DAY, ?::TIMESTAMPTZ + run * INTERVAL 1 DAY, 'sysbench',
                           'tps', NULL, NULL, {seconds}, 'bulk' FROM gen""", [STUDY, START, START])
    con.execute("INSERT INTO run_axes SELECT run_id, 'case', lpad(c::VARCHAR, 3, '0') FROM gen")
    con.execute("INSERT INTO samples (run_id, second, tps) SELECT run_id, s, "
                "round(mean * (1 + 0.05 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random())), 2) "
                f"FROM gen, range(1, {seconds + 1}) t(s) ORDER BY run_id, s")
    con.execute("UPDATE runs SET median = m.median FROM (SELECT s.run_id, median(tps) AS median FROM samples s "
                "JOIN gen USING (run_id) GROUP BY s.run_id) m WHERE runs.run_id = m.run_id")
    con.execute("DROP TABLE gen")


def score(series: list[history.Series], injected: dict[int, list[tuple]]) -> tuple[int, int, int, list[str]]:
    """Hits, injected shifts, false alarms, and the shifts missed."""
    hits = total = false = 0
    missed = []
    for s in series:
        c = int(s.cell.split("~")[1])
        truth = [at for at, _ in injected.get(c, [])]
        found = [ch.index for ch in s.changes]
        for at, factor in injected.get(c, []):
            total += 1
            if any(abs(f - at) <= TOLERANCE for f in found):
                hits += 1
            else:
                missed.append(f"{s.cell} at run {at}: {100 * (factor - 1):+.1f}%")
        false += sum(1 for f in found if not any(abs(f - at) <= TOLERANCE for at in truth))
    return hits, total, false, missed


def timed(f, *args, **kwargs):
    """((wall s, CPU s of the whole process, DuckDB's threads included), f's result)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = f(*args, **kwargs)
    return (time.perf_counter() - wall, time.process_time() - cpu), out


def fmt(t: tuple[float, float], scale: int = 1) -> str:
    unit = "ms" if scale == 1000 else "s"
    return f"{t[0] * scale:.{0 if scale == 1000 else 2}f} {unit} ({t[1] * scale:.{0 if scale == 1000 else 2}f} {unit})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1000, help="study runs (result trees)")
    ap.add_argument("--cells", type=int, default=100)
    ap.add_argument("--seconds", type=int, default=300, help="per-second samples per cell and run")
    ap.add_argument("--shifts", type=int, default=40, help="cells with injected shifts")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--smoke", action="store_true", help="20 runs x 5 cells x 30 s, 2 shifted cells")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (the catalog)")
    args = ap.parse_args()
    if args.smoke:
        args.runs, args.cells, args.seconds, args.shifts = 20, 5, 30, 2
    rng = random.Random(args.seed)
    levels, injected = plan(args.runs, args.cells, args.shifts, rng)
    tmp = tempdir("catalog", keep=args.keep)
    path = tmp / "catalog.duckdb"
    write_tree(tmp / "first", 0, args.cells, args.seconds, levels, injected, rng)
    catalog.add(path, [tmp / "first"])
    t = time.perf_counter()
    with catalog.connect(path) as con:
        bulk_insert(con, 1, args.runs - 1, args.cells, args.seconds, levels, injected, args.seed)
        con.execute("CHECKPOINT")
    built = time.perf_counter() - t
    write_tree(tmp / "last", args.runs - 1, args.cells, args.seconds, levels, injected, rng)
    add_t, added = timed(catalog.add, path, [tmp / "last"])
    assert added.runs == args.cells, added
    with catalog.connect(path, read_only=True) as con:
        rows = con.execute("SELECT count(*) FROM samples").fetchone()[0]
        queries = []
        for c in range(min(args.cells, 10)):
            t, one = timed(history.load, con, STUDY, cell=f"case~{c:03d}")
            queries.append(t)
        load_all_t, everything = timed(history.load, con, STUDY)
    assert len(one[0].points) == args.runs, len(one[0].points)
    shifted = next(iter(injected))
    one_cp_t, _ = timed(change_points, [p.value for p in everything[shifted].points])
    all_cp_t, _ = timed(history.detect, everything)
    hits, total, false, missed = score(everything, injected)
    size = path.stat().st_size
    print(f"synthetic catalog: {args.runs} study runs x {args.cells} cells x {args.seconds} s = {rows:,} samples "
          f"(built in {built:.1f} s)\n")
    query_t = sorted(queries)[len(queries) // 2]
    print(table(["what", "wall (CPU)", "goal"], [
        [f"add one study run (a tree of {args.cells} cells), into the full catalog", fmt(add_t), "< 2 s"],
        [f"one cell's history ({args.runs} points), median of {len(queries)} queries", fmt(query_t, 1000),
         "< 100 ms"],
        ["every cell's history, one query", fmt(load_all_t), "-"],
        [f"change points of one cell's {args.runs} points (a shifted cell)", fmt(one_cp_t, 1000), "-"],
        [f"change points of all {args.cells} cells", fmt(all_cp_t), "< 10 s"],
        ["catalog size on disk", f"{size / 2**20:.0f} MiB ({size / rows:.1f} bytes per sample)", "-"],
        ["injected shifts (5-20%, 2% noise) found", f"{hits} of {total}", "all"],
        ["false alarms (changes found where none was injected)", str(false), "-"],
    ]))
    if missed:
        print("\nmissed: " + "; ".join(missed))


if __name__ == "__main__":
    main()
