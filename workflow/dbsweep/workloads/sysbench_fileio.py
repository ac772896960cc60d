"""sysbench fileio: test_file.* in the data directory, run with per-second reports.

Raw output kept in rawdir: stdout.txt (header, one line per second, final
report) and stderr.txt, both saved by the caller.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from dbsweep import units
from dbsweep.errors import ConfigError
from dbsweep.workloads import (CHANGES_OUTPUT, RUNS_COMMAND, SET_BY_DBSWEEP, check_rate, rate, refuse,
                               sysbench_time)
from dbsweep.workloads.contract import STORAGE, Workload

TOOL = "sysbench-fileio"
PERCENTILE = 95
OPEN_LOOP_PERCENTILE = 99  # with --rate, as for OLTP (sysbench_oltp.py), queue time included

# Options a study may not set (compared as _key(name)), and why: those the pipeline sets itself, those that
# would change the stdout this module parses (verbosity hides the interval lines, checkpoints add other
# ones), a file of more options that no check sees, and LuaJIT's control commands (sysbench 1.1's
# --luajit-cmd, whose `v=FILE` writes where it says).
RESERVED = {
    **dict.fromkeys(("threads", "report-interval", "percentile"), SET_BY_DBSWEEP),
    **dict.fromkeys(("verbosity", "report-checkpoints", "histogram", "debug", "help", "version"), CHANGES_OUTPUT),
    "config-file": "reads options from a file no check sees",
    "luajit-cmd": RUNS_COMMAND,
}
REQUIRED = ("file-test-mode",)
# What `prepare` writes, with sysbench's defaults, so that a cell spelling a
# default out shares its prepared files with one that leaves it implicit.
DATASET_DEFAULTS = {"file-num": 128, "file-total-size": "2G"}

INTERVAL = re.compile(
    r"^\[ (?P<t>\d+)s \] reads: (?P<r>[\d.]+) MiB/s writes: (?P<w>[\d.]+) MiB/s "
    r"fsyncs: (?P<f>[\d.]+)/s latency \(ms,(?P<pct>\d+)%\): (?P<lat>[\d.]+)$")
BLOCK = re.compile(r"^Block size (?P<n>[\d.]+)(?P<unit>B|KiB|MiB|GiB)$", re.M)
UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def _key(name) -> str:
    # sysbench accepts --file_num as well as --file-num
    return str(name).replace("_", "-")


def _value(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def check(options: dict, where: str) -> None:
    refuse(options, where, RESERVED, _key, "sysbench")
    present = {_key(name) for name in options}
    for name in REQUIRED:
        if name not in present:
            raise ConfigError(f"{where}.{name}: missing (one of seqwr, seqrewr, seqrd, rndrd, rndwr, rndrw)")
    check_rate(options, where)


def percentile(options: dict) -> int:
    return OPEN_LOOP_PERCENTILE if rate(TOOL, options) else PERCENTILE


def dataset(options: dict) -> dict:
    given = {_key(name): value for name, value in options.items()}
    return {name: given.get(name, default) for name, default in DATASET_DEFAULTS.items()}


def dataset_bytes(dataset: dict) -> int | None:
    """Bytes the test files take on their filesystem, or None when the size is not a plain size."""
    try:
        return units.parse_size(dataset["file-total-size"])
    except ConfigError:
        return None


def prepare(options: dict) -> list[list[str]]:
    files = dataset(options)
    return [["sysbench", "fileio", f"--file-num={_value(files['file-num'])}",
             f"--file-total-size={_value(files['file-total-size'])}", "prepare"]]


def command(options: dict, threads: int, rawdir: Path) -> list[str]:
    return (["sysbench", "fileio", f"--threads={threads}", "--report-interval=1", f"--percentile={percentile(options)}"]
            + [f"--{name}={_value(value)}" for name, value in options.items()]
            + ["run"])


def block_size(stdout: str, path: Path) -> int:
    """The block size in bytes from the header line, e.g. "Block size 16KiB".

    sysbench rounds it to 4 decimals ("Block size 2.9297KiB" for 3000 bytes),
    which in KiB is still exact to 0.06 bytes; a value that does not come back
    to a whole number of bytes (an odd size printed in MiB) is refused.
    """
    match = BLOCK.search(stdout)
    if not match:
        raise ValueError(f"{path}: no 'Block size' line in the sysbench header")
    size = float(match["n"]) * UNITS[match["unit"]]
    if round(size) < 1 or abs(size - round(size)) > 0.06:
        raise ValueError(f"{path}: {match[0]!r} is not an exact number of bytes")
    return round(size)


def _stdout(rawdir: Path) -> tuple[str, Path]:
    path = Path(rawdir) / "stdout.txt"
    if not path.exists():
        raise ValueError(f"{path}: missing (sysbench did not run)")
    return path.read_text(), path


def samples(rawdir: Path, start: float) -> list[dict]:
    """One row per interval line; sysbench's times are seconds since `start`.

    The lines give MiB/s, not operations: iops = MiB/s * 2**20 / block size, and
    fsyncs are not counted. The latency is the interval's 95th percentile over
    all events (fsyncs included); sysbench prints 0 for an interval without
    events, which is reported as None. With --rate it is the 99th percentile,
    queue time included, in lat_p99_ms (sysbench fileio prints no queue length).
    """
    text, path = _stdout(rawdir)
    bs = block_size(text, path)
    rows = []
    for line in text.splitlines():
        if not line.startswith("[ "):
            continue
        match = INTERVAL.match(line)
        if not match:
            raise ValueError(f"{path}: not a sysbench fileio interval line: {line!r}")
        pct = int(match["pct"])
        if pct not in (PERCENTILE, OPEN_LOOP_PERCENTILE):
            raise ValueError(f"{path}: interval latency is the {pct}th percentile, expected {PERCENTILE}th "
                             f"(or {OPEN_LOOP_PERCENTILE}th with --rate)")
        second = int(match["t"])
        mibs = float(match["r"]) + float(match["w"])
        idle = mibs == 0 and float(match["f"]) == 0
        latency = None if idle else float(match["lat"])
        rows.append({
            "time": start + second,
            "second": second,
            "iops": mibs * 2**20 / bs,
            "mibs": mibs,
            "lat_ms": None,
            "lat_pct_ms": latency if pct == PERCENTILE else None,
            "lat_p99_ms": latency if pct == OPEN_LOOP_PERCENTILE else None,
        })
    seconds = [r["second"] for r in rows]
    if seconds != sorted(set(seconds)):
        raise ValueError(f"{path}: interval lines are not in increasing seconds: {seconds}")
    return rows


def live(line: str, state: dict) -> tuple[int, float, str] | None:
    """(second, IOPS, "IOPS") of an interval line, for the progress line; the block size comes
    from the header, read before (MiB/s until then)."""
    block = BLOCK.match(line)
    if block:
        state["bs"] = float(block["n"]) * UNITS[block["unit"]]
    match = INTERVAL.match(line)
    if not match:
        return None
    mibs = float(match["r"]) + float(match["w"])
    if "bs" in state:
        return int(match["t"]), mibs * 2**20 / state["bs"], "IOPS"
    return int(match["t"]), mibs, "MiB/s"


def _figure(text: str, label: str, path: Path) -> float:
    match = re.search(rf"^\s+{re.escape(label)}\s+([\d.]+)s?$", text, re.M)
    if not match:
        raise ValueError(f"{path}: final report has no {label!r} line")
    return float(match[1])


def summary(rawdir: Path) -> dict:
    """sysbench's final report. Its latencies are in ms rounded to 2 decimals
    and include fsyncs; it gives one percentile: the 95th, or with --rate the 99th."""
    text, path = _stdout(rawdir)
    if "\nGeneral statistics:" not in text or "\nThreads fairness:" not in text:
        raise ValueError(f"{path}: no final report (sysbench killed or failed; see stderr.txt)")
    bs = block_size(text, path)
    reads, writes = _figure(text, "reads/s:", path), _figure(text, "writes/s:", path)
    read_mibs, write_mibs = _figure(text, "read, MiB/s:", path), _figure(text, "written, MiB/s:", path)
    # the operation rates and the MiB/s (2 decimals) must agree through the block size
    for ops, mibs, what in ((reads, read_mibs, "read"), (writes, write_mibs, "write")):
        if abs(ops * bs / 2**20 - mibs) > 0.006 + 1e-4 * mibs:
            raise ValueError(f"{path}: {what} {ops}/s at {bs} B is not {mibs} MiB/s; block size misread?")
    pct = re.search(r"^\s+(\d+)th percentile:\s+([\d.]+)$", text, re.M)
    if not pct or int(pct[1]) not in (PERCENTILE, OPEN_LOOP_PERCENTILE):
        raise ValueError(f"{path}: final report has no {PERCENTILE}th or {OPEN_LOOP_PERCENTILE}th percentile line")
    return {
        "iops": reads + writes,
        "read_iops": reads,
        "write_iops": writes,
        "mibs": read_mibs + write_mibs,
        "fsyncs": _figure(text, "fsyncs/s:", path),
        "lat_mean_ms": _figure(text, "avg:", path),
        "lat_p95_ms": float(pct[2]) if int(pct[1]) == PERCENTILE else None,
        "lat_p99_ms": float(pct[2]) if int(pct[1]) == OPEN_LOOP_PERCENTILE else None,
        "lat_max_ms": _figure(text, "max:", path),
        "events": int(_figure(text, "total number of events:", path)),
        "time_s": _figure(text, "total time:", path),
    }


def version() -> str:
    out = subprocess.run(["sysbench", "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


WORKLOAD = Workload(
    tool=TOOL, kind=STORAGE, check=check, dataset=dataset, prepare=prepare, command=command, samples=samples,
    summary=summary, live=live, version=version, duration=sysbench_time, takes_rate=True, rate_figure="iops",
    warmup=False, dataset_options=tuple(DATASET_DEFAULTS), analyses=("statistics", "figures", "tables", "plots"),
    dataset_bytes=dataset_bytes)
