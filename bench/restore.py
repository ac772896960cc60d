"""Restore at the copy limit, and restore against reload, on the datasets of the shipped database studies.

Per distinct prepared image of each study named (config/studies/<name>.yaml; the first cell of
each image):

1. reload: make the image from nothing as the prepare rule does (`storage.prepare_image` with
   `run.fill`: sparse file, mkfs, mount, initialise the datadir, start, create the user, load the
   dataset, clean shutdown). Timed once per image.
2. Then `--repeats` interleaved pairs, the order alternating (copy first, then restore first):
   - copy: the physical limit, `cp --sparse=auto IMAGE COPY` on the same filesystem (coreutils 9:
     the allocated extents only, by copy_file_range), then `sync COPY` timed apart (the bytes
     on the disk);
   - restore: `storage.filesystem(spec, image=IMAGE)` until its body starts (copy of the image,
     loop device, mount), then fsync of the restored image timed apart, then the server started
     until it accepts connections (`database.running`) for restore+start.
   The image is read once, untimed, before the pairs, so both sides read it from the page cache.

Restore's own fsync finds nothing to write (losetup --direct-io=on writes the copy back before the
loop device reads it), so the like-for-like limit is copy + sync: restore / (copy + sync) is the goal's
ratio; restore / copy (page cache only) is shown beside it.

Goals: restore within 1.3x of the copy; reload / (restore + start) at least 10x.

    .venv/bin/python bench/restore.py [--studies innodb-vs-myrocks-memory postgresql-tuning ...]
                                      [--repeats 3] [--smoke]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, leftovers, median, table, tempdir, use_pipeline_code  # noqa: E402

use_pipeline_code()
from dbsweep import config, database, run, storage  # noqa: E402
from dbsweep.recipe import Recipe  # noqa: E402

STUDIES = ["innodb-vs-myrocks-memory", "postgresql-tuning", "tpcc-innodb-vs-myrocks-memory",
           "tpcc-postgresql-tuning", "binlog-filesystem", "versions", "open-loop"]
COPY_GOAL, RELOAD_GOAL = 1.3, 10.0


def smoke_study() -> config.Study:
    return config.load({
        "study": "restore-smoke", "axes": {"engine": ["innodb"], "memory": ["64M"], "filesystem": ["ext4"],
                                           "threads": [1], "workload": ["oltp"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "1G"}},
        "workloads": {"oltp": {"tool": "sysbench", "options": {
            "script": "oltp_read_write", "tables": 1, "table_size": 1000, "time": 1}}},
    })


def images(s: config.Study, engines: list[str] | None) -> list:
    """The first cell of each distinct image of a study's database cells (engines filter them)."""
    seen, out = set(), []
    for cell in s.cells:
        spec = s.image_spec(cell)
        if spec is None or "engine" not in spec or (engines and spec["engine"] not in engines):
            continue
        key = s.image(cell)
        if key not in seen:
            seen.add(key)
            out.append(cell)
    return out


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_pair(image: Path, tmp: Path) -> dict:
    dst = tmp / "copy.img"
    out = {"copy": timed(lambda: subprocess.run(["cp", "--sparse=auto", str(image), str(dst)], check=True))}
    out["copy_sync"] = timed(lambda: fsync(dst))
    dst.unlink()
    return out


def restore_pair(recipe: Recipe, image: Path, tmp: Path, log) -> dict:
    out = {}
    start = time.perf_counter()
    with storage.filesystem(recipe.filesystem, tmp / "scratch", tmp / "active", image) as fs:
        out["restore"] = time.perf_counter() - start
        out["restore_sync"] = timed(lambda: fsync(tmp / "scratch" / "fs.img"))
        started = time.perf_counter()
        with database.running(recipe, fs.path, log, recipe.memory):
            out["start"] = time.perf_counter() - started
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", nargs="+", default=STUDIES)
    parser.add_argument("--engines", nargs="+", help="only the images of these engines")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--where", help="folder for the images (default: $TMPDIR or /tmp)")
    parser.add_argument("--smoke", action="store_true", help="one tiny InnoDB image, one pair")
    args = parser.parse_args()
    tmp = tempdir("restore", where=args.where)
    tmp.chmod(0o755)
    if args.smoke:
        args.repeats = 1
        todo = [("smoke", smoke_study())]
    else:
        todo = [(name, config.load_file(ROOT / "config" / "studies" / f"{name}.yaml")) for name in args.studies]
    rows_copy, rows_reload = [], []
    with open(tmp / "bench.log", "w") as log:
        for name, s in todo:
            for cell in images(s, args.engines):
                recipe, spec = s.recipe(cell), s.image_spec(cell)
                image = tmp / "image.img"
                load = os.getloadavg()[0]
                reload_s = timed(lambda spec=spec, image=image: storage.prepare_image(
                    spec["filesystem"], image, lambda root: run.fill(Recipe.preparing(spec), root, tmp, log),
                    tmp / "active"))
                allocated = os.stat(image).st_blocks * 512
                subprocess.run(["cat", str(image)], stdout=subprocess.DEVNULL, check=True)  # into the page cache
                pairs = []
                for i in range(args.repeats):
                    one = [lambda image=image: copy_pair(image, tmp),
                           lambda recipe=recipe, image=image: restore_pair(recipe, image, tmp, log)]
                    pair = {}
                    for step in (one if i % 2 == 0 else one[::-1]):
                        pair |= step()
                    pairs.append(pair)
                image.unlink()

                def med(key, pairs=pairs):
                    return median([p[key] for p in pairs])

                ratios = [p["restore"] / p["copy"] for p in pairs]
                synced = [(p["restore"] + p["restore_sync"]) / (p["copy"] + p["copy_sync"]) for p in pairs]
                what = f"{name}: {spec['engine']} {spec['filesystem']['type']} {spec['tool']} " + \
                    " ".join(f"{k}={v}" for k, v in spec["dataset"].items() if k in ("tables", "table_size", "scale"))
                rows_copy.append([what, f"{allocated / 2**20:.0f}", f"{med('copy'):.2f} + {med('copy_sync'):.2f}",
                                  f"{med('restore'):.2f} + {med('restore_sync'):.2f}",
                                  f"**{median(synced):.2f}**", " ".join(f"{r:.2f}" for r in synced),
                                  f"{median(ratios):.2f}", f"{load:.1f}"])
                restore_start = med("restore") + med("start")
                rows_reload.append([what, f"{reload_s:.1f}", f"{restore_start:.2f}", f"{med('start'):.2f}",
                                    f"**{reload_s / restore_start:.1f}x**",
                                    "met" if reload_s / restore_start >= RELOAD_GOAL else "NOT met", f"{load:.1f}"])
                print(f"{what}: {rows_copy[-1][1:]} {rows_reload[-1][1:]}", file=sys.stderr, flush=True)
    print(f"{args.repeats} interleaved pairs per image; medians; load average (1 min) at the image's start\n")
    print(table(["image", "allocated MiB", "copy s (+ sync)", "restore s (+ sync)", "restore / (copy + sync)",
                 "per pair", "restore / copy, no sync", "load"], rows_copy))
    print()
    print(table(["image", "reload s", "restore + start s", "of which start s", "reload / restore", ">= 10x",
                 "load"], rows_reload))
    left = leftovers(tmp)
    if left:
        sys.exit(f"left behind: {left}")


if __name__ == "__main__":
    main()
