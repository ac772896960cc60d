"""Device classes, declared against delivered: fio on a capped loop filesystem, by IO path.

A class (--iops IOs per second and --mibs MiB/s, read and write) caps an ext4 loop filesystem as a run
does (storage.filesystem with the class: the blkio rule in the root cgroup), restored from a prepared
image holding a written file (reads of a hole or of an unwritten extent never reach the device). On it,
fio runs each IO path for --seconds, --runs times, and the table gives the medians of two figures:

- what fio measured (its IOPS or MiB/s in the path's direction), and
- what reached the loop device (/sys/block/loopN/stat, over fio's runtime): the rate the cap
  holds, journal and writeback included.

Buffered writes without fsync go to the page cache at memory speed (so would a real device's); the
writeback that follows is then timed with `sync`, done by the kernel's flusher threads, and its
device rate is the figure. "The class allows" is the IOPS or bandwidth cap, whichever binds at the
size of the IOs the device received (the kernel splits a 1M direct write in two, and writeback makes
its own sizes; blkio counts each as an IO). Flushes (an fsync's cache flush) are a column of their own:
the throttle counts an empty flush as a write IO, while the device's stat counts it apart from writes.

    .venv/bin/python bench/device_classes.py [--iops 1000] [--mibs 20] [--seconds 5] [--runs 3]
    .venv/bin/python bench/device_classes.py --smoke      # 1 s per path, one run: checks it still runs
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import data_image, tempdir, use_pipeline_code

use_pipeline_code()
from dbsweep import storage  # noqa: E402

FILE_MIB = 256
WRITE_MIB = 1024  # a buffered write's most (the filesystem is 2G, FILE_MIB of it taken)
# path name -> (fio arguments, the direction it measures, the figure: iops or bw (MiB/s))
DIRECT = ["--direct=1", "--ioengine=libaio", "--iodepth=16"]
PATHS = {
    "randread 4k direct": (["--rw=randread", "--bs=4k", *DIRECT], "read", "iops"),
    "read 1M direct": (["--rw=read", "--bs=1M", *DIRECT], "read", "bw"),
    "randread 4k buffered": (["--rw=randread", "--bs=4k", "--ioengine=psync", "--invalidate=1"], "read", "iops"),
    "randwrite 4k direct": (["--rw=randwrite", "--bs=4k", *DIRECT], "write", "iops"),
    "write 1M direct": (["--rw=write", "--bs=1M", *DIRECT], "write", "bw"),
    "randwrite 4k fsync each": (["--rw=randwrite", "--bs=4k", "--ioengine=psync", "--fsync=1"], "write", "iops"),
    "write 1M buffered, end fsync": (["--rw=write", "--bs=1M", "--ioengine=psync", "--end_fsync=1"], "write", "bw"),
    "write 1M buffered, no fsync": (["--rw=write", "--bs=1M", "--ioengine=psync"], "write", "bw"),
}


def device_stat(dev: str) -> dict[str, int]:
    """Completed IOs, bytes and flushes of a block device, from its sysfs stat (Documentation/block/stat)."""
    f = [int(x) for x in Path(f"/sys/block/{dev}/stat").read_text().split()]
    return {"read_ios": f[0], "read_bytes": f[2] * 512, "write_ios": f[4], "write_bytes": f[6] * 512,
            "flushes": f[15]}


def rate(before: dict, after: dict, seconds: float, direction: str, bound: str) -> float:
    """The device's IOs per second or MiB/s in a direction between two stats."""
    key = f"{direction}_ios" if bound == "iops" else f"{direction}_bytes"
    value = (after[key] - before[key]) / seconds
    return value if bound == "iops" else value / 2**20



def allowed(caps: dict, direction: str, bound: str, size: float) -> float:
    """What the class lets through in a direction for IOs of `size` bytes as the device receives them (the
    kernel may split fio's blocks, or merge them, and writeback makes its own): the IOPS cap or the
    bandwidth cap, whichever binds at that size; in IOs/s or MiB/s."""
    per_second = min(caps[f"{direction}_iops"] * size, caps[f"{direction}_bps"])
    return per_second / size if bound == "iops" else per_second / 2**20


