"""What on the host may disturb a measurement, looked at when a repetition starts measuring and recorded
in its run.json (`disturbances`), with a warning line in its log for each that is there:

    load      the 1-minute load average above the host's CPUs / 2 (something else runs)
    swap      swap in use (a server may be paged out)
    servers   database servers or benchmark tools running that this repetition did not start
    thp       transparent huge pages `always` (khugepaged compacts memory behind a server's back)
    governor  a CPU frequency governor other than `performance` (clocks follow the load)

The settings themselves (THP, governor) are recorded whatever they are; nothing here changes them.
"""
from __future__ import annotations

import os
from pathlib import Path

import psutil

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
GOVERNOR = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
OTHERS = ("mariadbd", "mysqld", "postgres", "sysbench", "fio", "pgbench", "haproxy", "proxysql", "stress-ng")


def selected(path: Path) -> str | None:
    """The bracketed choice of a sysfs setting ("always [madvise] never" -> madvise), or its value."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if "[" in text:
        return text.split("[", 1)[1].split("]", 1)[0]
    return text


def look(own: set[int]) -> dict:
    """The host's state now; own: the pids of this repetition (its cgroup's), whose processes are not
    foreign. Returns {"settings": …, "warnings": [...]}."""
    settings = {"thp": selected(THP), "governor": selected(GOVERNOR), "load_1m": round(os.getloadavg()[0], 2),
                "swap_used_mb": round(psutil.swap_memory().used / 2**20, 1)}
    foreign = sorted({p.info["name"] for p in psutil.process_iter(["name"])
                      if p.info["name"] in OTHERS and p.pid not in own})
    settings["foreign_processes"] = foreign
    warnings = []
    cpus = os.cpu_count() or 1
    if settings["load_1m"] > cpus / 2:
        warnings.append(f"load average {settings['load_1m']} on {cpus} CPUs: something else runs")
    if settings["swap_used_mb"] > 0:
        warnings.append(f"{settings['swap_used_mb']} MB of swap in use")
    if foreign:
        warnings.append(f"running beside this repetition: {', '.join(foreign)}")
    if settings["thp"] == "always":
        warnings.append("transparent huge pages: always")
    if settings["governor"] not in (None, "performance"):
        warnings.append(f"CPU frequency governor: {settings['governor']}")
    return {"settings": settings, "warnings": warnings}
