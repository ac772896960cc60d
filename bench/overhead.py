"""Per-cell overhead of the storage steps, against a 5 s measured window.

For ext4 and xfs loop filesystems (1G image, fio file 256M, as in
config/config.yaml), with the pipeline's own functions (workflow/dbsweep), the
specs built by dbsweep.config.load from a study like config/config.yaml:

- mkfs+mount: storage.filesystem(spec) without an image, until the body starts
  (sparse file, losetup, mkfs, mount); teardown (umount, detach, rm) separately.
- prepare: storage.prepare_image with run.fill (the rule prepare: sparse file,
  mkfs, mount, fio writes the 256M file, umount, rename).
- restore+mount: storage.filesystem(spec, image=...) until the body starts
  (copy of the prepared image, losetup, mount); teardown separately.
- collect: dbsweep.collect.collect on a completed repetition.
- repetition: run.repetition, the whole in-process run step of one cell
  (restore, monitors, fio 5 s, manifest, teardown), and its measured window.

The code is a copy of workflow/ taken at start (--live: workflow/ itself).
Interleaved: every repeat does each step on ext4 then xfs. Each step is also
given relative to the measured window of the same repeat's repetition (about
5 s). Medians.

    .venv/bin/python bench/overhead.py [--repeats 3]
    .venv/bin/python bench/overhead.py --smoke     # one repeat, 16M file, 2 s window: checks it still runs
"""
from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import leftovers, median, snapshot, table, tempdir, use_pipeline_code  # noqa: E402

collect = config = run = storage = None  # dbsweep modules, imported in main() from the workflow copy

WINDOW_S = 5
FILESYSTEMS = ("ext4", "xfs")


def study(window: int = WINDOW_S, size: str = "256M"):
    return config.load({
        "study": "overhead",
        "axes": {"filesystem": list(FILESYSTEMS), "threads": [1], "workload": ["fio-randread"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "1G"}, "xfs": {"type": "xfs", "size": "1G"}},
        "workloads": {"fio-randread": {"tool": "fio", "options": {
            "rw": "randread", "bs": "16k", "size": size, "ioengine": "psync", "direct": 1, "iodepth": 1,
            "runtime": window}}},
    })


def collect_rep(rep: Path) -> None:
    """dbsweep.collect.collect on one repetition folder, as the collect rule's script calls it."""
    outputs = {name: rep / f"{name}.{ext}" for name, ext in
               (("samples", "csv"), ("system", "csv"), ("counters", "csv"), ("summary", "json"))}
    if len(inspect.signature(collect.collect).parameters) == 2:  # collect(run_json, {name: path})
        collect.collect(rep / "run.json", outputs)
    else:  # the older collect(run_json, samples, system, summary)
        collect.collect(rep / "run.json", outputs["samples"], outputs["system"], outputs["summary"])


def timed_context(cm) -> tuple[float, float]:
    """(seconds to enter, seconds to exit) of a context manager with an empty body."""
    t0 = time.perf_counter()
    with cm as mounted:
        t1 = time.perf_counter()
        assert mounted.path.is_mount(), mounted.path
    return t1 - t0, time.perf_counter() - t1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--live", action="store_true", help="import workflow/dbsweep itself, not a copy taken at start")
    ap.add_argument("--smoke", action="store_true", help="one repeat, 16M file, 2 s window: does it still run")
    args = ap.parse_args()
    if args.smoke:
        args.repeats = 1
    tmp = tempdir("overhead", args.keep)
    workflow = snapshot(tmp, args.live)
    print(f"temp dir: {tmp}; workflow: {workflow}")
    use_pipeline_code(workflow)
    global collect, config, run, storage
    from dbsweep import collect, config, run, storage
    from dbsweep.recipe import Recipe
    active = tmp / "active"
    s = study(2, "16M") if args.smoke else study()
    window_s = 2 if args.smoke else WINDOW_S
    cells = {c["filesystem"]: c for c in s.cells}
    steps = ["mkfs+mount", "mkfs teardown", "prepare", "restore+mount", "restore teardown", "collect",
             "repetition (whole run step)", "measured window"]
    times = {(fs, step): [] for fs in FILESYSTEMS for step in steps}
    ratios = {(fs, step): [] for fs in FILESYSTEMS for step in steps}
    log = open(tmp / "log.txt", "w")  # the steps' own log (fio's output), as the rules write it
    try:
        for i in range(args.repeats):
            for fs in FILESYSTEMS:
                cell = cells[fs]
                recipe = s.recipe(cell)
                spec = s.image_spec(cell)
                work = tmp / f"{fs}-{i}"
                work.mkdir()
                got = {}
                got["mkfs+mount"], got["mkfs teardown"] = timed_context(
                    storage.filesystem(recipe.filesystem, work / "fresh", active))

                image = work / "images" / "prepared.img"
                image.parent.mkdir()
                t0 = time.perf_counter()
                storage.prepare_image(spec["filesystem"], image,
                                      lambda root, spec=spec, work=work: run.fill(Recipe.preparing(spec), root,
                                                                                  work / "prepare-scratch", log),
                                      active)
                got["prepare"] = time.perf_counter() - t0

                got["restore+mount"], got["restore teardown"] = timed_context(
                    storage.filesystem(recipe.filesystem, work / "restored", active, image))

                rep = work / "results" / "rep~1"
                rep.mkdir(parents=True)
                t0 = time.perf_counter()
                record = run.repetition(cell.as_dict(), 1, recipe, rep / "run.json", image, active, log)
                got["repetition (whole run step)"] = time.perf_counter() - t0
                window = record["measure_end"] - record["measure_start"]
                got["measured window"] = window

                t0 = time.perf_counter()
                collect_rep(rep)
                got["collect"] = time.perf_counter() - t0
                summary = json.loads((rep / "summary.json").read_text())

                for step, value in got.items():
                    times[(fs, step)].append(value)
                    ratios[(fs, step)].append(value / window)
                image.unlink()
                print(f"  repeat {i + 1} {fs}: " + ", ".join(f"{k} {v:.2f}s" for k, v in got.items())
                      + f"; fio {summary['iops']:.0f} IOPS", flush=True)
                if leftovers(tmp):
                    raise RuntimeError(f"left behind: {leftovers(tmp)}")
    finally:
        storage.sweep_stale(active)  # only if something above failed half-way
    rows = []
    for step in steps:
        row = [step]
        for fs in FILESYSTEMS:
            row += [median(times[(fs, step)]), f"{100 * median(ratios[(fs, step)]):.0f}%"]
        rows.append(row)
    print()
    print(table(["step", "ext4 s", "ext4 / window", "xfs s", "xfs / window"], rows))
    per_cell = {fs: median([sum(x) for x in zip(times[(fs, "restore+mount")], times[(fs, "restore teardown")],
                                                times[(fs, "collect")], strict=False)]) for fs in FILESYSTEMS}
    print("\nper-cell storage overhead (restore+mount + teardown + collect), median: "
          + ", ".join(f"{fs} {v:.2f} s = {100 * v / window_s:.0f}% of {window_s} s" for fs, v in per_cell.items()))
    assert not leftovers(tmp), leftovers(tmp)


if __name__ == "__main__":
    main()
