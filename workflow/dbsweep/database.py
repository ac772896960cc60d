"""The database side of a run: credentials, a running server with its sysbench option file,
loading a dataset, and server counters sampled on the run's clock."""
from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path

from dbsweep import engines, runtime, servers, storage, workloads
from dbsweep.recipe import Recipe
from dbsweep.runtime.memory import memory_cgroup
from dbsweep.topology.nodes import NodeSpec

CREDENTIALS = "credentials.json"  # at the filesystem's root, beside the datadir; mode 0600
DATADIR = "data"


@dataclass
class Database:
    engine: str
    family: object  # the engines.<family> module
    handle: object  # what family.server() yields
    conn: object  # family.Conn
    option_file: Path  # sysbench --config-file with the connection, mode 0600
    local: object = None  # how this process reaches it (conn, or the socket for a node in a namespace)
    node: str | None = None  # its node's name in a topology
    memory_cgroup: object = None  # the runtime.memory.MemoryCgroup that caps it (recipe.memory_limit), or None

    def __post_init__(self):
        if self.local is None:
            self.local = self.conn

    def sysbench(self, argv: list[str]) -> list[str]:
        """A sysbench command with what the engine needs (e.g. MyRocks tables), before its command word."""
        return argv[:-1] + self.family.sysbench_args(self.engine) + argv[-1:]


def write_secret(path: Path, text: str) -> None:
    """Write a file only its owner can read, never readable for a moment in between."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def new_credentials(root: Path) -> dict:
    creds = {"user": "dbsweep", "password": secrets.token_urlsafe(24), "database": "dbsweep"}
    write_secret(root / CREDENTIALS, json.dumps(creds))
    return creds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running(recipe: Recipe, root: Path, log, memory: str | None = None, keep: Path | None = None, *,
            node: NodeSpec | None = None, node_options: dict | None = None):
    """The cell's server on root/data, ready, with a sysbench option file; stopped on exit.

    Its run folder (socket, pid file, config, logs) is a short one under /tmp, since a unix
    socket path has at most 107 bytes; on exit its config and logs are copied into `keep`
    (never the sysbench option file, which holds the password) and the folder is removed.

    node: a topology's node (its address, port and namespace; root is its filesystem), with
    node_options, the server options dbsweep sets for it (replication); None: one server on
    127.0.0.1. A node's Database has `local`, the connection of this process (through the
    socket: the node's address is inside its namespace)."""
    engine = recipe.engine
    family = engines.family(engine)
    build = basedir(recipe)
    creds = json.loads((root / CREDENTIALS).read_text())
    rundir = Path(tempfile.mkdtemp(prefix="dbsweep-"))
    # recorded, so that a kill leaves no sysbench option file (the password) behind
    entry = storage.register(runtime.active, {"remove": str(rundir)}) if runtime.active else None
    try:
        rundir.chmod(0o755)
        port = node.port if node else free_port()
        listen = node.address if node else "127.0.0.1"
        config = family.config_text(engine, memory, recipe.server_options or {}, root / DATADIR, rundir, port,
                                    basedir=build, listen=listen, node_options=node_options)
        limit = recipe.memory_limit if memory else None
        capped = memory_cgroup(rundir.name, limit) if limit else nullcontext()
        with capped as add, family.server(engine, root / DATADIR, rundir, config, log, cgroup=add,
                                          basedir=build, netns=node.netns if node else None) as handle:
            conn = family.Conn(host=listen, port=port, socket=handle.socket, **creds)
            option_file = rundir / "sysbench.cfg"
            write_secret(option_file, "\n".join(family.sysbench_options(conn, engine)) + "\n")
            local = dataclasses.replace(conn, host=None) if node and node.netns else conn
            try:
                yield Database(engine, family, handle, conn, option_file, local, node.name if node else None, add)
            finally:
                option_file.unlink(missing_ok=True)
    finally:
        if keep is not None:
            for path in sorted(rundir.glob("*")):
                if path.is_file() and path.suffix in (".log", ".cnf", ".conf"):
                    shutil.copyfile(path, _free_name(keep, path.name))
        shutil.rmtree(rundir, ignore_errors=True)
        if entry is not None:
            entry.unlink(missing_ok=True)


