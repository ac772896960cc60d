"""Noise control: what a repetition sets on the host around its measured window, and restores after.

The study's `noise_control:` (config/README.md) switches each on; every repetition records in its
run.json (`noise_control`) what it asked for and what it could apply:

    drop_caches  sync, then drop the OS page cache right before the measured window (after the restore,
                 the server's start and its warm-up, which all fill it), so every repetition's window
                 starts from the same cache; the server's own buffer pool stays warm
    cpu_pinning  the server's process tree, the benchmark client and the monitors (vmstat, iostat and
                 dbsweep's own process: its samplers) on disjoint CPU sets (split), where the host has
                 a CPU for each; otherwise "not applied: N CPUs"
    thp          /sys/kernel/mm/transparent_hugepage/enabled set for the repetition, restored after
    governor     every CPU's cpufreq scaling_governor set for the repetition, restored after
    halt_poll_ns in a virtual machine with the haltpoll cpuidle driver, how long an idle vCPU polls before
                 it halts (guest_halt_poll_ns), set for the repetition, restored after: with 0 every idle
                 ends in a halt the hypervisor must wake, and a single client's round trips pay for it
                 (BENCHMARKS.md, noise_control: 1-thread oltp_read_only 2.7-2.9x faster at 200000 here)

A setting the host does not have or does not let us write is recorded as "not available", never a
failure: the repetition measures what the host gives, and says so.
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from dbsweep import storage
from dbsweep.concern import Concern, Draft, Repetition
from dbsweep.disturbances import HALT_POLL, THP, selected

CPUFREQ = Path("/sys/devices/system/cpu")
THP_MODES = ("never", "madvise", "always")


@dataclass(frozen=True)
class NoiseControl:
    """The per-repetition part of a study's noise_control (the canary is the study's, not a cell's)."""

    drop_caches: bool = False
    cpu_pinning: bool = False
    thp: str | None = None  # one of THP_MODES; None: leave as it is
    governor: str | None = None  # e.g. performance; None: leave as it is
    halt_poll_ns: int | None = None  # the haltpoll driver's guest_halt_poll_ns; None: leave as it is

    def __post_init__(self):
        if self.thp is not None and self.thp not in THP_MODES:
            raise ValueError(f"noise_control.thp: {self.thp!r} is not one of {', '.join(THP_MODES)}")

    @property
    def any(self) -> bool:
        return self != NoiseControl()

    def as_dict(self) -> dict:
        """The recipe's part; halt_poll_ns only when set, so that a recipe from before it stays equal."""
        out = asdict(self)
        if out["halt_poll_ns"] is None:
            del out["halt_poll_ns"]
        return out


def split(cpus: list[int], server: bool) -> dict[str, list[int]] | None:
    """Disjoint CPU sets, from the CPUs this process may use: the monitors (and dbsweep itself) on the
    first, which also takes the host's housekeeping; the rest for the client and, in a database cell, the
    server: the server the upper half (the larger when odd), the client the lower. None when there are
    fewer CPUs than parts (3 with a server, 2 without)."""
    cpus = sorted(cpus)
    if len(cpus) < (3 if server else 2):
        return None
    rest = cpus[1:]
    if not server:
        return {"monitors": cpus[:1], "client": rest}
    half = len(rest) // 2
    return {"monitors": cpus[:1], "client": rest[:half], "server": rest[half:]}