def measure(fs, args: list[str], direction: str, bound: str, seconds: int, mibs: float) -> tuple:
    """One fio run of a path on the mounted filesystem: (fio's figure, the device's figure, the device's
    mean IO size in bytes, its flushes per second). Buffered
    sequential writes write a fixed amount (about `seconds` at the cap), so that fio's figure includes its
    fsync, or the writeback after it can be timed."""
    dev = fs.devices[0]
    if "--ioengine=psync" in args and direction == "write" and "--fsync=1" not in args:
        time_args = [f"--size={min(WRITE_MIB, max(8, round(seconds * mibs)))}M", "--filename=scratch"]
    else:
        time_args = [f"--size={FILE_MIB}M", "--filename=data", f"--runtime={seconds}", "--time_based"]
    argv = ["fio", "--name=path", f"--directory={fs.path}", *args, *time_args, "--output-format=json"]
    before = device_stat(dev)
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    after = device_stat(dev)
    job = json.loads(out)["jobs"][0][direction]
    figure = job["iops"] if bound == "iops" else job["bw_bytes"] / 2**20
    seconds = job["runtime"] / 1000  # fio's own time, not its start-up
    device = rate(before, after, seconds, direction, bound)
    end = after
    if "--fsync=1" not in args and "--end_fsync=1" not in args and "--direct=1" not in args and direction == "write":
        start = time.monotonic()  # the writeback of what fio left dirty, by the flusher threads
        subprocess.run(["sync", "-f", str(fs.path / "scratch")], check=True)
        seconds = time.monotonic() - start
        end = device_stat(dev)
        device = rate(after, end, seconds, direction, bound)
        before = after
    (fs.path / "scratch").unlink(missing_ok=True)
    ios = end[f"{direction}_ios"] - before[f"{direction}_ios"]
    size = (end[f"{direction}_bytes"] - before[f"{direction}_bytes"]) / max(ios, 1)
    return figure, device, size, (end["flushes"] - before["flushes"]) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iops", type=int, default=1000)
    parser.add_argument("--mibs", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.runs = 1, 1
    tmp = tempdir("devices", where="/var/tmp")
    spec, image, active = data_image(tmp, "2G", FILE_MIB)
    caps = {"read_iops": args.iops, "write_iops": args.iops, "read_bps": args.mibs << 20, "write_bps": args.mibs << 20}
    rows = []
    with storage.filesystem(spec | {"device_class": {"name": "bench"} | caps}, tmp / "scratch", active, image) as fs:
        delivered = fs.facts["device_class"]["delivered"]
        for name, (fio_args, direction, bound) in PATHS.items():
            mibs = allowed(caps, direction, "bw", 4096 if "--bs=4k" in fio_args else 2**20)
            got = [measure(fs, fio_args, direction, bound, args.seconds, mibs) for _ in range(args.runs)]
            fio, device, size, flushes = (statistics.median(g[i] for g in got) for i in range(4))
            rows.append((name, bound, size, allowed(caps, direction, bound, size), fio, device, flushes))
    unit = {"iops": "IOs/s", "bw": "MiB/s"}
    print(f"class: {args.iops} IOPS, {args.mibs} MiB/s each way; read back from blkio: {delivered}")
    print(f"{args.runs} runs of {args.seconds} s per path (medians)\n")
    print("| IO path | unit | device IO size (KiB) | the class allows | fio saw | device saw | device / class "
          "| device flushes/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, bound, size, want, fio, device, flushes in rows:
        print(f"| {name} | {unit[bound]} | {size / 1024:.0f} | {want:.1f} | {fio:.1f} | {device:.1f} | "
              f"{device / want:.3f} | {flushes:.1f} |")


if __name__ == "__main__":
    main()
