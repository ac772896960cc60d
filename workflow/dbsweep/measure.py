"""The measured window and the tool's process, for every kind of cell: the tool run in a session and a
sub-cgroup of its own and stopped with all its descendants (run_tool); around the window the page cache
dropped and the CPUs pinned (noise.py), the monitors and a server sampler, the host looked at
(disturbances.py); the cell's timed events beside it; and the words a failure ends with: a refusal of the
cell's own configuration (Rejected), or a server that died while serving, said first as the cause.

run.py (a storage cell) and database_run.py (a cell that runs a server) measure through it.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path

import psutil

from dbsweep import database, disturbances, manifest, noise, workloads
from dbsweep.devices import throttle_counts
from dbsweep.monitors import Monitors
from dbsweep.progress import Follow
from dbsweep.recipe import Recipe
from dbsweep.runtime import cgroup
from dbsweep.server_death import server_death, signal_name
from dbsweep.topology.network import program

REJECTED = "rejected.json"


class Rejected(RuntimeError):
    """The cell's own configuration was refused; running it again on another node gives the same answer."""


def run_tool(argv: list[str], cwd: Path, stdout: Path, stderr: Path, progress: Follow | None = None,
             env: dict | None = None, preexec=None) -> int:
    """Run argv in a session of its own, inside a sub-cgroup of the repetition's when there is one; when
    it ends or we are interrupted, it and all its descendants are stopped: those that lost their parent
    too (fio's workers, when fio itself was killed). `progress` follows its per-second output into the run
    log; env is the tool's environment (else ours); preexec runs in the child before it execs (the
    client's CPUs: noise.Pinning.client)."""
    inside = cgroup.current.child(f"tool-{time.monotonic_ns()}") if cgroup.current else None
    prefix = inside.enter_argv() if inside else []
    try:
        with open(stdout, "wb") as out, open(stderr, "wb") as err, (progress or nullcontext()):
            proc = subprocess.Popen(prefix + argv, cwd=cwd, stdout=out, stderr=err, start_new_session=True, env=env,
                                    preexec_fn=preexec)
            try:
                return proc.wait()
            finally:
                stop_tree(proc)
    finally:
        if inside is not None:
            inside.kill()
            inside.remove()


