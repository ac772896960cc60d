"""The study's progress on the terminal while Snakemake runs it:

    dbsweep: 5/14 repetitions done, 1 min 02 s elapsed, about 2 min 10 s left; running
    filesystem~xfs/threads~4/workload~fio-randread rep~1: run 3/5 s, 4,512 IOPS

Read from the results tree itself, once a second, by a thread the workflow's onstart starts: a
repetition is done when its run.json exists (written last, by rename); the one running is the
unfinished repetition whose run log (results/logs/run/<cell>/rep~N.log) changed last since the start,
and its log's latest `progress:` line (dbsweep/progress.py) says how far it is. A repetition whose log
says last that it waits for the host's measuring lock (runtime/lock.py), with no `measuring lock taken`
after it, is said to wait, and for whom, not to run:

    dbsweep: 0/2 repetitions done, 12 s elapsed, about 30 s left; filesystem~xfs/threads~4 rep~1 waiting
    for the host's measuring lock (held by pid 4242 on vm in /home/me/other-study: run … since …)

This needs nothing from Snakemake's internals, so it is right whatever the executor (local, Slurm) and whoever runs
the jobs.

On a terminal the line is redrawn in place: a filter on Snakemake's logger erases it before each of
Snakemake's own messages, and the next tick draws it again below them. Elsewhere (a log file, a
pipe) it is a plain line, written only when a repetition ends or another one starts.

Time left: the estimate of each missing repetition (dbsweep/estimate.py), scaled by how long the
repetitions done in this run took against their estimate, counting down between two of them.
"""
from __future__ import annotations

import logging
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .estimate import duration
from .runtime.lock import TAKEN, WAITING

EVERY_S = 1.0
SNAKEMAKE_LOGGER = "snakemake.logging"


@dataclass
class Status:
    done: int
    total: int
    elapsed_s: float
    left_s: float | None
    running: str | None  # "<cell> rep~N"
    live: str | None  # the running repetition's latest progress line, without "progress: "
    waiting: str | None = None  # while it waits for the host's measuring lock: who holds it


