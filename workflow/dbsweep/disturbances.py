"""What on the host may disturb a measurement, looked at when a repetition starts measuring and recorded
in its run.json (`disturbances`), with a warning line in its log for each that is there:

    cpu       over the window, more than 5% of the CPUs' time used by processes that are not this
              repetition's (something else runs: another study's jobs, this study's own analysis of an
              earlier cell, a build); read per process at the window's two edges, the kernel's own threads
              left out (their work is mostly the window's IO: a loop device's, writeback). A share of the
              CPUs' time is a share of the host's capacity: CPU seconds / (window seconds x CPUs), at most
              100%. Each process counts its own user and system time between the edges, never its children's
              (a parent that reaps a child gains the child's whole life's CPU at once: PID 1 reaping orphans
              gained a minute in a 15 s window); one that ended inside the window counts nothing (its last
              reading is gone with it), one that started inside it all it used. A process of the repetition
              at the window's start stays the repetition's at its end, even out of its cgroup by then (a
              server killed in the window is a zombie, which no cgroup lists).
    swap      swap in use (a server may be paged out)
    servers   database servers or benchmark tools running that this repetition did not start
    thp       transparent huge pages `always` (khugepaged compacts memory behind a server's back)
    governor  a CPU frequency governor other than `performance` (clocks follow the load)
    steal     over the window, more than 1% of the CPUs' time taken by the hypervisor (read from
              /proc/stat at the window's two edges)

cpu and steal are known only once the window has ended. The 1-minute load average is recorded, with no
warning: it carries the cell before (64 fio threads waiting on IO leave a load of 20 behind them) and the
window's own warm-up, so it warned in nearly every repetition of a study and told nothing.

Recorded whatever they are, with no warning of their own: whether the host is a virtual machine (the
CPU's `hypervisor` flag), and whether it hands the memory it frees back to its hypervisor (a virtio
balloon with free page reporting): memory taken again is then backed anew by the host. On the VM this
was built on, which does, the same fio read of freshly written tmpfs files ran at speeds 11% apart
(standard deviation) from one file to the next (BENCHMARKS.md, "fidelity"). With it, from which size of
free block on (`page_reporting_order`, a power of two of 4 KiB pages: 9 is 2 MiB; above the kernel's
largest order, 10, nothing is handed back; a VM's own start-up may set it whatever its command line
says). The cpuidle driver, and with the haltpoll driver of a guest its poll window
(`halt_poll_ns`, noise_control can set it): with 0 an idle vCPU halts at once and the hypervisor must wake
it, which a single client's round trips pay for every time (1-thread oltp_read_only ran 2.7-2.9x faster
here at 200000). Nothing here changes a setting.

The summary page counts the repetitions measured with each warning (line()).
"""
from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import psutil

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
GOVERNOR = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
VIRTIO = Path("/sys/bus/virtio/devices")
REPORTING_ORDER = Path("/sys/module/page_reporting/parameters/page_reporting_order")
CPUIDLE = Path("/sys/devices/system/cpu/cpuidle/current_driver")
HALT_POLL = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")  # the haltpoll driver's poll window
OTHERS = ("mariadbd", "mysqld", "postgres", "sysbench", "fio", "pgbench", "haproxy", "proxysql", "stress-ng")
STEAL = 0.01  # share of the CPUs' time over a window above which steal is a warning
FOREIGN = 0.05  # share of the CPUs' time over a window used by other processes, above which it is a warning
KTHREADD = 2  # the kernel threads' parent
INTERPRETER = re.compile(r"^(python[\d.]*|perl|ruby|node|bash|dash|sh)$")  # named with the script they run
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
# How Snakemake runs a rule's `script:`: python3 .snakemake/scripts/tmp<random>.<the script's name>.py
JOB_SCRIPT = re.compile(r"\.snakemake/scripts/tmp[^/.]+\.(?P<script>[^/]+\.py)$")
BALLOON, REPORTING = 0x0005, 5  # virtio device id of a memory balloon; its feature bit VIRTIO_BALLOON_F_REPORTING
KINDS = {  # warning kind: how the summary page names it
    "cpu": "other processes using the CPUs",
    "load": "a load average above half the CPUs",  # run.json of before 2026-11-27
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


def look(own: Callable[[], set[int]]) -> dict:
    """The host's state now; own(): the pids of this repetition now (its cgroup's), whose processes are not
    foreign, read after the host's processes are: a server forks into the repetition at any time (a
    PostgreSQL backend for the counter sampler, an autovacuum worker), and one forked between the two
    readings would otherwise look foreign. Returns {"settings": …, "warnings": {kind: text}}."""
    settings = {"thp": selected(THP), "governor": selected(GOVERNOR), "load_1m": round(os.getloadavg()[0], 2),
                "swap_used_mb": round(psutil.swap_memory().used / 2**20, 1),
                "virtual_machine": virtual_machine(), "free_page_reporting": free_page_reporting(),
                "page_reporting_order": reporting_order(), "cpuidle": selected(CPUIDLE),
                "halt_poll_ns": halt_poll_ns()}
    seen = {p.pid: p.info["name"] for p in psutil.process_iter(["name"]) if p.info["name"] in OTHERS}
    mine = own()
    foreign = sorted({name for pid, name in seen.items() if pid not in mine and psutil.pid_exists(pid)})
    settings["foreign_processes"] = foreign
    warnings = {}
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


def number(path: Path) -> int | None:
    """A numeric sysfs setting, or None where the kernel has no such file."""
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def reporting_order(path: Path = REPORTING_ORDER) -> int | None:
    """The order of the smallest free block the kernel hands back to the hypervisor, or None where the
    kernel has no free page reporting."""
    return number(path)


def halt_poll_ns(path: Path = HALT_POLL) -> int | None:
    """How long an idle vCPU polls before it halts, in a guest with the haltpoll cpuidle driver (None
    elsewhere): 0 halts at once, and waking a halted vCPU goes through the hypervisor."""
    return number(path)


def cpu_ticks(stat: Path = Path("/proc/stat")) -> list[int]:
    """The host's CPU time so far, summed over its CPUs, in ticks: user nice system idle iowait irq
    softirq steal (the `cpu` line of /proc/stat)."""
    with stat.open() as f:
        return [int(x) for x in f.readline().split()[1:9]]


def cpu_use(own: Callable[[], set[int]]) -> dict:
    """A reading for after_window(), at one edge of a window: the host's CPU ticks (cpu_ticks), the
    repetition's processes (own(): its cgroup's pids, read after the scan, as look() does) with their
    starts, and, for each other process that is neither a kernel thread nor a zombie, its name, its start
    and the CPU seconds it has used so far (its own: not its reaped children's)."""
    procs = {}
    for proc in psutil.process_iter(["ppid", "name", "create_time", "cpu_times", "status"]):
        info = proc.info
        if KTHREADD in (proc.pid, info["ppid"]) or info["cpu_times"] is None or info["status"] == psutil.STATUS_ZOMBIE:
            continue
        used = info["cpu_times"]
        procs[proc.pid] = (info["create_time"], _named(proc, info["name"]), used.user + used.system)
    mine = own()
    return {"time": process_clock(), "ticks": cpu_ticks(),
            "procs": {pid: p for pid, p in procs.items() if pid not in mine},
            "own": {pid: procs[pid][0] for pid in mine if pid in procs}}


def process_clock(uptime: Path = Path("/proc/uptime")) -> float:
    """Now, on the clock of psutil's create_time (the kernel's boot time in whole seconds plus the time
    since boot), which may differ from time.time() by a second or more on a VM whose clock was stepped
    since boot (measured here: create_time 1.0 s behind time.time() after 2.5 h). A process started after
    a reading has a create_time at or after the reading's time on this clock, to the clock tick."""
    return psutil.boot_time() + float(uptime.read_text().split()[0])


def _named(proc: psutil.Process, name: str) -> str:
    """A process's name as the warning gives it: its command's name (stress-ng-cpu, mariadbd); a Snakemake
    job's Python as the script it runs ("snakemake job collect.py": a study's own job of another
    repetition, beside this one's window), an interpreter running a script as both ("python3 build.py")."""
    if not INTERPRETER.match(name):
        return name
    try:
        args = proc.cmdline()[1:3]
    except psutil.Error:
        return name
    found = next(filter(None, map(JOB_SCRIPT.search, args)), None)
    if found:
        return f"snakemake job {found['script']}"
    script = args[0] if args and not args[0].startswith("-") and ("/" in args[0] or "." in args[0]) else None
    return f"{name} {Path(script).name}" if script else name


def foreign_cpu(start: dict, end: dict) -> dict[str, float]:
    """CPU seconds each name of process (other processes', as cpu_use() read them) used between two
    readings: a process there at both, the difference; one started in between, all it has used; one that
    was the repetition's at the start, nothing (see above)."""
    used: Counter = Counter()
    was_own = start.get("own", {})
    for pid, (created, name, cpu) in end["procs"].items():
        if was_own.get(pid) == created:
            continue
        before = start["procs"].get(pid)
        if before is not None and before[0] == created:
            used[name] += max(0.0, cpu - before[2])
        elif created >= start["time"] - 2 * TICK_S:  # new (or its pid reused) since the start, to the tick
            used[name] += cpu
    return {name: round(seconds, 3) for name, seconds in used.most_common() if seconds > 0}


def after_window(found: dict, start: dict, end: dict) -> list[str]:
    """Add the window's steal (its share of all CPU time between two cpu_use() readings) and the other
    processes' CPU (foreign_cpu, as a share of it, and the names that used most) to found (what look()
    returned); returns the warnings: steal above STEAL, other processes above FOREIGN."""
    spent = [b - a for a, b in zip(start["ticks"], end["ticks"], strict=True)]
    total = sum(spent)
    steal = spent[7] / total if total > 0 else 0.0
    others = foreign_cpu(start, end)
    # never more than the host's busy time (not idle, not waiting on IO): the processes are read a few
    # ms apart from /proc/stat, so a busy host's share can come out a hair above it
    busy = total - spent[3] - spent[4]
    foreign = min(sum(others.values()), busy * TICK_S) / (total * TICK_S) if total > 0 else 0.0
    settings = found["settings"]
    settings |= {"steal_pct": round(100 * steal, 2), "foreign_cpu_pct": round(100 * foreign, 2),
                 "foreign_cpu_s": dict(list(others.items())[:5])}
    said = []  # the warnings give the recorded figures, rounded once more
    if steal > STEAL:
        found["warnings"]["steal"] = (f"the hypervisor took {settings['steal_pct']:.1f}% of the CPUs' time in the "
                                      "window (steal): the VM's CPUs ran slower than they seem")
        said.append(found["warnings"]["steal"])
    if foreign > FOREIGN:
        names = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in list(others.items())[:3])
        found["warnings"]["cpu"] = (f"other processes used {settings['foreign_cpu_pct']:.1f}% of the CPUs' time in "
                                    f"the window ({names}): something else runs")
        said.append(found["warnings"]["cpu"])
    return said


