"""Run one repetition of one cell: filesystem, monitors, the tool, the manifest.

Each attempt writes into its own `attempt~<time>-<host>-<pid>/` folder, which is
never reused, not even by result folders of several hosts copied together. The
repetition's `run.json` appears, by rename, only when the attempt completed, so a
failed or killed run never looks complete, and the raw output of every earlier
attempt stays where it was.

A cell whose own configuration is refused (the server exits before it accepts
connections, the tool exits with an error while its server still runs) leaves
`rejected.json` beside its attempts: a retry of the same job (Snakemake's
--retries, meant for lost nodes and time limits) reads it and stops before
measuring the same refusal again. A server that died while serving (killed, the
OOM killer) is a failure, not a refusal: it is retried.

The repetition runs inside runtime.owned: the host's measuring lock, a cgroup
holding every process it starts, a guardian that releases it if this process
dies; its resources are a runtime.resources.Stack, left in reverse.

The study's noise_control (noise.py) is applied here: THP and the CPU governor as the first resource
of the stack (set before the filesystem and the server, which map their memory, restored last), and
right before each measured window (_window) the page cache dropped and the CPUs pinned.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import select
import signal
import subprocess
import threading
import time
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path

import psutil

from dbsweep import accounting, database, disturbances, engines, manifest, noise, storage, workloads
from dbsweep.monitors import Monitors
from dbsweep.progress import Follow
from dbsweep.recipe import Recipe
from dbsweep.runtime import cgroup, owned
from dbsweep.runtime.resources import Stack
from dbsweep.events import schedule as event_schedule
from dbsweep.events.targets import Node
from dbsweep.runtime.signals import signals_raise
from dbsweep.server_death import server_death, signal_name
from dbsweep.topology import cell as topology_cell
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


def repetition(cell: dict, rep: int, recipe: Recipe, out: Path, image: Path | None, active: Path, log,
               retry: int = 1, calibration: dict | None = None) -> dict:
    """Measure one repetition; write out (the repetition's run.json) only on success. `retry` is
    Snakemake's attempt number of the job: above 1, a refusal recorded by an earlier attempt of the
    same recipe is not measured again. `calibration`: how a percentage rate became the recipe's rate
    (calibration.resolve), recorded in run.json."""
    rejected = out.parent / REJECTED
    digest = hashlib.sha256(json.dumps(recipe.as_dict(), sort_keys=True, default=str).encode()).hexdigest()[:16]
    if retry > 1 and rejected.exists():
        earlier = json.loads(rejected.read_text())
        if earlier.get("recipe") == digest:
            raise Rejected(f"not retried: {earlier['attempt']} was refused: {earlier['error']}")
    host = manifest.host()
    if cell.get("host") not in (None, host["hostname"], host["node"]):
        raise RuntimeError(f"cell is for host {cell['host']}; this is {host['node'] or host['hostname']}")
    with signals_raise(), owned(f"run {out.parent}", active, log):
        return _attempt(cell, rep, recipe, out, image, active, log, host, rejected, digest, calibration)


def _attempt(cell: dict, rep: int, recipe: Recipe, out: Path, image: Path | None, active: Path, log, host: dict,
             rejected: Path, digest: str, calibration: dict | None = None) -> dict:
    """One attempt, inside the repetition's cgroup and measuring lock: its resources entered in order
    (filesystem, server, monitors, the tool) and left in reverse."""
    tool = workloads.get(recipe.tool)
    name = re.sub(r"[^A-Za-z0-9.-]", "_", host["node"] or host["hostname"])
    attempt = out.parent.resolve() / f"attempt~{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{name}-{os.getpid()}"
    raw = attempt / "raw"
    raw.mkdir(parents=True)
    scratch = attempt / "scratch"  # the image copy (holding the password) and the mount point
    record = {
        "cell": cell, "rep": rep, "recipe": recipe.as_dict(), "attempt": attempt.name,
        "host": host, "tools": {recipe.tool: tool.version()}, "dbsweep": manifest.dbsweep_version(),
        "started": manifest.now(), "status": "failed", "commands": [],
    } | ({"calibration": calibration} if calibration else {})
    try:
        with storage.scratch_files(scratch, active), Stack(log) as stack:
            if recipe.noise_control is not None:
                stack.enter("host", "settings", noise.host_settings(recipe.noise_control, record, log, active))
            fs = stack.enter("filesystem", recipe.filesystem["type"],
                             storage.filesystem(recipe.filesystem, scratch, active, image))
            record["filesystem"] = fs.facts
            record["commands"] += fs.commands
            if image is None:
                record["commands"] += fill(recipe, fs.path, scratch, log)
            if tool.database:
                _measure_database(recipe, fs, image, raw, scratch, record, log, stack)
            else:
                argv = tool.command(recipe.options, recipe.threads, raw)
                _measure(recipe, argv, fs.path, fs.devices, raw, record, log)
            tool.summary(raw)  # refuses output without the tool's final report
        record["status"] = "ok"
    except BaseException as e:
        record["error"] = str(e) or type(e).__name__
        if isinstance(e, Rejected):
            record["rejected"] = True
            manifest.write_json(rejected, {"attempt": attempt.name, "recipe": digest, "error": record["error"]})
        raise
    finally:
        record["ended"] = manifest.now()
        record["checksums"] = manifest.checksums(raw)
        manifest.write_json(attempt / "run.json", record)
    manifest.write_json(out, record)
    rejected.unlink(missing_ok=True)
    return record


def fill(recipe: Recipe, root: Path, scratch: Path, log) -> list[list[str]]:
    """Put a dataset on a fresh filesystem at root: the tool's files, or a server datadir with the
    data loaded (a cell's recipe, or an image's: Recipe.preparing)."""
    if recipe.database:
        return database.load(recipe, root, log)
    commands = workloads.get(recipe.tool).prepare(recipe.dataset)
    for argv in commands:
        log.write(f"$ {' '.join(argv)}\n")
        log.flush()
        subprocess.run(argv, cwd=root, stdout=log, stderr=subprocess.STDOUT, check=True)
    return commands


def _measure(recipe: Recipe, argv: list[str], cwd: Path, devices: list[str], raw: Path, record: dict, log, sampler=None,
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
    with _window(recipe, raw, devices, record, log, sampler, servers) as pinning, \
            _death_watch(db.handle.pid if db is not None else None) as death:
        server = {"start": account()} if account else None
        with (timed or _untimed)(record["measure_start"]) as schedule:
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
    client = (f"{name} exited with {status}: {_tail(raw, 'stderr.txt', 'stdout.txt')}" if status > 0
              else f"{name} was killed by signal {-status} ({signal_name(-status)})")
    gone = server_death(db, record["measure_start"], death.at) if db is not None else None
    if gone:
        what, words = gone
        raise RuntimeError(f"{what}, then {client}\nthe server's last words: {words}")
    if status > 0:  # the tool refused; killed by a signal (< 0) is not the cell's doing
        raise Rejected(client)
    raise RuntimeError(client)


@contextmanager
def _window(recipe: Recipe, raw: Path, devices: list[str], record: dict, log, sampler=None,
            servers: list[int] | None = None, not_pinned: str | None = None):
    """Around a measured window: the page cache dropped (noise_control.drop_caches: after the restore,
    the server's start and its warm-up, which all fill it), the monitors (and a server sampler) started,
    the CPUs pinned (cpu_pinning: the servers' process trees, the monitors and this process; the client
    through the yielded Pinning's client()), the host looked at, and record["measure_start"] set; once
    the window has ended, its CPU steal and the CPU other processes used in it (disturbances.after_window).
    not_pinned: why the CPUs cannot be pinned in this cell, if they cannot."""
    control = recipe.noise_control or noise.NoiseControl()
    noise.drop_caches(control, record, log)
    pinning = noise.Pinning(control, servers is not None, record, log, not_pinned)
    try:
        pinning.server(servers or [])
        with Monitors(raw, devices) as mon, (sampler or nullcontext()):
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
    gone = _server_gone(db) if db is not None else None
    if gone:
        raise RuntimeError(f"{gone}\n{message}")
    raise Rejected(message)


def _server_gone(db) -> str | None:
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


class Window:
    """What a workload that drives the server itself gets: the running server (db), the cell's recipe,
    the raw folder, and restart(): stop the server, drop the OS caches, start it again (sets db)."""

    def __init__(self, db, recipe: Recipe, raw: Path):
        self.db, self.recipe, self.raw = db, recipe, raw
        self.restart = None


def _measure_database(recipe: Recipe, fs, image: Path | None, raw: Path, scratch: Path, record: dict, log,
                      stack: Stack) -> None:
    """Start the cell's server (or its topology: nodes, network, proxy); warm up; with cold_start stop
    it, drop the OS caches and start it again; then measure with server counters sampled beside vmstat
    and iostat: one run of the tool, the tool's phases (several runs in one window), or a tool that
    drives the server itself (tool.measure, given a Window; no per-second counters, which would disturb
    its own). The tool reaches the server through its declared client (tool.client: argv and
    environment), on the topology's client host when there is one."""
    tool = workloads.get(recipe.tool)
    topology = None

    def server():
        nonlocal topology
        try:
            db, topology = topology_cell.serve(recipe, fs, image, scratch, raw, log, stack)
        except engines.ServerExited as e:  # it would not start with the cell's options
            raise Rejected(str(e)) from e
        if topology is not None:
            record["topology"] = topology.facts
        return db

    def client(db, argv):
        """tool.client, on the topology's client host; in a cell with timed events, through the tool's wait
        report (what a stalled second still shows)."""
        timed = recipe.events is not None and tool.wait_report is not None
        return _on_client(tool.client(db, argv), topology, raw, tool.wait_report if timed else None)

    db = server()
    if recipe.warmup_s:
        argv = tool.command(recipe.options, recipe.threads, raw, db.option_file, time_s=recipe.warmup_s)
        with client(db, argv) as (argv, env):
            record["commands"].append(argv)
            progress = Follow(raw / f"warmup.{tool.live_from}", tool.live, recipe.warmup_s, log, "warm-up")
            if run_tool(argv, scratch, raw / "warmup.stdout.txt", raw / "warmup.stderr.txt", progress, env) != 0:
                refused(f"warm-up: {_tail(raw, 'warmup.stderr.txt', 'warmup.stdout.txt')}", db)
    if tool.before_window is not None:  # outside the window, before a cold start drops what it read
        tool.before_window(db, recipe.options, raw)
    if recipe.cold_start:
        stack.close("server")
        storage.drop_caches()
        record["caches_dropped"] = manifest.now()
        db = server()
    record["server"] = {"engine": db.engine, "version": db.family.version(db.local),
                        "binary": db.family.server_version(database.basedir(recipe)),
                        "origin": database.origin(recipe), "memory_limit": recipe.memory_limit}
    with open(raw / "variables.tsv", "w") as f:
        f.writelines("\t".join(row) + "\n" for row in db.family.variables(db.local))
    _dataset_facts(db, raw, log)
    if tool.measure is not None:  # the workload drives the server itself, restarts included
        window = Window(db, recipe, raw)

        def restart():
            stack.close("server")
            storage.drop_caches()
            record.setdefault("restarts", []).append(manifest.now())
            window.db = server()
            return window.db

        window.restart = restart
        with (_readings_around(lambda: [("primary", window.db)], None, recipe, record),
              database.engine_status_around(lambda: [("primary", window.db)], raw, record, log),
              _window(recipe, raw, fs.devices, record, log, servers=[db.handle.pid],
                      not_pinned="the workload is its client in dbsweep's own process")):
            tool.measure(window)
            record["measure_end"] = time.time()
            record["exit_status"] = 0
        return
    nodes = topology_cell.nodes(recipe, db, topology, fs, raw, log)
    sampler = topology_cell.sampling(nodes, topology, raw)
    timed = event_schedule.timed(recipe.events, nodes, topology.network if topology is not None else None,
                                 topology_cell.latency(recipe), raw, log)
    servers = [node.db.handle.pid for node in nodes]
    account = _accounting(nodes)
    up = lambda: [(node.name, None if node.down else node.db) for node in nodes]  # noqa: E731
    with _readings_around(up, topology, recipe, record), database.engine_status_around(up, raw, record, log):
        if tool.phases is not None:
            _measure_phases(recipe, tool, tool.phases(recipe.options, recipe.threads, db.option_file), db, fs, raw,
                            scratch, record, log, sampler, client, timed, servers, account,
                            between=lambda phase: database.engine_status(up(), raw, f"after-{phase}", record, log))
        else:
            argv = tool.command(recipe.options, recipe.threads, raw, db.option_file)
            with client(db, argv) as (argv, env):
                _measure(recipe, argv, scratch, topology.devices if topology else fs.devices, raw, record, log,
                         sampler, db, env, timed, servers, account)
    if sampler.error:
        raise RuntimeError(f"server counters: {sampler.error}")
    if tool.after_run is not None:  # e.g. tpcc's consistency check, against the still-running server
        argv, name = tool.after_run(recipe.options, recipe.threads, db.option_file)
        with client(db, argv) as (argv, env):
            record["commands"].append(argv)
            errors = name.replace("stdout", "stderr")
            if run_tool(argv, scratch, raw / name, raw / errors, env=env) != 0:
                gone = _server_gone(db)  # first: the client's "lost connection" is its consequence
                raise RuntimeError((f"{gone}\n" if gone else "") + f"{argv[-1]}: {_tail(raw, errors, name)}")


def _dataset_facts(db, raw: Path, log) -> None:
    """The benchmark database as its catalog reports it (the family's dataset_facts) into raw/dataset.tsv, for
    delivered.dataset; one that cannot be read is a warning (its checks are then "not read"), not a failure."""
    try:
        facts = db.family.dataset_facts(db.local)
    except Exception as error:  # noqa: BLE001 - a description of the run, not a measurement
        log.write(f"warning: the dataset's catalog was not read: {' '.join(str(error).split())}\n")
        return
    (raw / "dataset.tsv").write_text("".join(f"{key}\t{value}\n" for key, value in sorted(facts.items())))


@contextmanager
def _readings_around(nodes, topology, recipe: Recipe, record: dict):
    """What delivered.py checks that can only be read while the cell runs, right before the body (a measured
    window) and right after it, when it ended well: each node's memory cgroup limit (run.json memory_cap:
    node -> {start, end}), and at the end, where no timed event changes them, the links' round trips
    (topology.rtt_end_ms; the start's are the topology's own rtt_ms). nodes() as for database.engine_status_around."""
    def caps(moment: str) -> None:
        for name, db in nodes():
            cap = getattr(db, "memory_cgroup", None) if db is not None else None
            if cap is not None:
                record.setdefault("memory_cap", {}).setdefault(name, {})[moment] = int(cap.limit_file.read_text())

    caps("start")
    yield
    caps("end")
    if topology is not None and not recipe.events:
        record["topology"]["rtt_end_ms"] = topology.network.measure_rtt()


@contextmanager
def _on_client(tool_client, topology, raw: Path, wait_report=None):
    """A tool's (argv, env): through its wait report when given (Workload.wait_report), on the
    topology's client host when there is a topology."""
    with tool_client as (argv, env):
        if wait_report is not None:
            argv, extra = wait_report(argv, time.time(), raw)
            env = (env if env is not None else dict(os.environ)) | extra
        yield (topology.client_argv(argv) if topology is not None else argv), env


def _accounting(nodes: list[Node]):
    """A reading of the servers' own CPU and IO totals (accounting.reading) over the nodes that are up:
    one taken down or started again between two readings changes the roots, which then give no delta."""
    def read() -> dict:
        return accounting.reading([node.db.handle.pid for node in nodes
                                   if node.db is not None and not node.down and node.db.handle.pid])
    return read


@contextmanager
def _untimed(start: float):
    yield None


def _measure_phases(recipe: Recipe, tool, phases: list[tuple[str, list[str]]], db, fs, raw: Path, scratch: Path,
                    record: dict, log, sampler, client, timed=None, servers: list[int] | None = None,
                    account=None, between=None) -> None:
    """Several sysbench runs in one measured window (one clock for all monitors), each phase's output in
    raw/<phase>/, and raw/phases.json (its start, end, the datadir size at its end and, with account,
    the servers' own CPU and IO totals read at its start and end: `server`) rewritten after each phase,
    so a failed phase keeps what the earlier ones measured. between(phase) runs after each phase but the
    last, outside the phases' own times (the engine status texts: the window's end has the last one's)."""
    done = []
    with _window(recipe, raw, fs.devices, record, log, sampler, servers) as pinning:
        with (timed or _untimed)(record["measure_start"]) as schedule:
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
                    gone = _server_gone(db)  # first: the client's "lost connection" is its consequence
                    raise RuntimeError((f"{gone}\n" if gone else "")
                                       + f"phase {name}: sysbench exited with {status}: "
                                       f"{_tail(raw / name, 'stderr.txt', 'stdout.txt')}")
                if between is not None and name != phases[-1][0]:
                    between(name)
            record["exit_status"] = 0
            record["measure_end"] = time.time()
    if schedule is not None and schedule.errors:
        raise RuntimeError(f"timed events failed: {'; '.join(schedule.errors)}")


def _tail(raw: Path, *names: str, lines: int = 3) -> str:
    """The last lines of the first of names that has any (sysbench prints its errors on stdout), but the
    wait report's own (dbsweep-…)."""
    for name in names:
        path = raw / name
        text = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
        text = [line for line in text if not line.startswith("dbsweep-")]
        if text:
            return " | ".join(text[-lines:])
    return "(no output)"