def stop_tree(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM proc and every descendant, SIGKILL what is left after `grace` seconds, and wait until all
    are gone. Descendants are found by parentage, not process group: fio's job processes call setsid()."""
    try:
        tree = [psutil.Process(proc.pid)]
        tree += tree[0].children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    for p in tree:
        _signal(p, signal.SIGTERM)
    _, alive = psutil.wait_procs(tree, timeout=grace)
    for p in alive:
        _signal(p, signal.SIGKILL)
    # A process in uninterruptible IO dies only when its IO completes, and holds the mount until then.
    _, alive = psutil.wait_procs(alive, timeout=60)
    proc.wait()
    if alive:
        raise RuntimeError(f"{proc.args[0]}: processes {[p.pid for p in alive]} would not die")


def _signal(p: psutil.Process, sig: int) -> None:
    with suppress(psutil.NoSuchProcess):
        p.send_signal(sig)


def measure(recipe: Recipe, argv: list[str], cwd: Path, devices: list[str], raw: Path, record: dict, log, sampler=None,
            db=None, env: dict | None = None, timed=None, servers: list[int] | None = None, account=None) -> None:
    """The measured window: monitors (and a server sampler) around the tool, and the cell's timed events
    (timed(start): their schedule from the window's start) beside it. servers: the pids of the cell's
    servers (None in a storage cell), for cpu_pinning. account() reads the servers' own CPU and IO totals
    (accounting.reading), into run.json's server_accounting at the window's start and end."""
    record["commands"].append(argv)
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    tool = workloads.get(recipe.tool)
    progress = Follow(raw / tool.live_from, tool.live, recipe.duration_s, log)
    with window(recipe, raw, devices, record, log, sampler, servers) as pinning, \
            _death_watch(db.handle.pid if db is not None else None) as death:
        server = {"start": account()} if account else None
        with (timed or untimed)(record["measure_start"]) as schedule:
            record["exit_status"] = run_tool(argv, cwd, raw / "stdout.txt", raw / "stderr.txt", progress, env,
                                             pinning.client())
            record["measure_end"] = time.time()
            if server is not None:
                record["server_accounting"] = server | {"end": account()}
    if schedule is not None and schedule.errors:
        raise RuntimeError(f"timed events failed: {'; '.join(schedule.errors)}")
    name, status = program(argv), record["exit_status"]
    if status == 0:
        return
    # the client's exit, said after the server's death when the server died first: that is the cause
    client = (f"{name} exited with {status}: {tail(raw, 'stderr.txt', 'stdout.txt')}" if status > 0
              else f"{name} was killed by signal {-status} ({signal_name(-status)})")
    gone = server_death(db, record["measure_start"], death.at) if db is not None else None
    if gone:
        what, words = gone
        raise RuntimeError(f"{what}, then {client}\nthe server's last words: {words}")
    if status > 0:  # the tool refused; killed by a signal (< 0) is not the cell's doing
        raise Rejected(client)
    raise RuntimeError(client)


@contextmanager
def window(recipe: Recipe, raw: Path, devices: list[str], record: dict, log, sampler=None,
           servers: list[int] | None = None, not_pinned: str | None = None):
    """Around a measured window: the page cache dropped (noise_control.drop_caches: after the restore,
    the server's start and its warm-up, which all fill it), the monitors (and a server sampler) started, the
    throttle's counts of a capped device read (devices.throttle_counts),
    the CPUs pinned (cpu_pinning: the servers' process trees, the monitors and this process; the client
    through the yielded Pinning's client()), the host looked at, and record["measure_start"] set; once
    the window has ended, its CPU steal and the CPU other processes used in it (disturbances.after_window).
    not_pinned: why the CPUs cannot be pinned in this cell, if they cannot."""
    control = recipe.noise_control or noise.NoiseControl()
    noise.drop_caches(control, record, log)
    pinning = noise.Pinning(control, servers is not None, record, log, not_pinned)
    try:
        pinning.server(servers or [])
        with Monitors(raw, devices) as mon, (sampler or nullcontext()), throttle_counts(record):
            record["monitors"] = mon.commands
            pinning.monitors(mon.pids)
            _look_around(record, log)
            before = disturbances.cpu_use(_own)
            record["measure_start"] = time.time()
            yield pinning
            for warning in disturbances.after_window(record["disturbances"], before, disturbances.cpu_use(_own)):
                log.write(f"warning: {warning}\n")
    finally:
        pinning.restore()


def _look_around(record: dict, log) -> None:
    """What on the host may disturb the window about to start (disturbances.py), into run.json and, as
    warnings, into the log."""
    record["disturbances"] = disturbances.look(_own)
    for warning in record["disturbances"]["warnings"].values():
        log.write(f"warning: {warning}\n")
    log.flush()


def _own() -> set[int]:
    """The pids of this repetition's processes now (its cgroup's)."""
    return set(cgroup.current.pids()) if cgroup.current else set()


def refused(message: str, db=None) -> None:
    """Raise Rejected for a tool that exited with an error, unless its server had died meanwhile: a
    server killed while serving (SIGKILL, the OOM killer) is a failure, retried, not the cell's refusal,
    and it is said first, as the cause of the tool's error."""
    gone = server_gone(db) if db is not None else None
    if gone:
        raise RuntimeError(f"{gone}\n{message}")
    raise Rejected(message)


def server_gone(db) -> str | None:
    """What became of the server and what it said last, when its process is gone (or a zombie); None
    while it runs."""
    gone = server_death(db)
    return f"{gone[0]}; its last words: {gone[1]}" if gone else None





class _Death:
    """When a watched process ended (time.time()), or None while it runs or where it was not watched."""

    at: float | None = None


@contextmanager
def _death_watch(pid: int | None):
    """Note when process pid ends, while the body runs (a thread waiting on its pidfd, which becomes
    readable when it exits, zombie or not): a server's death is then said at its time in the window."""
    death = _Death()
    if pid is None:
        yield death
        return
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # gone already, or a kernel without pidfds
        yield death
        return
    if select.select([fd], [], [], 0)[0]:  # it ended before the window: no time in it to say
        os.close(fd)
        yield death
        return
    stop = threading.Event()

    def watch():
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not stop.is_set():
            if poller.poll(100):
                death.at = time.time()
                return

    thread = threading.Thread(target=watch, name=f"death-watch-{pid}", daemon=True)
    thread.start()
    try:
        yield death
    finally:
        stop.set()
        thread.join()
        os.close(fd)



@contextmanager
def untimed(start: float):
    yield None


def measure_phases(recipe: Recipe, tool, phases: list[tuple[str, list[str]]], db, fs, raw: Path, scratch: Path,
                   record: dict, log, sampler, client, timed=None, servers: list[int] | None = None,
                   account=None, between=None) -> None:
    """Several sysbench runs in one measured window (one clock for all monitors), each phase's output in
    raw/<phase>/, and raw/phases.json (its start, end, the datadir size at its end and, with account,
    the servers' own CPU and IO totals read at its start and end: `server`) rewritten after each phase,
    so a failed phase keeps what the earlier ones measured. between(phase) runs after each phase but the
    last, outside the phases' own times (the engine status texts: the window's end has the last one's)."""
    done = []
    with window(recipe, raw, fs.devices, record, log, sampler, servers) as pinning:
        with (timed or untimed)(record["measure_start"]) as schedule:
            for name, argv in phases:
                with client(db, argv) as (argv, env):
                    record["commands"].append(argv)
                    log.write(f"$ {' '.join(argv)}\n")
                    log.flush()
                    (raw / name).mkdir()
                    server = {"start": account()} if account else None
                    start = time.time()
                    status = run_tool(argv, scratch, raw / name / "stdout.txt", raw / name / "stderr.txt", env=env,
                                      preexec=pinning.client())
                    end = time.time()
                    if server is not None:
                        server["end"] = account()
                done.append({"phase": name, "argv": argv, "start": start, "end": end, "exit_status": status,
                             "datadir_bytes": database.datadir_bytes(fs.path / database.DATADIR)}
                            | ({"server": server} if server else {}))
                manifest.write_json(raw / "phases.json", done)
                if status != 0:
                    record["exit_status"] = status
                    gone = server_gone(db)  # first: the client's "lost connection" is its consequence
                    raise RuntimeError((f"{gone}\n" if gone else "")
                                       + f"phase {name}: sysbench exited with {status}: "
                                       f"{tail(raw / name, 'stderr.txt', 'stdout.txt')}")
                if between is not None and name != phases[-1][0]:
                    between(name)
            record["exit_status"] = 0
            record["measure_end"] = time.time()
    if schedule is not None and schedule.errors:
        raise RuntimeError(f"timed events failed: {'; '.join(schedule.errors)}")


def tail(raw: Path, *names: str, lines: int = 3) -> str:
    """The last lines of the first of names that has any (sysbench prints its errors on stdout), but the
    wait report's own (dbsweep-…)."""
    for name in names:
        path = raw / name
        text = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
        text = [line for line in text if not line.startswith("dbsweep-")]
        if text:
            return " | ".join(text[-lines:])
    return "(no output)"