def _free_name(keep: Path, name: str) -> Path:
    """keep/server-NAME, or server2-NAME, server3-NAME … for later starts (a cold start runs the server twice)."""
    n = 1 + sum(1 for _ in keep.glob(f"server*-{name}"))
    return keep / (f"server-{name}" if n == 1 else f"server{n}-{name}")


def load(recipe: Recipe, root: Path, log) -> list[list[str]]:
    """A new datadir under root with the workload's dataset loaded and the optimizer's statistics taken
    (engines' analyze: what a loaded database has once its background statistics have run, and a server
    stopped right after its load has not), shut down cleanly."""
    family = engines.family(recipe.engine)
    workload = workloads.get(recipe.tool)
    commands = family.initialize(root / DATADIR, log, basedir=basedir(recipe), options=recipe.server_options)
    creds = new_credentials(root)
    with running(recipe, root, log) as db:
        family.create_user(db.handle, creds["user"], creds["password"], creds["database"])
        if workload.load is not None:  # loaded through the engine's own client
            commands += workload.load(db, recipe.dataset, log)
        for argv in workload.prepare(recipe.dataset, db.option_file):
            with workload.client(db, argv) as (argv, env):
                log.write(f"$ {' '.join(argv)}\n")
                log.flush()
                done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      errors="replace", env=env)
                log.write(done.stdout)
                log.flush()
                if done.returncode != 0:  # its own last lines, and the server's (a full disk shows there)
                    said = [line for line in done.stdout.splitlines() if line.strip()][-5:]
                    raise RuntimeError(f"{argv[0]} prepare failed (exit {done.returncode}):\n" + "\n".join(said)
                                       + "\nthe server's log:\n" + "\n".join(server_log_tail(db)))
            commands.append(argv)
        statistics = family.analyze(db.handle, creds["database"])
        if statistics:
            log.write(f"$ {' '.join(statistics)}\n")
            log.flush()
            commands.append(statistics)
    return commands


def server_log_tail(db: Database, lines: int = 5) -> list[str]:
    """The last lines of the server's own log files (error log, stderr)."""
    said = []
    for path in sorted(db.handle.rundir.glob("*.log")):
        with suppress(OSError):
            said += [line for line in path.read_text(errors="replace").splitlines() if line.strip()][-lines:]
    return said


def basedir(recipe: Recipe) -> Path | None:
    """The server build a recipe runs: None for Debian's packages."""
    return Path(recipe.basedir).resolve() if recipe.basedir else None


def origin(recipe: Recipe) -> dict:
    """Where the server binary came from: Debian's package, a registry (origin.json of the fetch),
    or the user's build, with the binary's sha256."""
    family = engines.family(recipe.engine)
    where = basedir(recipe)
    if where is not None and (where / servers.ORIGIN).exists():
        return json.loads((where / servers.ORIGIN).read_text())
    binary = family.server_binary(where)
    return {"registry": "debian" if where is None else "basedir", "basedir": str(where) if where else None,
            "binary": str(binary), "sha256": servers.sha256(Path(binary))}


class Sampling:
    """Several samplers (a topology's nodes, its proxy) as one: entered and left together; error is the
    first of theirs."""

    def __init__(self, samplers: list[Sampler]):
        self.samplers = samplers

    def __enter__(self) -> Sampling:
        for sampler in self.samplers:
            sampler.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for sampler in self.samplers:
            sampler.__exit__(*exc)

    @property
    def error(self) -> Exception | None:
        return next((s.error for s in self.samplers if s.error is not None), None)


