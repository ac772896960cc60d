"""The explore page of a large study: its file size, the time to write it, and in headless Chromium
the time to first paint and to the first plot drawn.

Generates the long tables aggregate writes (samples, system, counters as parquet) and rule statistics'
steady_state.csv for a synthetic study of --cells cells (engine x memory x threads) x --seconds
per-second samples, with --counters server counters per second (a warm-up ramp and a few stalls), then
runs workflow/dbsweep/explore.py on them and loads the page. Goal (issue 13): under 20 MB and 3 s for
500 cells x 300 s.

    .venv/bin/python bench/explore.py [--cells 500] [--seconds 300] [--counters 60] [--rounds 3] [--smoke]

Prints one JSON line: size_mb, write_s (build and write), and medians over the rounds of load_s (to the
load event: HTML and plotly.js parsed), first_paint_s, plot_drawn_s (data unpacked, first plot drawn),
baseline_load_s (the page without data: plotly.js alone). With --pairs, the same data is also written by
main's explore.py (`git show main:workflow/dbsweep/explore.py`) and both pages are loaded in turn, each
round: main_plot_drawn_s and main_load_s are its medians (the machine is shared: compare within a run).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
import pandas as pd

from common import ROOT, tempdir, use_pipeline_code

sys.path.insert(0, str(ROOT / "tests"))
from chromium import Chromium  # noqa: E402

AXES = ["engine", "memory", "filesystem", "threads", "workload"]


def study(dir, cells: int, seconds: int, counters: int) -> None:
    rng = np.random.default_rng(1)
    threads = [2 ** i for i in range(10)]
    grid = [(e, f"{64 * (m + 1)}M", t) for m in range(cells) for e in ("innodb", "myrocks") for t in threads][:cells]
    cell = pd.DataFrame(grid, columns=["engine", "memory", "threads"]).assign(filesystem="xfs", workload="oltp", rep=1,
                                                                              host="bench")
    second = np.arange(1, seconds + 1)
    rows = cell.loc[cell.index.repeat(seconds)].reset_index(drop=True)
    rows["second"] = np.tile(second, len(cell))
    level = np.repeat(rng.uniform(100, 5000, len(cell)), seconds)
    ramp = np.tile(np.minimum(1, second / 30), len(cell))
    tps = level * ramp * rng.normal(1, 0.05, len(rows))
    tps[rng.random(len(rows)) < 0.01] *= 0.2  # stalls
    samples = rows.assign(time=rows["second"] + 1.8e9, tps=tps.round(2), lat_pct_ms=(1000 / tps * 4).round(3))
    samples.to_parquet(dir / "samples.parquet")
    system = rows.assign(second=rows["second"] - 1, us=rng.integers(0, 80, len(rows)),
                         sy=rng.integers(0, 20, len(rows)),
                         wa=rng.integers(0, 10, len(rows)), device="loop0",
                         r_s=rng.uniform(0, 3000, len(rows)).round(1), w_s=rng.uniform(0, 1000, len(rows)).round(1))
    system.to_parquet(dir / "system.parquet")
    names = [f"Counter_{i:03d}" for i in range(counters)]
    long = rows.loc[rows.index.repeat(counters)].reset_index(drop=True)
    long["name"] = np.tile(names, len(rows))
    long["value"] = rng.exponential(1000, len(long)).round(0)
    long.to_parquet(dir / "counters.parquet")
    windows = cell[AXES + ["rep"]].assign(seconds=seconds, window_start=31, window_end=seconds, window_s=seconds - 30,
                                          steady=True, median=np.round(level[::seconds], 1),
                                          stall_threshold=np.round(level[::seconds] / 2, 1))
    windows.to_csv(dir / "steady_state.csv", index=False)


def load(page) -> dict:
    """Seconds to the load event, to the first paint and to the plot drawn, and the traces drawn."""
    with Chromium() as browser:
        load_s = browser.open(page.as_uri(), 1366, 1300)
        drawn = browser.evaluate("new Promise(ok => { const wait = () => window.exploreDrawn ? ok(window.exploreDrawn)"
                                 " : setTimeout(wait, 50); wait(); })")
        paint = browser.evaluate("performance.getEntriesByType('paint').map(e => e.startTime)")
        traces = browser.evaluate("document.getElementById('plot').data.length")
    return {"load_s": load_s, "first_paint_s": min(paint) / 1000, "plot_drawn_s": drawn / 1000, "traces": traces}


def main_page(data: dict, tmp) -> object:
    """The page main's explore.py writes of the same data (for --pairs)."""
    import importlib.util
    import subprocess

    code = subprocess.run(["git", "show", "main:workflow/dbsweep/explore.py"], cwd=ROOT, check=True,
                          capture_output=True).stdout
    (tmp / "explore_main.py").write_bytes(code)
    spec = importlib.util.spec_from_file_location("explore_main", tmp / "explore_main.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = tmp / "explore-main.html"
    module.write(data, page, "bench")
    return page


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=500)
    ap.add_argument("--seconds", type=int, default=300)
    ap.add_argument("--counters", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3, help="page loads (each with a plotly-only page beside)")
    ap.add_argument("--smoke", action="store_true", help="20 cells x 30 s, one round, for the tests")
    ap.add_argument("--pairs", action="store_true", help="also load main's page of the same data, in turn")
    args = ap.parse_args()
    if args.smoke:
        args.cells, args.seconds, args.counters, args.rounds = 20, 30, 8, 1
    use_pipeline_code()
    from dbsweep import explore

    tmp = tempdir("explore")
    study(tmp, args.cells, args.seconds, args.counters)
    start = time.monotonic()
    data = explore.build(tmp, AXES, tmp / "steady_state.csv")
    page = tmp / "explore.html"
    explore.write(data, page, "bench")
    write_s = time.monotonic() - start
    empty = tmp / "plotly-only.html"  # the same page without data: what plotly.js itself costs
    explore.write({"axes": [], "top": [], "cells": [], "series": [], "counters": []}, empty, "bench")
    old = main_page(data, tmp) if args.pairs else None
    runs = []
    for _ in range(args.rounds):  # interleaved, each page in a fresh browser (the smoke test: no baseline)
        runs.append(load(page) | ({} if args.smoke else {"baseline_load_s": load(empty)["load_s"]}))
        if old:
            runs[-1] |= {f"main_{k}": v for k, v in load(old).items() if k in ("load_s", "plot_drawn_s")}
    result = {"cells": args.cells, "seconds": args.seconds, "counters_in_tables": args.counters,
              "counters_in_page": len(data["counters"]), "size_mb": round(page.stat().st_size / 1e6, 2),
              "write_s": round(write_s, 2), "rounds": len(runs)}
    result |= {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}
    print("| figure | value |\n|---|---|")  # the table BENCHMARKS.md quotes; the JSON line last, for tests
    print("\n".join(f"| {key} | {value} |" for key, value in result.items()))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
