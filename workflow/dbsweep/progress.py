"""A live line in a run's log: elapsed / total seconds and the tool's current rate.

The tool writes its per-second output to a file (sysbench's interval lines, fio's status
line); a thread follows that file as it grows and, once a second, writes what the latest
complete line says to the log:

    progress: run 12/60 s, 1,234 tps

Each tool module reads its own lines with live(line, state) -> (second or None, rate, unit)
or None; `state` is a dict the module may keep things in (sysbench fileio's block size).
"""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path

EVERY_S = 1.0
_LINE_END = re.compile(r"[\r\n]")


class Follow:
    """Follow `path` while a tool writes it; write a progress line to `log` every EVERY_S."""

    def __init__(self, path: Path, live, total_s: int | None, log, label: str = "run", every: float = EVERY_S):
        self.path, self.live, self.total_s, self.log, self.label, self.every = path, live, total_s, log, label, every
        self.state: dict = {}
        self.latest = None  # (second or None, rate, unit) of the latest line read
        self._shown = None
        self.lines_written = 0
        self.cpu_s = 0.0  # CPU seconds of the following thread, once it has stopped
        self._offset, self._tail = 0, ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"progress-{label}", daemon=True)
        self._start = 0.0

    def __enter__(self):
        self._start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._show()  # what the tool wrote in its last moments
        return False

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.every):
                self._show()
        finally:
            self.cpu_s = time.thread_time()

    def _show(self) -> None:
        self.read()
        if self.latest is not None and self.latest != self._shown:
            self.write()
            self._shown = self.latest

    def read(self) -> None:
        """Parse the complete lines written since the last call (\\r ends fio's status lines)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        self._offset += len(data)
        *lines, self._tail = _LINE_END.split(self._tail + data.decode(errors="replace"))
        for line in lines:
            reading = self.live(line, self.state) if line.strip() else None
            if reading is not None:
                self.latest = reading

    def write(self) -> None:
        second, rate, unit = self.latest
        elapsed = second if second is not None else int(time.monotonic() - self._start)
        total = "?" if self.total_s is None else self.total_s
        self.log.write(f"progress: {self.label} {elapsed}/{total} s, {rate:,.0f} {unit}\n")
        self.log.flush()
        self.lines_written += 1
