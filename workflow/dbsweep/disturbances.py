"""What on the host may disturb a measurement, looked at when a repetition starts measuring and recorded
in its run.json (`disturbances`), with a warning line in its log for each that is there:

    load      the 1-minute load average above the host's CPUs / 2 (something else runs)
    swap      swap in use (a server may be paged out)
    servers   database servers or benchmark tools running that this repetition did not start
    thp       transparent huge pages `always` (khugepaged compacts memory behind a server's back)
    governor  a CPU frequency governor other than `performance` (clocks follow the load)
    steal     over the window, more than 1% of the CPUs' time taken by the hypervisor (read from
              /proc/stat at the window's two edges, so it is known only once the window has ended)

Recorded whatever they are, with no warning of their own: whether the host is a virtual machine (the
CPU's `hypervisor` flag), and whether it hands the memory it frees back to its hypervisor (a virtio
balloon with free page reporting), and from which size of free block on (`page_reporting_order`, a power of
two of 4 KiB pages: 9 is 2 MiB; above the kernel's largest order, 10, nothing is handed back; a VM's own
start-up may set it whatever its command line says): memory taken again is then backed anew by the host. On the VM this
was built on, which does, the same fio read of freshly written tmpfs files ran at speeds 11% apart
(standard deviation) from one file to the next (BENCHMARKS.md, "fidelity"). Nothing here changes a
setting.

The summary page counts the repetitions measured with each warning (line()).
"""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import psutil

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
GOVERNOR = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
VIRTIO = Path("/sys/bus/virtio/devices")
REPORTING_ORDER = Path("/sys/module/page_reporting/parameters/page_reporting_order")
OTHERS = ("mariadbd", "mysqld", "postgres", "sysbench", "fio", "pgbench", "haproxy", "proxysql", "stress-ng")
STEAL = 0.01  # share of the CPUs' time over a window above which steal is a warning
BALLOON, REPORTING = 0x0005, 5  # virtio device id of a memory balloon; its feature bit VIRTIO_BALLOON_F_REPORTING
KINDS = {  # warning kind: how the summary page names it
    "load": "a load average above half the CPUs",
    "swap": "swap in use",
    "servers": "other servers or benchmark tools running",
    "thp": "transparent huge pages always",
    "governor": "a CPU governor other than performance",
    "steal": "hypervisor steal above 1%",
}


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
    foreign. Returns {"settings": …, "warnings": {kind: text}}."""
    settings = {"thp": selected(THP), "governor": selected(GOVERNOR), "load_1m": round(os.getloadavg()[0], 2),
                "swap_used_mb": round(psutil.swap_memory().used / 2**20, 1),
                "virtual_machine": virtual_machine(), "free_page_reporting": free_page_reporting(),
                "page_reporting_order": reporting_order()}
    foreign = sorted({p.info["name"] for p in psutil.process_iter(["name"])
                      if p.info["name"] in OTHERS and p.pid not in own})
    settings["foreign_processes"] = foreign
    warnings = {}
    cpus = os.cpu_count() or 1
    if settings["load_1m"] > cpus / 2:
        warnings["load"] = f"load average {settings['load_1m']} on {cpus} CPUs: something else runs"
    if settings["swap_used_mb"] > 0:
        warnings["swap"] = f"{settings['swap_used_mb']} MB of swap in use"
    if foreign:
        warnings["servers"] = f"running beside this repetition: {', '.join(foreign)}"
    if settings["thp"] == "always":
        warnings["thp"] = "transparent huge pages: always"
    if settings["governor"] not in (None, "performance"):
        warnings["governor"] = f"CPU frequency governor: {settings['governor']}"
    return {"settings": settings, "warnings": warnings}


def virtual_machine(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the CPUs say they run under a hypervisor (the `hypervisor` flag)."""
    try:
        return any(line.startswith("flags") and " hypervisor" in line for line in cpuinfo.open())
    except OSError:
        return False


def free_page_reporting(devices: Path = VIRTIO) -> bool:
    """Whether a virtio memory balloon with free page reporting is attached: the guest hands the memory it
    frees back to the hypervisor. sysfs `features` is one 0/1 character per feature bit."""
    for device in devices.glob("*") if devices.is_dir() else []:
        try:
            kind = int((device / "device").read_text(), 16)
            features = (device / "features").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind == BALLOON and len(features) > REPORTING and features[REPORTING] == "1":
            return True
    return False


def reporting_order(path: Path = REPORTING_ORDER) -> int | None:
    """The order of the smallest free block the kernel hands back to the hypervisor, or None where the
    kernel has no free page reporting."""
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def cpu_ticks(stat: Path = Path("/proc/stat")) -> list[int]:
    """The host's CPU time so far, summed over its CPUs, in ticks: user nice system idle iowait irq
    softirq steal (the `cpu` line of /proc/stat)."""
    with stat.open() as f:
        return [int(x) for x in f.readline().split()[1:9]]


def after_window(found: dict, start: list[int], end: list[int]) -> str | None:
    """Add the window's steal (its share of all CPU time between two cpu_ticks readings) to found
    (what look() returned); returns the warning, if steal was above STEAL."""
    spent = [b - a for a, b in zip(start, end)]
    total = sum(spent)
    share = spent[7] / total if total > 0 else 0.0
    found["settings"]["steal_pct"] = round(100 * share, 2)
    if share > STEAL:
        found["warnings"]["steal"] = (f"the hypervisor took {100 * share:.1f}% of the CPUs' time in the window "
                                      "(steal): the VM's CPUs ran slower than they seem")
        return found["warnings"]["steal"]
    return None


def warnings_of(rep_dir: Path) -> dict[str, str] | None:
    """The warnings a repetition's run.json records ({kind: text}; older run.json: a list, each kind
    "other"); None without a run.json."""
    try:
        found = json.loads((rep_dir / "run.json").read_text()).get("disturbances") or {}
    except (OSError, json.JSONDecodeError):
        return None
    warnings = found.get("warnings") or {}
    return warnings if isinstance(warnings, dict) else {"other": "; ".join(warnings)} if warnings else {}


def line(rep_dirs: list[Path]) -> str:
    """The summary page's sentence on the host: how many repetitions measured with each warning."""
    found = [w for w in map(warnings_of, rep_dirs) if w is not None]
    if not found:
        return ""
    kinds = Counter(kind for warnings in found for kind in warnings)
    disturbed = sum(1 for w in found if w)
    if not disturbed:
        return (f"Host warnings: none in {len(found)} repetition(s) (load, swap, other servers, THP, governor, "
                "steal; each run.json's disturbances).")
    counts = "; ".join(f"{KINDS.get(kind, 'other')}: {n}" for kind, n in
                       sorted(kinds.items(), key=lambda item: (-item[1], item[0])))
    return (f"Host warnings: {disturbed} of {len(found)} repetition(s) measured with one or more ({counts}). "
            "Each repetition's are in its log and its run.json (disturbances).")