def recorded(rep_dir: Path) -> dict | None:
    """What a repetition's run.json records of its host ({"settings": …, "warnings": {kind: text}}; older
    run.json: warnings a list, each kind "other"); None without a run.json."""
    try:
        found = json.loads((rep_dir / "run.json").read_text()).get("disturbances") or {}
    except (OSError, json.JSONDecodeError):
        return None
    warnings = found.get("warnings") or {}
    warnings = warnings if isinstance(warnings, dict) else {"other": "; ".join(warnings)} if warnings else {}
    return {"settings": found.get("settings") or {}, "warnings": warnings}


def line(rep_dirs: list[Path]) -> str:
    """The summary page's sentence on the host: how many repetitions measured with each warning, the
    most CPU other processes and the hypervisor took in any one window, and how many ran on vCPUs that
    halt at once when idle (not a warning: the host's way, but it is in every round trip of one client)."""
    found = [r for r in map(recorded, rep_dirs) if r is not None]
    if not found:
        return ""
    kinds = Counter(kind for r in found for kind in r["warnings"])
    disturbed = sum(1 for r in found if r["warnings"])
    if not disturbed:
        said = (f"Host warnings: none in {len(found)} repetition(s) (other processes' CPU, swap, other servers, THP, "
                "governor, steal; each run.json's disturbances).")
    else:
        counts = "; ".join(f"{KINDS.get(kind, 'other')}: {n}" for kind, n in
                           sorted(kinds.items(), key=lambda item: (-item[1], item[0])))
        said = (f"Host warnings: {disturbed} of {len(found)} repetition(s) measured with one or more ({counts}). "
                "Each repetition's are in its log and its run.json (disturbances).")
    shares = {name: [r["settings"][name] for r in found if isinstance(r["settings"].get(name), (int, float))]
              for name in ("foreign_cpu_pct", "steal_pct")}
    impossible = sum(1 for v in shares["foreign_cpu_pct"] if v > 100)
    most = {name: max((v for v in values if v <= 100), default=None) for name, values in shares.items()}
    if most["foreign_cpu_pct"] is not None:
        said += (f" In any one window, other processes used at most {most['foreign_cpu_pct']:.1f}% of the CPUs' time"
                 + (f", the hypervisor at most {most['steal_pct']:.1f}% (steal)." if most["steal_pct"] is not None
                    else "."))
    if impossible:
        said += (f" {impossible} repetition(s) recorded other processes' CPU above 100% of the host's, which cannot "
                 "be (a run.json of before 2026-11-28 counted reaped children's CPU): left out.")
    halting = sum(1 for r in found if r["settings"].get("halt_poll_ns") == 0)
    if halting:
        said += (f" {halting} of {len(found)} ran on idle vCPUs that halt at once (the haltpoll driver's "
                 "guest_halt_poll_ns 0): each wake-up goes through the hypervisor, which a single client pays on "
                 "every round trip (noise_control.halt_poll_ns sets it).")
    return said