class StudyProgress:
    """rep_dirs: every repetition of the study; expected: seconds estimated for each missing one."""

    def __init__(self, rep_dirs: list[Path], expected: dict[Path, float], stream, every: float = EVERY_S,
                 again: set[Path] = frozenset(), rounds=None):
        """again: the repetitions this run measures anew (a changed recipe): their run.json is the old one
        until this run replaces it, so they count as done only once it is newer than this run's start.
        rounds: with the study's repeat_until, a function giving every repetition known so far (a round
        the study adds while it runs joins the line)."""
        self.rep_dirs, self.expected, self.stream, self.every = rep_dirs, expected, stream, every
        self.rounds = rounds
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.start = time.time()
        self.again = set(again)
        self.done = {d for d in rep_dirs if d not in self.again and (d / "run.json").exists()}
        self.done_now: set[Path] = set()  # done during this run
        self._paced_at = 0.0  # seconds into this run when the latest of them was seen done
        self._shown = ""  # the line on screen (terminal) or the last written (log)
        self._key = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dbsweep-progress", daemon=True)
        self._filter = _ClearLine(self)

    def __enter__(self):
        if self.tty:
            logging.getLogger(SNAKEMAKE_LOGGER).addFilter(self._filter)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def stop(self) -> None:
        """The last line, as a plain line, and no more."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        logging.getLogger(SNAKEMAKE_LOGGER).removeFilter(self._filter)
        status = self.status()
        with self._lock:
            self.clear()
            self.stream.write(line(status, running=False) + "\n")
            self.stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.tick()

    def tick(self) -> None:
        status = self.status()
        text = line(status)
        with self._lock:
            if self._stop.is_set():
                return
            if self.tty:
                if text != self._shown:
                    width = shutil.get_terminal_size((100, 20)).columns - 1  # a wrapped line cannot be redrawn
                    self.stream.write("\r\x1b[K" + text[:width])
                    self.stream.flush()
                    self._shown = text
            elif (status.done, status.running) != self._key:
                self._key = (status.done, status.running)
                self.stream.write(text + "\n")
                self.stream.flush()

    def clear(self) -> None:
        """Erase the line on a terminal (before Snakemake writes one of its own)."""
        if self.tty and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = ""

    def status(self) -> Status:
        elapsed = time.time() - self.start
        if self.rounds is not None:
            known = set(self.rep_dirs)
            self.rep_dirs = self.rep_dirs + [d for d in self.rounds() if d not in known]
        for rep_dir in self.rep_dirs:
            if rep_dir not in self.done and self._written(rep_dir):
                self.done.add(rep_dir)
                self.done_now.add(rep_dir)
                self._paced_at = elapsed
        running, newest = None, self.start - 1
        for rep_dir in self.rep_dirs:
            if rep_dir in self.done:
                continue
            try:
                mtime = run_log(rep_dir).stat().st_mtime
            except FileNotFoundError:
                continue
            if mtime > newest:
                running, newest = rep_dir, mtime
        live, waiting = _last_progress(run_log(running)) if running else (None, None)
        return Status(len(self.done), len(self.rep_dirs), elapsed, self.left(elapsed),
                      _name(running) if running else None, live, waiting)

    def _written(self, rep_dir: Path) -> bool:
        try:
            mtime = (rep_dir / "run.json").stat().st_mtime
        except FileNotFoundError:
            return False
        return rep_dir not in self.again or mtime >= self.start

    def left(self, elapsed: float) -> float | None:
        """The estimate of the missing repetitions, times the pace of this run's repetitions so far
        (their time over their estimate, up to the latest one done), less the time since then."""
        missing = [d for d in self.rep_dirs if d not in self.done]
        if not missing:
            return 0.0
        if not all(d in self.expected for d in missing):
            return None
        left = sum(self.expected[d] for d in missing)
        spent = sum(self.expected.get(d, 0) for d in self.done_now)
        if spent > 0:
            left *= min(max(self._paced_at / spent, 0.25), 4.0)
        return max(left - (elapsed - self._paced_at), 0.0)


class _ClearLine(logging.Filter):
    def __init__(self, progress: StudyProgress):
        super().__init__()
        self.progress = progress

    def filter(self, record) -> bool:
        with self.progress._lock:
            self.progress.clear()
        return True


def line(s: Status, running: bool = True) -> str:
    text = f"dbsweep: {s.done}/{s.total} repetitions done, {duration(s.elapsed_s)} elapsed"
    if s.done < s.total and s.left_s is not None:
        text += f", about {duration(s.left_s)} left"
    if running and s.running and s.waiting:
        text += f"; {s.running} waiting for the host's measuring lock (held by {s.waiting})"
    elif running and s.running:
        text += f"; running {s.running}" + (f": {s.live}" if s.live else "")
    return text


def run_log(rep_dir: Path) -> Path:
    """results/runs/<cell>/rep~N -> results/logs/run/<cell>/rep~N.log (rule run's log)."""
    results, cell = str(rep_dir.parent).rsplit("/runs/", 1)
    return Path(results, "logs", "run", cell, f"{rep_dir.name}.log")


def _name(rep_dir: Path) -> str:
    return f"{str(rep_dir.parent).rsplit('/runs/', 1)[-1]} {rep_dir.name}"


def _last_progress(log: Path) -> tuple[str | None, str | None]:
    """(the latest `progress: …` line of a run log without its prefix, who holds the host's measuring lock
    while the log's last word is that it waits for it), read from its last 4 KB."""
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            tail = f.read().decode(errors="replace")
    except OSError:
        return None, None
    lines = tail.splitlines()
    progress = [ln for ln in lines if ln.startswith("progress: ")]
    lock = [ln for ln in lines if ln.startswith((WAITING, TAKEN))]
    waiting = lock[-1].split(", held by ", 1)[-1] if lock and lock[-1].startswith(WAITING) else None
    return (progress[-1][len("progress: "):] if progress else None), waiting