def needed(server: bool) -> int:
    return 3 if server else 2


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def pin(pid: int, cpus: list[int], tree: bool = False) -> list[int]:
    """Every thread of pid (and, with tree, of its descendants) onto cpus; sched_setaffinity acts on one
    thread, and threads started later take their creator's. Returns the pids pinned."""
    pids = [pid]
    if tree:
        try:
            pids += [p.pid for p in psutil.Process(pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
    done = []
    for p in pids:
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with suppress(ProcessLookupError, PermissionError):
                    os.sched_setaffinity(int(tid), cpus)
            done.append(p)
        except FileNotFoundError:
            pass
    return done


def allowed(pid: int) -> str:
    """A process's Cpus_allowed_list (/proc/PID/status), as the kernel prints it: 0-1, 1, 2-3."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return ""


def governors() -> list[Path]:
    return sorted(CPUFREQ.glob("cpu[0-9]*/cpufreq/scaling_governor"))


def _write(path: Path, value: str) -> str | None:
    """Write a sysfs setting; None when done, else why not."""
    try:
        path.write_text(value + "\n")
    except OSError as e:
        return e.strerror or type(e).__name__
    return None


@contextmanager
def host_settings(control: NoiseControl, record: dict, log, active: Path | None = None):
    """THP, the CPU governor and halt polling as the study asks, for the body (the whole repetition: a
    server's memory is mapped at its start), restored on exit, also when the body raised. record["noise_control"]
    gets each one's before, set and after, or "not available: why". With active (the repetition's
    results/.active), each value is recorded there before it is changed, so that a job killed outright
    (SIGKILL, the OOM killer) has it restored by its guardian or by the next repetition on the host
    (storage.release, storage.sweep_stale)."""
    facts = record.setdefault("noise_control", {})
    undo = []

    def change(path: Path, value: str, before: str | None) -> str | None:
        entry = storage.register(active, {"sysfs": str(path), "value": before}) if active and before else None
        why = _write(path, value)
        undo.append((path, before, entry))
        return why

    try:
        if control.thp is not None:
            before = selected(THP)
            why = "no " + str(THP) if before is None else change(THP, control.thp, before)
            if why is None:
                facts["thp"] = {"before": before, "set": selected(THP)}
            else:
                facts["thp"] = f"not available: {why}"
                _warn(log, f"noise_control.thp: {facts['thp']}")
        if control.governor is not None:
            paths = governors()
            if not paths:
                facts["governor"] = "not available: no cpufreq scaling_governor"
                _warn(log, f"noise_control.governor: {facts['governor']}")
            else:
                before = {p.parts[-3]: selected(p) for p in paths}
                whys = [why for p in paths if (why := change(p, control.governor, before[p.parts[-3]]))]
                if whys:
                    facts["governor"] = f"not available: {whys[0]}"
                    _warn(log, f"noise_control.governor: {facts['governor']}")
                else:
                    facts["governor"] = {"before": before, "set": control.governor}
        if control.halt_poll_ns is not None:
            before = selected(HALT_POLL)
            why = (f"no {HALT_POLL} (not a virtual machine with the haltpoll cpuidle driver)" if before is None
                   else change(HALT_POLL, str(control.halt_poll_ns), before))
            if why is None:
                facts["halt_poll_ns"] = {"before": int(before), "set": int(selected(HALT_POLL))}
            else:
                facts["halt_poll_ns"] = f"not available: {why}"
                _warn(log, f"noise_control.halt_poll_ns: {facts['halt_poll_ns']}")
        yield
    finally:
        for path, value, entry in reversed(undo):
            if value is not None:
                _write(path, value)
            if entry is not None:
                entry.unlink(missing_ok=True)
        if isinstance(facts.get("thp"), dict):
            facts["thp"]["after"] = selected(THP)
        if isinstance(facts.get("governor"), dict):
            facts["governor"]["after"] = {p.parts[-3]: selected(p) for p in governors()}
        if isinstance(facts.get("halt_poll_ns"), dict):
            facts["halt_poll_ns"]["after"] = int(selected(HALT_POLL))


def drop_caches(control: NoiseControl, record: dict, log) -> None:
    """Sync and drop the OS page cache (storage.drop_caches) right before the measured window."""
    if not control.drop_caches:
        return
    try:
        storage.drop_caches()
    except OSError as e:
        record.setdefault("noise_control", {})["drop_caches"] = f"not available: {e.strerror or e}"
        _warn(log, f"noise_control.drop_caches: not available: {e.strerror or e}")
        return
    record.setdefault("noise_control", {})["drop_caches"] = {"at": round(time.time(), 3)}


class Pinning:
    """The window's CPU sets (split): the server's process trees pinned when the window starts, the
    client through client() (its Popen's preexec), the monitors' processes and this process's threads
    through monitors(); this process's own affinity restored at the end."""

    def __init__(self, control: NoiseControl, server: bool, record: dict, log, why_not: str | None = None):
        self.sets = None
        self.facts = record.setdefault("noise_control", {})
        self._own = None
        if not control.cpu_pinning:
            return
        cpus = available_cpus()
        if why_not is None and (sets := split(cpus, server)) is not None:
            self.sets = sets
            self.facts["cpu_pinning"] = {"cpus": sets, "pinned": {}}
            return
        why = why_not or f"{len(cpus)} CPUs, {needed(server)} needed"
        self.facts["cpu_pinning"] = f"not applied: {why}"
        _warn(log, f"noise_control.cpu_pinning: not applied: {why}")

    def server(self, pids: list[int]) -> None:
        if self.sets:
            self.facts["cpu_pinning"]["pinned"]["server"] = [
                p for pid in pids for p in pin(pid, self.sets["server"], tree=True)]

    def monitors(self, pids: list[int]) -> None:
        """The monitors' processes and every thread of this process (samplers, the progress reader)."""
        if self.sets:
            self._own = os.sched_getaffinity(0)
            pin(os.getpid(), self.sets["monitors"])
            self.facts["cpu_pinning"]["pinned"]["monitors"] = [
                p for pid in pids for p in pin(pid, self.sets["monitors"])] + [os.getpid()]

    def client(self):
        """A preexec_fn for the client's Popen (None without pinning): it and all it forks start on the
        client's CPUs."""
        if not self.sets:
            return None
        cpus = self.sets["client"]
        self.facts["cpu_pinning"]["pinned"]["client"] = True
        return lambda: os.sched_setaffinity(0, cpus)

    def restore(self) -> None:
        if self._own is not None:
            pin(os.getpid(), sorted(self._own))
            self._own = None


def _warn(log, message: str) -> None:
    log.write(f"warning: {message}\n")
    log.flush()


KEY = "noise_control"


def control(config: dict) -> NoiseControl | None:
    """The per-repetition part of noise_control (the schema checked its values), or None when nothing
    is set: a recipe without it stays equal to one recorded before noise control existed."""
    wanted = NoiseControl(**{k: v for k, v in config.get(KEY, {}).items() if k != "canary"})
    return wanted if wanted.any else None


def canary_every(config: dict) -> int | None:
    """noise_control.canary.every: repetitions between two canary runs, or None without a canary."""
    return config.get(KEY, {}).get("canary", {}).get("every")


def _check_pinning(draft: Draft, cells: list) -> list[str]:
    """cpu_pinning on a host with fewer CPUs than a cell's parts: one warning for the study (each run
    records "not applied" in its run.json), not a refusal."""
    wanted = control(draft.config)
    if wanted is None or not wanted.cpu_pinning:
        return []
    cpus = len(available_cpus())
    need = max(needed(draft.workload(cell).database) for cell in cells)
    if cpus >= need:
        return []
    return [f"noise_control.cpu_pinning: not applied where a cell needs {need} CPUs: this host has {cpus}"]


def resources(repetition: Repetition) -> list:
    """THP, the CPU governor and halt polling (host_settings), the first resource of the stack: set before the
    filesystem and the server map their memory, restored last."""
    control = repetition.recipe.noise_control
    if control is None:
        return []
    return [("host", "settings", host_settings(control, repetition.record, repetition.log, repetition.active))]


CONCERN = Concern(
    name="noise control", warnings=_check_pinning, resources=resources,
    study=lambda draft, cells: {"noise_control": control(draft.config), "canary_every": canary_every(draft.config)},
    recipe=lambda study, values, database: {"noise_control": study.noise_control}
    if study.noise_control is not None else {})