def server_counters(db: Database):
    """What a Sampler reads of a server: its family's counters, through this process's connection."""
    return lambda: db.family.counters(db.local)


class Sampler:
    """Counters every second (read(): a server's, a proxy's) and the datadir size every few seconds, as
    JSON lines, for the body of a with-block. Rows carry epoch seconds: the clock of vmstat, iostat and
    the tool."""

    def __init__(self, read, datadir: Path | None, out: Path, interval: float = 1.0, size_every: int = 5):
        self.read, self.datadir, self.out = read, datadir, out
        self.interval, self.size_every = interval, size_every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.error: Exception | None = None
        self.cpu_s = 0.0  # CPU seconds of the sampling thread (this side only), once it has stopped

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        try:
            with open(self.out, "w") as out:
                tick = 0
                next_at = time.time()
                while True:
                    row = {"time": round(time.time(), 3), "counters": self.read()}
                    if self.datadir is not None and tick % self.size_every == 0:
                        row["datadir_bytes"] = datadir_bytes(self.datadir)
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    tick += 1
                    next_at += self.interval
                    if self._stop.wait(max(0.0, next_at - time.time())):
                        break
        except Exception as e:  # the measured run goes on; collect reports a sampler without rows
            self.error = e
        finally:
            self.cpu_s = time.thread_time()


def datadir_bytes(path: Path) -> int:
    """Bytes allocated below path (like du), files only."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            with suppress(FileNotFoundError):
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total


@contextmanager
def engine_status_around(nodes, raw: Path, record: dict, log):
    """The nodes' engine status texts (engine_status) right before the body (a measured window) and right
    after it, also after a window that failed (what the engine says then may tell why), but not after an
    interrupt (Interrupted: the run must stop now). nodes() gives them as (name, Database, or None while
    a timed event has it down), at the moment it is called: a restart replaces a node's Database."""
    engine_status(nodes(), raw, "start", record, log)
    try:
        yield
    except Exception:
        engine_status(nodes(), raw, "end", record, log)
        raise
    engine_status(nodes(), raw, "end", record, log)


def engine_status(nodes: list[tuple[str, Database | None]], raw: Path, moment: str, record: dict, log) -> None:
    """Each node's engine status text (its family's engine_status: SHOW ENGINE INNODB STATUS, SHOW ENGINE
    ROCKSDB STATUS; nothing for a family that has none), outside what is measured: `moment` is "start"
    (right before the window), "end" (right after it) or "after-<phase>" (between two phases of a phased
    workload, e.g. the insert benchmark's after-load, after-index, after-qr). Written as the server gave it to
    raw/engine_status.<moment>.txt (the first node's: a topology's primary) and
    raw/engine_status-<node>.<moment>.txt (every other node's); run.json's engine_status[moment][node] names
    the file, or the error that left it out. A node down has none: one an event stopped or killed, and one
    an event started again, which is stopped with the window's events (Targets.close). A snapshot describes
    the run and is not measured: one that fails (a server that died or does not answer) is a warning in the
    log, never the run's failure."""
    for i, (name, db) in enumerate(nodes):
        path = raw / (f"engine_status.{moment}.txt" if i == 0 else f"engine_status-{name}.{moment}.txt")
        if db is None:  # down (events.jsonl says why)
            continue
        try:
            text = db.family.engine_status(db.handle, db.engine)
        except Exception as error:  # noqa: BLE001 - whatever it was, the measurement stands
            said = " ".join(str(error).split()) or type(error).__name__
            when = f"at the window's {moment}" if moment in ("start", "end") else moment.replace("-", " phase ")
            log.write(f"warning: engine status {when}, node {name}: not taken: {said}\n")
            log.flush()
            record.setdefault("engine_status", {}).setdefault(moment, {})[name] = {"error": said}
            continue
        if text is None:  # the family has no such text
            continue
        path.write_text(text, encoding="utf-8")
        record.setdefault("engine_status", {}).setdefault(moment, {})[name] = path.name
