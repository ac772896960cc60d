"""vmstat and iostat running beside a measured run, and parsers for their output.

Both tools print UTC timestamps (TZ=UTC; S_TIME_FORMAT=ISO for iostat), so
their rows share one clock with fio's epoch-ms logs and sysbench's start time.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
from datetime import datetime, UTC
from pathlib import Path

ENV = {"TZ": "UTC", "S_TIME_FORMAT": "ISO", "LC_ALL": "C"}
STOP_TIMEOUT_S = 5
VMSTAT_KEYS = ("r", "b", "free", "buff", "cache", "si", "so", "bi", "bo", "in", "cs", "us", "sy", "id", "wa", "st")
IOSTAT_KEYS = {"r_s": "r/s", "w_s": "w/s", "f_s": "f/s", "rkb_s": "rkB/s", "wkb_s": "wkB/s",
               "r_await": "r_await", "w_await": "w_await", "aqu_sz": "aqu-sz", "util": "util"}


class Monitors:
    """Run vmstat (always) and iostat (if there are devices) for the body of a with-block.

    Output goes to rawdir/vmstat.txt and rawdir/iostat.json; the processes are
    stopped on exit, also when the body raised. `cpu_s` then holds the CPU seconds
    (user + system) each tool used, by tool name: what monitoring cost the host.
    """

    def __init__(self, rawdir: Path, devices: list[str]):
        self.rawdir = Path(rawdir)
        self.devices = list(devices)
        self.commands = [["vmstat", "-n", "-t", "1"]]
        if self.devices:
            self.commands.append(["iostat", "-x", "-t", "-o", "JSON", "-d", *self.devices, "1"])
        self.outputs = [self.rawdir / "vmstat.txt", self.rawdir / "iostat.json"][:len(self.commands)]
        self._procs: list[subprocess.Popen] = []
        self.cpu_s: dict[str, float] = {}

    def __enter__(self) -> Monitors:
        for device in self.devices:
            if not (Path("/sys/class/block") / Path(device).name).exists():
                raise ValueError(f"iostat device {device!r}: no such block device")
        env = os.environ | ENV
        try:
            for argv, path in zip(self.commands, self.outputs, strict=False):
                with open(path, "wb") as out:  # the child keeps its own copy of the descriptor
                    self._procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                                        stdin=subprocess.DEVNULL, env=env))
        except BaseException:
            self._stop()
            raise
        return self

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self._procs]

    def __exit__(self, *exc) -> None:
        died = [(proc.args[0], proc.returncode) for proc in self._procs if proc.poll() is not None]
        self._stop()
        if died and exc[0] is None:  # its seconds would be missing: the window is not complete
            raise RuntimeError("monitor died during the measured window: "
                               + ", ".join(f"{name} (exit {code})" for name, code in died))

    def _stop(self) -> None:
        # SIGINT lets iostat close its JSON document; SIGKILL if it hangs.
        for proc in self._procs:
            self.cpu_s[proc.args[0]] = process_cpu_s(proc.pid)
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in self._procs:
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs = []


def process_cpu_s(pid: int) -> float:
    """CPU seconds a live process has run, from /proc/<pid>/schedstat (nanoseconds; /proc/<pid>/stat
    counts in clock ticks, 10 ms, more than vmstat uses in a minute); 0.0 once it is gone."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (FileNotFoundError, ProcessLookupError):
        return 0.0


def _utc(text: str, fmt: str) -> float:
    stamp = datetime.strptime(text, fmt)
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def vmstat(path: Path) -> list[dict]:
    """Rows of `vmstat -n -t 1` output: one per second, time = when printed (UTC).

    The first row is dropped: it holds averages since boot, not the last second.
    A final line cut off by a kill (no newline) is ignored.
    """
    path = Path(path)
    lines = path.read_text().split("\n")[:-1]  # the part after the last newline is unfinished
    header = None
    rows = []
    for line in lines:
        fields = line.split()
        if not fields or fields[0] == "procs":
            continue
        if fields[0] == "r":
            if fields[-1] != "UTC":
                raise ValueError(f"{path}: vmstat times are in {fields[-1]}, not UTC (run it with TZ=UTC)")
            header = fields[:-1]
            continue
        if header is None or len(fields) != len(header) + 2:
            raise ValueError(f"{path}: unexpected vmstat line: {line!r}")
        values = dict(zip(header, fields, strict=False))  # fields end with the date and time
        row = {"time": _utc(f"{fields[-2]} {fields[-1]}", "%Y-%m-%d %H:%M:%S")}
        row.update((key, int(values[key])) for key in VMSTAT_KEYS)
        rows.append(row)
    return rows[1:]


def _statistics(text: str) -> list[dict]:
    """The complete objects of the "statistics" array, even if the document is cut off."""
    start = text.find('"statistics"')
    if start < 0:
        return []
    pos = text.index("[", start) + 1
    decoder = json.JSONDecoder()
    out = []
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return out
        try:
            item, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return out  # a sample cut off by a kill
        out.append(item)


def iostat(path: Path) -> list[dict]:
    """Rows of `iostat -x -t -o JSON -d <devices> 1`: one per device per second.

    The first report is dropped: it holds averages since boot. A document cut
    off mid-sample (monitor killed) yields every complete sample before the cut.
    """
    path = Path(path)
    rows = []
    for sample in _statistics(path.read_text())[1:]:
        try:
            time = _utc(sample["timestamp"], "%Y-%m-%dT%H:%M:%S%z")
        except ValueError:
            raise ValueError(f"{path}: iostat timestamp {sample['timestamp']!r} is not ISO "
                             "(run it with S_TIME_FORMAT=ISO)") from None
        for disk in sample["disk"]:
            row = {"time": time, "device": disk["disk_device"]}
            row.update((key, float(disk[name])) for key, name in IOSTAT_KEYS.items())
            rows.append(row)
    return rows
