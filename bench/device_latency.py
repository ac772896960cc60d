"""Device classes with a per-IO latency, declared against delivered: fio on an ext4 loop filesystem whose
image the delay server serves (storage.delayed: delay_server.py in nbdkit, its holds calibrated by
storage.calibrate), against the same image without it.

For each declared latency (--latencies, ms; 0 is the image without nbdkit, as a class without a latency
runs) the table gives the holds the calibration set, and per IO path the medians over --runs of:

- fio's completion latency, median and mean (ms), and its IOPS;
- the loop device's own time per IO (/sys/block/loopN/stat: ms spent over IOs completed): what a run
  records as await_ms, the journal's IOs included;
- the CPU time nbdkit and nbdfuse took per IO the loop device completed (µs): the price of the path on
  a host whose 2 cores the database shares.

    .venv/bin/python bench/device_latency.py [--latencies 0,1,2,5] [--seconds 5] [--runs 3]
    .venv/bin/python bench/device_latency.py --smoke     # 1 s per path, one run, 0 and 1 ms
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import data_image, tempdir, use_pipeline_code

use_pipeline_code()
from dbsweep import storage  # noqa: E402

FILE_MIB = 128
ONE = ["--ioengine=psync", "--iodepth=1"]
# path name -> (fio arguments, the direction it measures)
PATHS = {
    "randwrite 4k direct, depth 1": (["--rw=randwrite", "--bs=4k", "--direct=1", *ONE], "write"),
    "randread 4k direct, depth 1": (["--rw=randread", "--bs=4k", "--direct=1", *ONE], "read"),
    "randwrite 4k, fsync each": (["--rw=randwrite", "--bs=4k", "--fsync=1", *ONE], "write"),
    "randwrite 4k direct, depth 16": (["--rw=randwrite", "--bs=4k", "--direct=1", "--ioengine=libaio",
                                       "--iodepth=16"], "write"),
}



def path_cpu_ticks(folder: Path) -> int:
    """CPU ticks (user + system) of the nbdkit and nbdfuse processes serving folder's image so far."""
    total = 0
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] in ("nbdkit", "nbdfuse") and str(folder) in " ".join(proc.info["cmdline"] or []):
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total


def loop_stat(dev: str) -> list[int]:
    return [int(x) for x in Path(f"/sys/block/{dev}/stat").read_text().split()]


def measure(fs, folder: Path, args: list[str], direction: str, seconds: int) -> dict:
    """One fio run of a path: fio's latency and IOPS, the loop device's time per IO, the path's CPU per IO."""
    dev = fs.devices[0]
    argv = ["fio", "--name=path", f"--filename={fs.path}/data", f"--size={FILE_MIB}M", *args, f"--runtime={seconds}",
            "--time_based", "--output-format=json"]
    ticks, before = path_cpu_ticks(folder), loop_stat(dev)
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    ticks, after = path_cpu_ticks(folder) - ticks, loop_stat(dev)
    job = json.loads(out)["jobs"][0][direction]
    ios = (after[0] - before[0]) + (after[4] - before[4])
    done, spent = (0, 3) if direction == "read" else (4, 7)
    return {"p50": job["clat_ns"]["percentile"]["50.000000"] / 1e6, "mean": job["clat_ns"]["mean"] / 1e6,
            "iops": job["iops"], "await": (after[spent] - before[spent]) / max(after[done] - before[done], 1),
            "cpu_us": ticks * 1e6 / os.sysconf("SC_CLK_TCK") / max(ios, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latencies", default="0,1,2,5")
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.runs, args.latencies = 1, 1, "0,1"
    tmp = tempdir("latency", where="/var/tmp")
    spec, image, active = data_image(tmp, "1G", FILE_MIB)
    rows = []
    for ms in (int(x) for x in args.latencies.split(",")):
        latency = {"read_latency_ms": ms, "write_latency_ms": ms} if ms else {}
        on = spec | ({"device_class": {"name": "bench"} | latency} if ms else {})
        with storage.filesystem(on, tmp / f"scratch-{ms}", active, image) as fs:
            delivered = fs.facts.get("device_class", {}).get("latency", {}).get("hold_ms", {})
            for name, (fio_args, direction) in PATHS.items():
                got = [measure(fs, tmp / f"scratch-{ms}", fio_args, direction, args.seconds) for _ in range(args.runs)]
                rows.append((ms, delivered, name) + tuple(statistics.median(g[k] for g in got)
                                                          for k in ("p50", "mean", "iops", "await", "cpu_us")))
    load = os.getloadavg()[0]
    print(f"{args.runs} runs of {args.seconds} s per path (medians); load average {load:.1f} at the end\n")
    print("| declared ms | hold ms (calibrated) | IO path | fio p50 ms | fio mean ms | IOPS | loop device ms/IO "
          "| nbdkit+nbdfuse CPU µs/IO |")
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    for ms, delivered, name, p50, mean, iops, wait, cpu in rows:
        shown = ", ".join(f"{k.split('_')[0]} {v:.3f}" for k, v in delivered.items()) or "-"
        print(f"| {ms} | {shown} | {name} | {p50:.3f} | {mean:.3f} | {iops:,.0f} | {wait:.2f} | {cpu:.0f} |")


if __name__ == "__main__":
    main()
