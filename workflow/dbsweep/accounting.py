"""What a server's process tree has used, from the kernel's own accounting, read at exact moments.

Host-wide vmstat and iostat are sampled once a second: a phase shorter than a few samples cannot be
measured that way (two identical 1.5 s loads gave 20.6 and 10.7 CPU us per insert). The kernel keeps
running totals per process instead, so two readings, one at each end of a phase or window, give what
the server used in between, whatever its length:

- CPU: /proc/<pid>/stat utime + stime (every thread's, the dead ones' too) of each process of the tree,
  plus cutime + cstime (the children it has reaped: PostgreSQL's ended backends);
- IO: /proc/<pid>/io read_bytes and write_bytes, what the process made the block layer read (page
  cache misses; 0 on tmpfs) and what it dirtied for writing; a process's figures include those of the
  children it has reaped, so the tree's sum does not drop when a backend ends.

A reading names the tree's root pids: a server started again between two readings (its totals start
from zero) gives no delta rather than a wrong one.
"""
from __future__ import annotations

import time

import psutil

FIGURES = ("cpu_s", "read_bytes", "write_bytes")


def reading(roots: list[int], tries: int = 20) -> dict:
    """The running totals of the process trees under roots, summed: cpu_s, read_bytes, write_bytes,
    with the time they were read and the roots (in order).

    A process that ends while the trees are read (a backend at a phase's end) may have been reaped after
    its parent's totals were read and before its own: it would count nowhere. Such a reading is taken
    again, up to tries times."""
    for _ in range(tries):
        got = _totals(roots)
        if got is not None:
            break
    else:
        got = _totals(roots, complete=False)
    cpu, read, written = got
    return {"time": time.time(), "roots": list(roots), "cpu_s": round(cpu, 3), "read_bytes": read,
            "write_bytes": written}


def _totals(roots: list[int], complete: bool = True) -> tuple[float, int, int] | None:
    """cpu_s, read_bytes, write_bytes summed over the trees, each parent read before its children; None
    when complete and a process of a tree ended meanwhile."""
    cpu, read, written = 0.0, 0, 0
    for root in roots:
        for proc in _tree(root):
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    io = proc.io_counters()
            except psutil.NoSuchProcess:
                if complete and proc.pid != root:
                    return None
                continue  # the root ended: the server is gone
            cpu += times.user + times.system + times.children_user + times.children_system
            read += io.read_bytes
            written += io.write_bytes
    return cpu, read, written


def _tree(root: int) -> list[psutil.Process]:
    try:
        top = psutil.Process(root)
        return [top] + top.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def delta(start: dict | None, end: dict | None) -> dict | None:
    """What the trees used between two readings (FIGURES and seconds); None without both readings, or
    when the roots differ (a server started again in between)."""
    if not start or not end or start.get("roots") != end.get("roots") or not start.get("roots"):
        return None
    return {name: end[name] - start[name] for name in FIGURES} | {"seconds": end["time"] - start["time"]}


def per_op(used: dict | None, ops: float | None, unit: str) -> dict:
    """server_cpu_us_per_<unit>, server_kb_read_per_<unit>, server_kb_written_per_<unit> from a delta;
    None where there is no delta or no operation."""
    names = [f"server_cpu_us_per_{unit}", f"server_kb_read_per_{unit}", f"server_kb_written_per_{unit}"]
    if used is None or not ops:
        return dict.fromkeys(names)
    return dict(zip(names, (used["cpu_s"] * 1e6 / ops, used["read_bytes"] / 1024 / ops,
                            used["write_bytes"] / 1024 / ops), strict=True))
