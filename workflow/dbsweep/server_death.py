"""How a server's process ended, and its last words: what a failed repetition says when its server died
(measure.py), on one host or on a placed node's own (topology/host_step.py)."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil


def server_death(db, window_start: float | None = None, died_at: float | None = None) -> tuple[str, str] | None:
    """(how the server ended, what it said last) when its process is gone or a zombie; None while it runs.
    How: "postgres (pid 812) was killed by signal 9 (SIGKILL) at 2.1 s into the window" (its exit read
    without reaping it, as its supervisor will; the time from measure._death_watch), else "died while serving".
    A placed node's db here has no pid (its server runs on another host, whose step reports its death):
    None, not "the server (pid 0) died"."""
    pid = db.handle.pid
    if not pid:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() != psutil.STATUS_ZOMBIE:
            return None
        who = f"{proc.name()} (pid {pid})"
    except psutil.NoSuchProcess:
        who = f"the server (pid {pid})"
    logs = sorted(db.handle.rundir.glob("*.log"))
    said = " | ".join(line for path in logs for line in log_lines(path)[-5:])
    memory = getattr(db, "memory_cgroup", None)
    oom = memory.oom_kills() if memory is not None else 0
    how = (f"was killed by the OOM killer of its memory cgroup (limit {memory.limit_mb()} MB: the memory axis "
           f"plus server.cgroup_overhead)" if oom else exit_of(pid) or "died while serving")
    when = f" at {died_at - window_start:.1f} s into the window" if died_at and window_start else ""
    return f"{who} {how}{when}", said or "(none)"


def exit_of(pid: int) -> str | None:
    """How a child process that has ended ended, read without reaping it (WNOWAIT: its supervisor still
    waits for it); None where it is not this process's child, or was reaped already."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except (ChildProcessError, OSError):
        return None
    if info is None:
        return None
    if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
        return f"was killed by signal {info.si_status} ({signal_name(info.si_status)})"
    return f"exited with code {info.si_status} while serving"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def log_lines(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return []
