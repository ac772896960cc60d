"""Does the pipeline measure what a careful person would by hand? fio IOPS both ways.

Study: one fio workload (randread 16k psync direct=1, size 256M, runtime 10 s)
at numjobs (threads) 1 and 4 on an ext4 loop filesystem (1G), run by the real
workflow (a copy of workflow/ taken at start; `snakemake -c2`, its default
profile, targets: the two run.json).
The first pipeline round also makes the prepared image; later rounds use
`--forcerun run`.

By hand, per cell: `cp --sparse=auto` of the same prepared image,
`losetup --direct-io=on --find --show`, the mount command of the cell's
run.json, then the fio command line from its run.json `commands` (only the
--output and log paths moved), umount, losetup -d. No monitors, no Python.

Interleaved rounds: pipeline, hand, pipeline, hand, ... Within a round the cells
run in the order the pipeline ran them. IOPS from fio.json (read). Goal: the
median of the per-round pipeline/hand ratios within 3 %.

    .venv/bin/python bench/fidelity.py [--rounds 4] [--runtime 10]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import env, leftovers, median, run, snakemake_argv, snapshot, table, tempdir, write_yaml  # noqa: E402

THREADS = [1, 4]
GOAL = 0.03


def study(runtime: int) -> dict:
    return {
        "study": "fidelity",
        "repetitions": 1,
        "axes": {"filesystem": ["ext4"], "threads": THREADS, "workload": ["fio-rr"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "1G"}},
        "workloads": {"fio-rr": {"tool": "fio", "options": {
            "rw": "randread", "bs": "16k", "size": "256M", "ioengine": "psync", "direct": 1, "runtime": runtime}}},
    }


def cell_dir(work: Path, threads: int) -> Path:
    return work / "results" / "runs" / f"filesystem~ext4/threads~{threads}/workload~fio-rr" / "rep~1"


def fio_report(path: Path) -> dict:
    text = path.read_text()
    return json.loads(text[text.index("{"):])


def read_iops(report: dict) -> float:
    (job,) = report["jobs"]
    return job["read"]["iops"]


def sh(argv: list, **kw) -> str:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))}: {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def hand_argv(fio: list[str], out: Path) -> list[str]:
    """The pipeline's fio command line with its output and log paths moved to out."""
    argv = []
    for arg in fio:
        name, sep, value = arg.partition("=")
        if sep and name == "--output":
            arg = f"{name}={out / Path(value).name}"
        elif sep and name in ("--write_bw_log", "--write_iops_log", "--write_lat_log"):
            arg = f"{name}={out / Path(value).name}"
        argv.append(arg)
    return argv


def by_hand(image: Path, record: dict, work: Path) -> float:
    """One cell by hand; returns read IOPS."""
    fio = [c for c in record["commands"] if c and c[0] == "fio"][-1]
    mount = next(c for c in record["commands"] if c and c[0] == "mount")
    fstype = mount[mount.index("-t") + 1]
    options = mount[mount.index("-o") + 1].split(",") if "-o" in mount else []
    work.mkdir(parents=True)
    img, mnt, out = work / "fs.img", work / "mnt", work / "raw"
    mnt.mkdir()
    out.mkdir()
    sh(["cp", "--sparse=auto", image, img])
    dev = sh(["losetup", "--direct-io=on", "--find", "--show", img]).strip()
    try:
        sh(["mount", "-t", fstype, *(["-o", ",".join(options)] if options else []), dev, mnt])
        try:
            argv = hand_argv(fio, out)
            (work / "argv.json").write_text(json.dumps(argv))
            with open(out / "stdout.txt", "wb") as so, open(out / "stderr.txt", "wb") as se:
                rc = subprocess.run(argv, cwd=mnt, stdout=so, stderr=se).returncode
            if rc:
                raise RuntimeError(f"fio by hand exited with {rc}: {(out / 'stderr.txt').read_text()[-500:]}")
        finally:
            sh(["umount", mnt])
    finally:
        sh(["losetup", "-d", dev])
        img.unlink()
    return read_iops(fio_report(out / "fio.json"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--runtime", type=int, default=10)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--live", action="store_true", help="run workflow/ itself, not a copy taken at start")
    args = ap.parse_args()
    tmp = tempdir("fidelity", args.keep)
    environ = env(tmp)
    workflow = snapshot(tmp, args.live)
    print(f"temp dir: {tmp}; workflow: {workflow}")
    work = tmp / "study"
    work.mkdir()
    write_yaml(work / "study.yaml", study(args.runtime))
    targets = [str(cell_dir(work, t).relative_to(work) / "run.json") for t in THREADS]
    iops = {(way, t): [] for way in ("pipeline", "hand") for t in THREADS}
    order = THREADS
    wall = {"pipeline": [], "hand": []}
    try:
        for r in range(args.rounds):
            extra = [] if r == 0 else ["--forcerun", "run"]
            elapsed, _ = run(snakemake_argv(work, "-c2", "--workflow-profile", workflow / "profiles" / "default", *extra,
                                            *targets, snakefile=workflow / "Snakefile"),
                             work, environ, tmp / f"pipeline-{r}.txt")
            wall["pipeline"].append(elapsed)
            records = {t: json.loads((cell_dir(work, t) / "run.json").read_text()) for t in THREADS}
            order = sorted(THREADS, key=lambda t: records[t]["measure_start"])
            for t in THREADS:
                raw = cell_dir(work, t) / records[t]["attempt"] / "raw" / "fio.json"
                iops[("pipeline", t)].append(read_iops(fio_report(raw)))
            images = sorted((work / "resources" / "images").rglob("*.img"))
            if len(images) != 1:
                raise RuntimeError(f"expected one prepared image, found {images}")
            t0 = time.perf_counter()
            for t in order:
                iops[("hand", t)].append(by_hand(images[0], records[t], tmp / f"hand-{r}-{t}"))
            wall["hand"].append(time.perf_counter() - t0)
            print(f"  round {r + 1}: pipeline " + ", ".join(f"numjobs {t} {iops[('pipeline', t)][-1]:.0f}"
                                                           for t in order)
                  + " | hand " + ", ".join(f"numjobs {t} {iops[('hand', t)][-1]:.0f}" for t in order)
                  + f" IOPS (order {order}; {wall['pipeline'][-1]:.0f} s, {wall['hand'][-1]:.0f} s)", flush=True)
            if leftovers(tmp):
                raise RuntimeError(f"left behind: {leftovers(tmp)}")
    finally:
        if leftovers(tmp):
            print(f"WARNING: left behind: {leftovers(tmp)}", file=sys.stderr)
    rows = []
    for t in THREADS:
        p, h = iops[("pipeline", t)], iops[("hand", t)]
        ratios = [a / b for a, b in zip(p, h)]
        later = ratios[1:] or ratios
        rows.append([t, median(p), median(h), median(ratios), " ".join(f"{x:.3f}" for x in ratios),
                     "yes" if abs(median(ratios) - 1) <= GOAL else "NO",
                     f"{p[0]:.0f} / {median(p[1:] or p):.0f}", f"{h[0]:.0f} / {median(h[1:] or h):.0f}",
                     median(later)])
    print()
    print(table(["numjobs", "pipeline IOPS", "hand IOPS", "pipeline/hand", "per-round ratios", "within 3%",
                 "pipeline 1st / later", "hand 1st / later", "ratio, later rounds"], rows))
    if not args.keep:
        shutil.rmtree(work / "resources", ignore_errors=True)


if __name__ == "__main__":
    main()
