"""Does the pipeline measure what a careful person would by hand? fio IOPS both ways.

Study: one fio workload (randread 16k psync direct=1, size 256M, runtime 10 s)
at numjobs (threads) 1 and 4 on an ext4 loop filesystem (1G), run by the real
workflow (a copy of workflow/ taken at start; `snakemake -c2`, its default
profile), one cell per invocation (target: that cell's run.json;
`--forcerun run` once it exists).

By hand, per cell: `cp --sparse=auto` of the same prepared image,
`losetup --direct-io=on --find --show`, the mount command of the cell's
run.json, then the fio command line from its run.json `commands` (only the
--output and log paths moved), umount, losetup -d. No monitors, no Python.

First, an untimed set-up round runs the pipeline for both cells (it also
makes the prepared image): the pipeline's first runs. Then each round runs,
for each cell, pipeline, hand and hand again, adjacent in time, the order
rotated every round (P H H', H H' P, H' P H, ...) so that no way always
follows the same one. hand-again / hand is the noise floor (an A/A test):
the spread pipeline / hand would have if the pipeline added nothing.
IOPS from fio.json (read). Goal: median pipeline / hand within 3 %.

With --fs tmpfs the cell runs on a tmpfs (no image): by hand is the mount
command of its run.json, then its commands in order (fio's prepare, then the
measured fio). With --no-aa only pipeline and hand run, the order alternating
(P H, H P, ...): the pairs for --rounds 40. The median ratio's 95% CI is the
distribution-free one of the median (order statistics, binomial); the goal
then is that it contains 1 and its half-width is at most 3 %.

--hold-mb N: a third way, "hand held": the hand path while a process holds N MB
of memory it has touched (its mount, dataset and measured fio), as the
pipeline's own processes do (Snakemake's and its job's Python: about 235 MB
resident); rotated with the other two, and pipeline / hand held is a row of its
own. On this VM where a tmpfs file's pages land decides how fast it reads
(BENCHMARKS.md, fidelity), and memory held elsewhere while it is written moves
them.

    .venv/bin/python bench/fidelity.py [--rounds 5] [--runtime 10] [--where /dev/shm]
    .venv/bin/python bench/fidelity.py --smoke     # one round of 2 s runs at numjobs 1: checks it still runs
    .venv/bin/python bench/fidelity.py --fs tmpfs --threads 1 --no-aa --rounds 40 --runtime 3 [--hold-mb 235]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import env, leftovers, median, median_ci, run, snakemake_argv, snapshot, table, tempdir, write_yaml  # noqa: E402

THREADS = [1, 4]
GOAL = 0.03


def study(runtime: int, fs: str = "ext4", threads: list[int] = THREADS) -> dict:
    return {
        "study": "fidelity",
        "repetitions": 1,
        "axes": {"filesystem": [fs], "threads": threads, "workload": ["fio-rr"]},
        "filesystems": {fs: {"type": fs, "size": "1G"}},
        "workloads": {"fio-rr": {"tool": "fio", "options": {
            "rw": "randread", "bs": "16k", "size": "256M", "ioengine": "psync", "direct": 1, "runtime": runtime}}},
    }


def cell_dir(work: Path, threads: int, fs: str = "ext4") -> Path:
    return work / "results" / "runs" / f"filesystem~{fs}/threads~{threads}/workload~fio-rr" / "rep~1"


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
        if sep and name in ("--output", "--write_bw_log", "--write_iops_log", "--write_lat_log"):
            arg = f"{name}={out / Path(value).name}"
        argv.append(arg)
    return argv


@contextmanager
def holding(mb: int):
    """A process holding mb MB of memory it has touched, for as long as the block runs (none for 0)."""
    if not mb:
        yield
        return
    code = (f"b = bytearray({mb} * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
            "import sys; print('held', flush=True); sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        holder.stdout.readline()
        yield
    finally:
        holder.stdin.close()
        holder.wait()


def by_hand(image: Path | None, record: dict, work: Path) -> float:
    """One cell by hand; returns read IOPS. Without an image, a tmpfs cell."""
    fio = [c for c in record["commands"] if c and c[0] == "fio"][-1]
    mount = next(c for c in record["commands"] if c and c[0] == "mount")
    fstype = mount[mount.index("-t") + 1]
    options = mount[mount.index("-o") + 1].split(",") if "-o" in mount else []
    work.mkdir(parents=True)
    img, mnt, out = work / "fs.img", work / "mnt", work / "raw"
    mnt.mkdir()
    out.mkdir()
    if image is None:
        return tmpfs_by_hand(record, options, fio, mnt, out, work)
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


def tmpfs_by_hand(record: dict, options: list[str], fio: list[str], mnt: Path, out: Path, work: Path) -> float:
    sh(["mount", "-t", "tmpfs", *(["-o", ",".join(options)] if options else []), "tmpfs", mnt])
    try:
        for argv in record["commands"]:
            if argv and argv[0] == "fio" and argv is not fio:  # the dataset, as the pipeline made it
                sh(argv, cwd=mnt)
        argv = hand_argv(fio, out)
        with open(out / "stdout.txt", "wb") as so, open(out / "stderr.txt", "wb") as se:
            rc = subprocess.run(argv, cwd=mnt, stdout=so, stderr=se).returncode
        if rc:
            raise RuntimeError(f"fio by hand exited with {rc}: {(out / 'stderr.txt').read_text()[-500:]}")
    finally:
        sh(["umount", mnt])
    return read_iops(fio_report(out / "fio.json"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runtime", type=int, default=10)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--where", help="parent of the temp dir, i.e. where the images and loop files live "
                    "(default /tmp, on the VM's disk; /dev/shm keeps the disk, and its noise, out)")
    ap.add_argument("--live", action="store_true", help="run workflow/ itself, not a copy taken at start")
    ap.add_argument("--fs", choices=["ext4", "xfs", "tmpfs"], default="ext4")
    ap.add_argument("--threads", type=int, nargs="+", default=THREADS, help="fio numjobs, one cell each")
    ap.add_argument("--no-aa", action="store_true", help="pairs only: no second run by hand (A/A)")
    ap.add_argument("--smoke", action="store_true", help="one round of 2 s runs at numjobs 1: does it still run")
    ap.add_argument("--hold-mb", type=int, default=0, help="a third way: the hand path while another process "
                    "holds this much memory")
    args = ap.parse_args()
    if args.smoke:
        args.rounds, args.runtime, args.threads = 1, 2, [1]
    threads, fs = args.threads, args.fs
    tmp = tempdir("fidelity", args.keep, args.where)
    environ = env(tmp)
    workflow = snapshot(tmp, args.live)
    print(f"temp dir: {tmp}; workflow: {workflow}")
    work = tmp / "study"
    work.mkdir()
    write_yaml(work / "study.yaml", study(args.runtime, fs, threads))
    snakefile = workflow / "Snakefile"
    profile = workflow / "profiles" / "default"
    ways = ["pipeline", "hand"] + ([] if args.no_aa else ["hand again"]) + (["hand held"] if args.hold_mb else [])
    iops = {(way, t): [] for way in ways for t in threads}
    first = {}

    def pipeline(t: int, force: bool, log: Path) -> tuple[float, dict]:
        target = str(cell_dir(work, t, fs).relative_to(work) / "run.json")
        # the target before --forcerun, which takes every word up to the next option as its own
        force_run = ["--forcerun", "run"] if force else []
        run(snakemake_argv(work, "-c2", "--workflow-profile", profile, target, *force_run, snakefile=snakefile),
            work, environ, log)
        record = json.loads((cell_dir(work, t, fs) / "run.json").read_text())
        return read_iops(fio_report(cell_dir(work, t, fs) / record["attempt"] / "raw" / "fio.json")), record

    try:
        records = {}
        for t in threads:  # set-up round: makes the image; the pipeline's first runs
            first[("pipeline", t)], records[t] = pipeline(t, False, tmp / f"setup-{t}.txt")
        images = sorted((work / "resources" / "images").rglob("*.img")) or [None]
        if len(images) != 1 or (images[0] is None) != (fs == "tmpfs"):
            raise RuntimeError(f"expected one prepared image (none on tmpfs), found {images}")
        print("  set-up (pipeline, first runs): " + ", ".join(f"numjobs {t} {first[('pipeline', t)]:.0f}"
                                                             for t in threads) + " IOPS", flush=True)
        for r in range(args.rounds):
            order = ways[r % len(ways):] + ways[:r % len(ways)]
            for t in threads:
                got = {}
                for way in order:
                    if way == "pipeline":
                        got[way], records[t] = pipeline(t, True, tmp / f"pipeline-{r}-{t}.txt")
                    else:
                        with holding(args.hold_mb if way == "hand held" else 0):
                            got[way] = by_hand(images[0], records[t], tmp / f"{way.replace(' ', '-')}-{r}-{t}")
                        first.setdefault((way, t), got[way])
                    iops[(way, t)].append(got[way])
                print(f"  round {r + 1}, numjobs {t}: " + ", ".join(f"{w} {got[w]:.0f}" for w in order)
                      + f" IOPS; pipeline/hand {got['pipeline'] / got['hand']:.3f}"
                      + (f", hand again/hand {got['hand again'] / got['hand']:.3f}" if "hand again" in got else "")
                      + (f", pipeline/hand held {got['pipeline'] / got['hand held']:.3f}"
                         if "hand held" in got else ""),
                      flush=True)
                if leftovers(tmp):
                    raise RuntimeError(f"left behind: {leftovers(tmp)}")
    finally:
        if leftovers(tmp):
            print(f"WARNING: left behind: {leftovers(tmp)}", file=sys.stderr)
    rows = []
    for t, against in ((t, way) for t in threads for way in ("hand", "hand held") if (way, t) in iops):
        p, h = iops[("pipeline", t)], iops[(against, t)]
        a = iops.get(("hand again", t)) or iops[("hand", t)]
        ratio = [x / y for x, y in zip(p, h, strict=False)]
        noise = [x / y for x, y in zip(a, iops[("hand", t)], strict=False)]
        low, high = median_ci(ratio)
        half = max(median(ratio) - low, high - median(ratio))
        rows.append([fs, t, f"pipeline / {against}", len(ratio), median(p), median(h), median(ratio),
                     f"{low:.3f}-{high:.3f}", f"{100 * half:.1f}%", f"{min(ratio):.3f}-{max(ratio):.3f}",
                     "-" if args.no_aa else f"{median(noise):.3f} ({min(noise):.3f}-{max(noise):.3f})",
                     "yes" if low <= 1 <= high and half <= GOAL else "NO",
                     f"{first[('pipeline', t)]:.0f} / {median(p):.0f}"])
    print()
    print(table(["fs", "numjobs", "ratio", "pairs", "pipeline IOPS", "hand IOPS", "pipeline/hand", "95% CI",
                 "CI half-width", "range", "hand again/hand (A/A)", "CI holds 1, half-width <= 3%",
                 "pipeline first (set-up) / rounds"],
                rows))
    if not args.keep:
        shutil.rmtree(work / "resources", ignore_errors=True)

if __name__ == "__main__":
    main()
