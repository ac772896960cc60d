"""Database server families behind one small interface.

ENGINES maps an engine (a value of the `engine` axis) to its server family;
family(engine) returns that family's module (mariadb.py, postgresql.py), and
every family module offers the same functions and declares the same names:
INTERFACE below (tests/test_engines.py holds them to it). Among them refused
(why a study may not set a server option), OPTION_NAME and OPTION_SPELLING
(what an option's name may hold), DEBIAN_ONLY (engines only Debian's packages
have, and why), FOREIGN_KEYS (per engine), VERSION_PARTS (how much of a fetched
version its server's --version line names), and what topologies read:
REPLICATION (the kinds each engine runs), SYNC_KINDS, SYNC_STATUS and
SYNC_UNACKED (a primary waiting for its replicas, and the commits none
acknowledged), FLOW_PAUSED_NS (a cluster's flow control), POSITION_UNIT (what
a replica's replication_position counts, in words), and engine_status
(the engine's own status text, SHOW ENGINE INNODB STATUS, kept from before and
after a measured window). DATASET_SETTINGS names the options that shape what
prepare creates (dataset_options picks them out of a cell's options for the
image key; check_dataset refuses their bad values at load) and dataset_facts
reads back what the server's catalog says the dataset is. A family without such a thing declares None or () or
returns None. Nothing outside
engines/ tests a family's or an engine's name: it reads these.

Every function that runs a server program takes `basedir`: None means
Debian's packages; a folder means the build in it (bin/, lib/, share/: one
that dbsweep.servers fetched, or a user's own unpacked tarball). Its programs
run with LD_LIBRARY_PATH=basedir/lib (see program_env).

The rest of this file is what the families share: running a command into a
log, checking that the service user can reach a folder, and supervising a
server process from its start to a stop that leaves nothing behind.
"""
from __future__ import annotations

import importlib
import os
import pwd
import re
import shlex
import signal
import socket
import subprocess
import time
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from collections.abc import Callable, Iterator

import psutil
import yaml

from dbsweep.errors import ConfigError

ENGINES = {"innodb": "mariadb", "myrocks": "mariadb", "postgresql": "postgresql"}
INTERFACE = (
    "server_version", "initialize", "config_text", "server", "admin_sql", "user_sql", "create_user", "analyze",
    "connect", "sysbench_options", "sysbench_args", "variables", "version", "counters", "CUMULATIVE", "hit_ratio",
    "engine_status", "logs_written", "supports", "server_binary", "build_family", "set_session",
    "session_value", "flush_statistics", "explain",
    "table_counters", "client", "client_env", "option_names", "refused", "check_replication",
    "Conn", "check_dataset", "dataset_facts", "DATASET_SETTINGS",
    "FAMILY", "NAME", "ENGINE_NAMES", "QUERY_COUNTERS", "OPTION_NAME", "OPTION_SPELLING", "DEBIAN_ONLY",
    "FOREIGN_KEYS", "SERVER_PROGRAMS",
    "VERSION_PARTS", "REPLICATION", "SYNC_KINDS", "SYNC_STATUS", "SYNC_UNACKED", "FLOW_PAUSED_NS",
    "POSITION_UNIT",
)
# What each family's cluster module (<family>_cluster.py) offers the topology: it builds on the family's module,
# which therefore never imports it (no import circle); the registry's cluster() finds it.
CLUSTER_INTERFACE = ("start_cluster", "check_cluster_settings")
FAMILIES = tuple(dict.fromkeys(ENGINES.values()))
# Builds of a server another family's adapter runs: MySQL and Percona Server through MariaDB's.
BUILDS = {"mysql": "mariadb"}
OPTIONS_FILE = Path(__file__).with_name("options.yaml")

READY_TIMEOUT_S = 120
STOP_TIMEOUT_S = 120
KILL_WAIT_S = 10
ERROR_LINES = 30
# Servers and their clients get a clean environment: no PG*/MYSQL_* variables
# from the caller, English messages, UTC timestamps.
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "TZ": "UTC"}
SOCKET_PATH_MAX = 107  # sun_path is 108 bytes with the final NUL
ERROR_WORDS = re.compile(r"No space left|ENOSPC|Errno|\[ERROR\]|\bERROR\b|FATAL|PANIC|[Ee]rror|[Ff]ailed")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class ServerExited(RuntimeError):
    """The server stopped by itself before it accepted connections: it refused its options or datadir."""


def family(engine: str) -> ModuleType:
    """The module of the server family that runs engine."""
    if engine not in ENGINES:
        raise ConfigError(f"engine: {engine!r} is not one of {', '.join(ENGINES)}")
    return importlib.import_module(f"{__name__}.{ENGINES[engine]}")


def cluster(engine: str) -> ModuleType:
    """The module that sets up the topologies (replication, clusters) of the family that runs engine."""
    return importlib.import_module(f"{family(engine).__name__}_cluster")


# Why a server option is refused, said after its value (each family's refused() gives one, or its own words):
# `server.options.postgresql.archive_command: 'cp %p /x' runs a command; remove it`.
SET_BY_DBSWEEP = "is set by dbsweep"
RUNS_COMMAND = "runs a command"
LOADS_LIBRARY = "loads a library into the server"
NAMES_PATH = "names a path outside the cell's datadir"


def check_options(family_name: str, options: dict, where: str, installed: bool = False) -> None:
    """Refuse, when the study loads, what the family's config_text would refuse inside the job: names that are
    not whole option names (OPTION_NAME: a name with =, a space, a quote, # or a line break would write
    another setting into the config file), options the family refuses (its refused(name, value): those
    dbsweep sets itself, those that run a command, load a library or name a path outside the cell's datadir),
    values with a line break. - and _, case and MariaDB's loose_ prefix do not make another name. With
    installed (every cell runs Debian's build), also names the installed server does not know (its
    option_names()); loose_ names and names with a dot (an extension's own) pass. Last, the values of the
    settings that shape the dataset (the family's check_dataset)."""
    module = importlib.import_module(f"{__name__}.{family_name}")
    known = module.option_names() if installed and options else None
    for name, value in (options or {}).items():
        if not isinstance(name, str) or not module.OPTION_NAME.fullmatch(name):
            raise ConfigError(f"{where}: {name!r} (set to {value!r}) is not a {family_name} option name "
                              f"({module.OPTION_SPELLING})")
        why = module.refused(name, value)
        if why:
            raise ConfigError(f"{where}.{name}: {value!r} {why}; remove it")
        if line_break(value):
            raise ConfigError(f"{where}.{name}: {value!r} contains a line break")
        if known is not None and not _known(name, known):
            raise ConfigError(f"{where}.{name}: {value!r}: the installed {family_name} server has no option "
                              f"{name!r}")
    module.check_dataset(options or {}, where)


def dataset_options(family_name: str, options: dict) -> dict:
    """The options among a cell's that shape its dataset (the family's DATASET_SETTINGS, in any spelling),
    for the image key: a cell whose option set changes one of them gets an image of its own, prepared by a
    server running with it."""
    shaping = importlib.import_module(f"{__name__}.{family_name}").DATASET_SETTINGS
    return {name: value for name, value in (options or {}).items() if option_key(name) in shaping}


def line_break(value) -> bool:
    """A value that would end its line in a config file, and start another setting there."""
    return isinstance(value, str) and ("\n" in value or "\r" in value)


def _known(name, known: frozenset) -> bool:
    key = str(name).lower().replace("-", "_")
    if key.startswith("loose_") or "." in key:
        return True
    return key in known or any(key.startswith(prefix) and key[len(prefix):] in known
                               for prefix in ("skip_", "enable_", "disable_", "maximum_"))


def option_key(name) -> str:
    """An option's name as the families compare names: lower case, _ for -, without MariaDB's loose_."""
    return str(name).lower().replace("-", "_").removeprefix("loose_")


def families():
    """Every family's module, in FAMILIES order."""
    return [importlib.import_module(f"{__name__}.{name}") for name in FAMILIES]


def foreign_keys(engine: str) -> bool:
    """Whether tables of engine have foreign keys."""
    return family(engine).FOREIGN_KEYS[engine]


def option_sets() -> dict:
    """The built-in option sets: axis -> value -> family -> {option: value}."""
    return yaml.safe_load(OPTIONS_FILE.read_text())


# --- users, folders, commands -------------------------------------------------------------

def as_user(user: str) -> dict:
    """Popen arguments that run a command as user, with that user's groups only (not root's)."""
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid,
            "extra_groups": sorted(set(os.getgrouplist(user, entry.pw_gid)))}


def check_reachable(path: Path, user: str, what: str) -> None:
    """Fail early, saying what to change, when user cannot traverse every folder above path."""
    entry = pwd.getpwnam(user)
    groups = set(os.getgrouplist(user, entry.pw_gid))
    path = Path(os.path.realpath(path))
    for folder in reversed(path.parents):
        st = folder.stat()
        if (st.st_mode & 0o001 or (st.st_uid == entry.pw_uid and st.st_mode & 0o100)
                or (st.st_gid in groups and st.st_mode & 0o010)):
            continue
        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = str(st.st_uid)
        raise RuntimeError(f"{what} {path}: the server runs as {user}, who cannot reach it: {folder} is mode "
                           f"{st.st_mode & 0o7777:04o} owned by {owner}; make it traversable (chmod o+x {folder}) "
                           f"or use a folder outside it")


def check_identifier(kind: str, name: str) -> None:
    if not IDENTIFIER.match(name or ""):
        raise ConfigError(f"{kind}: {name!r} is not a plain SQL name (letters, digits, _; at most 63)")


def chown_tree(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid, follow_symlinks=False)


def prepare_rundir(rundir: Path, user: str) -> Path:
    """The run folder (sockets, pid file, logs, config), owned by the service user."""
    rundir = Path(rundir).absolute()
    rundir.mkdir(parents=True, exist_ok=True)
    entry = pwd.getpwnam(user)
    os.chown(rundir, entry.pw_uid, entry.pw_gid)
    rundir.chmod(0o755)
    check_reachable(rundir / "x", user, "run folder")
    return rundir


def write_config(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o644)


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (0600 from the start), e.g. a sysbench config holding a password."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # in case it existed with wider permissions
    with os.fdopen(fd, "w") as out:
        out.write(text)


def program_env(basedir: Path | None) -> dict:
    """The environment of a server program: ENV, plus LD_LIBRARY_PATH=basedir/lib for a build in basedir
    (a tarball's programs may expect their libraries there; the fetched builds find them by themselves)."""
    if basedir is None or not (Path(basedir) / "lib").is_dir():
        return dict(ENV)
    return ENV | {"LD_LIBRARY_PATH": str(Path(basedir).absolute() / "lib")}


def run_logged(argv: list[str], log, *, user: str | None = None, env: dict | None = None) -> None:
    """Run argv (as user), its output into log; on failure raise with the command's own message."""
    log.write(f"$ {shlex.join(argv)}\n")
    log.flush()
    done = subprocess.run(argv, capture_output=True, text=True, env=env or ENV, cwd="/", stdin=subprocess.DEVNULL,
                          **(as_user(user) if user else {}))
    output = done.stdout + done.stderr
    if output:
        log.write(output if output.endswith("\n") else output + "\n")
    log.flush()
    if done.returncode != 0:  # its error lines, not a help text it printed after them
        lines = output.strip().splitlines()
        said = [line for line in lines if ERROR_WORDS.search(line)] or lines
        tail = "\n".join(said[-ERROR_LINES:])
        raise RuntimeError(f"{Path(argv[0]).name} failed (exit {done.returncode}):\n{tail}")


def run_client(argv: list[str], sql: str, *, user: str | None = None, env: dict | None = None,
               timeout: float | None = None) -> str:
    """Run a SQL client with sql on stdin (never on its command line); its stdout, or raise with its stderr
    (subprocess.TimeoutExpired, the client killed, after timeout seconds when given)."""
    done = subprocess.run(argv, input=sql, capture_output=True, text=True, env=env or ENV, cwd="/", timeout=timeout,
                          **(as_user(user) if user else {}))
    if done.returncode != 0:
        raise RuntimeError(f"{Path(argv[0]).name} failed (exit {done.returncode}): "
                           f"{done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def config_port(config: str) -> int:
    """The port a config text sets (`port=N` in my.cnf, `port = N` in postgresql.conf); the last one wins."""
    ports = re.findall(r"^\s*port\s*=\s*'?(\d+)'?\s*(?:#.*)?$", config, re.M)
    if not ports:
        raise ConfigError("server config: no port = N line")
    return int(ports[-1])


def binary(name: str, *folders: Path | str) -> str:
    """The path of a server program: in folders first, then on PATH or in the sbin folders."""
    for folder in folders:
        if (Path(folder) / name).is_file():
            return str(Path(folder) / name)
    for folder in ENV["PATH"].split(":") + os.environ.get("PATH", "").split(":"):
        if folder and (Path(folder) / name).is_file():
            return str(Path(folder) / name)
    raise RuntimeError(f"{name}: not installed (looked in {', '.join(map(str, folders)) or 'PATH'})")


def sysbench_line(name: str, value) -> str:
    """name=value for sysbench --config-file. Its reader ends a bare value at whitespace, ',' or '#', and
    reads a quoted one up to the same quote; lines are at most 255 characters."""
    text = str(value)
    if "\n" in text or "\r" in text:
        raise ConfigError(f"{name}: a value with a line break cannot go to a sysbench config file")
    if text and not re.search(r"[\s,#'\"]", text):
        line = f"{name}={text}"
    elif "'" not in text:
        line = f"{name}='{text}'"
    elif '"' not in text:
        line = f'{name}="{text}"'
    else:
        raise ConfigError(f"{name}: a value with both quote characters cannot go to a sysbench config file")
    if len(line) > 250:
        raise ConfigError(f"{name}: too long for a sysbench config file line")
    return line


def program_runs(path: Path, env: dict | None = None) -> bool:
    """Whether the program at path starts here (`path --version` exits 0): a tarball's client may need a
    library this system lacks (e.g. MariaDB 10.2's mysql wants libncurses.so.5)."""
    try:
        done = subprocess.run([str(path), "--version"], capture_output=True, env=env or ENV, cwd="/",
                              stdin=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def version_line(argv: list[str], env: dict | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, env=env or ENV, cwd="/", stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} failed (exit {done.returncode}): {done.stderr.strip()}")
    return done.stdout.strip().splitlines()[0].strip()


# --- supervising a server -----------------------------------------------------------------

@dataclass
class Handle:
    """A running server, as server() yields it. Holds no credentials."""

    engine: str
    port: int
    socket: Path
    rundir: Path
    datadir: Path
    pid: int = 0
    ready_seconds: float = 0.0
    basedir: Path | None = None  # the build it runs (None: Debian's packages)
    stopped_by_event: bool = False  # a timed event stopped or killed it: its exit is not a failure


@dataclass
class Conn:
    """How a benchmark user reaches a server. The password never shows in a repr (so not in logs either)."""

    host: str
    port: int
    socket: Path
    user: str
    password: str = field(repr=False)
    database: str


@dataclass
class Launch:
    """How a family starts, recognises and stops its server."""

    name: str  # for messages, e.g. "mariadbd"
    argv: list[str]
    user: str  # the service user the server runs as
    drop_privileges: bool  # True: Popen switches to user; False: the server does it itself (mariadbd --user)
    ready: Callable[[Handle], bool]  # accepts connections on the socket?
    stop_signal: int
    logs: list[Path]  # files the server writes its own messages to, besides its stderr
    error_lines: Callable[[list[str]], list[str]]  # the lines worth showing from what it wrote
    leftovers: list[Path] = field(default_factory=list)  # socket, lock and pid files to remove once it is gone
    env: dict | None = None  # the server's environment; None: ENV
    # the line of what it wrote that says it will never accept connections though it has not exited (a
    # Galera joiner whose state transfer failed may hang in its abort), or None
    doomed: Callable[[list[str]], str | None] = lambda lines: None


def check_socket_path(path: Path) -> None:
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise RuntimeError(f"unix socket {path}: longer than {SOCKET_PATH_MAX} bytes; use a shorter run folder")


def socket_answers(path: Path) -> bool:
    """True when something accepts connections on the unix socket at path."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _read_from(path: Path, offset: int) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def datadir_processes(datadir: Path, user: str, since: float = 0.0) -> dict[int, psutil.Process]:
    """Processes of user working in datadir (servers chdir there, and so do their children), started at or
    after `since` (epoch seconds). This finds a server's children even after the parent died."""
    uid = pwd.getpwnam(user).pw_uid
    target = os.path.realpath(datadir)
    found = {}
    for proc in psutil.process_iter(["uids", "create_time"]):
        try:
            if proc.info["uids"] is None or proc.info["uids"].real != uid or proc.info["create_time"] < since:
                continue
            if os.path.realpath(proc.cwd()) == target and _alive(proc):
                found[proc.pid] = proc
        except (psutil.Error, OSError):
            continue
    return found


def _tree(popen: subprocess.Popen, datadir: Path, user: str, since: float) -> dict[int, psutil.Process]:
    found = {}
    if popen.poll() is None:
        try:
            parent = psutil.Process(popen.pid)
            found[parent.pid] = parent
            found.update({child.pid: child for child in parent.children(recursive=True)})
        except psutil.NoSuchProcess:
            pass
    found.update(datadir_processes(datadir, user, since))
    return found


class Supervisor:
    """One server process: start, wait until ready, stop cleanly or kill the whole tree."""

    def __init__(self, launch: Launch, handle: Handle, log):
        self.launch, self.handle, self.log = launch, handle, log
        self.output = handle.rundir / "server.log"  # the server's stdout and stderr
        self.offsets = {path: _size(path) for path in [self.output, *launch.logs]}
        self.popen: subprocess.Popen | None = None
        self.known: dict[int, psutil.Process] = {}
        self.since = 0.0
        self.started = 0.0
        self.gave_up: str | None = None  # what the server said when it gave up without exiting

    def note(self, text: str) -> None:
        self.log.write(text + "\n")
        self.log.flush()

    def errors(self) -> str:
        """What the server itself said since this start, filtered to its error lines when it has some."""
        lines = []
        for path, offset in self.offsets.items():
            lines += [line for line in _read_from(path, offset) if line.strip()]
        chosen = self.launch.error_lines(lines) or lines
        if not chosen:
            return f"(nothing in {', '.join(str(path) for path in self.offsets)})"
        return "\n".join(chosen[-ERROR_LINES:])

    def start(self) -> None:
        launch = self.launch
        self.note(f"$ {shlex.join(launch.argv)}")
        self.since = time.time() - 1  # create_time has a coarse clock
        self.started = time.monotonic()
        with open(self.output, "ab") as out:
            self.popen = subprocess.Popen(launch.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                          env=launch.env or ENV, cwd="/", start_new_session=True,
                                          **(as_user(launch.user) if launch.drop_privileges else {}))
        self.handle.pid = self.popen.pid

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Poll until the server accepts connections; ready_seconds counts from its start. A server that says it
        gave up (launch.doomed) is not waited for: stop() then kills it at once."""
        started = self.started
        looked = 0.0
        while True:
            code = self.popen.poll()
            if code is not None:
                raise ServerExited(f"{self.launch.name} exited (code {code}) before it accepted connections; "
                                   f"it said:\n{self.errors()}")
            if self.launch.ready(self.handle):
                break
            if time.monotonic() - looked > 0.5:
                looked = time.monotonic()
                self.gave_up = self.launch.doomed([line for path, offset in self.offsets.items()
                                                   for line in _read_from(path, offset)])
                if self.gave_up:
                    raise ServerExited(f"{self.launch.name} gave up before it accepted connections ({self.gave_up}) "
                                       f"and did not exit; it said:\n{self.errors()}")
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"{self.launch.name} did not accept connections on {self.handle.socket} within "
                                   f"{timeout:.0f} s; it said:\n{self.errors()}")
            time.sleep(0.05)
        self.handle.ready_seconds = time.monotonic() - started
        self.known = _tree(self.popen, self.handle.datadir, self.launch.user, self.since)
        self.note(f"{self.launch.name} pid {self.popen.pid} ready after {self.handle.ready_seconds:.2f} s")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> list[psutil.Process]:
        """Clean shutdown, then SIGKILL for whatever of the tree is left; returns processes that survived even that."""
        popen, name = self.popen, self.launch.name
        started = time.monotonic()
        tree = {**self.known, **_tree(popen, self.handle.datadir, self.launch.user, self.since)}
        interrupted = None
        if popen.poll() is None and self.gave_up:
            self.note(f"{name} pid {popen.pid} gave up without exiting; killing its process tree")
        elif popen.poll() is None:
            self.note(f"stopping {name} pid {popen.pid} with {signal.Signals(self.launch.stop_signal).name}")
            try:
                popen.send_signal(self.launch.stop_signal)
                popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.note(f"{name} did not stop within {timeout:.0f} s; killing its process tree")
            except BaseException as error:  # e.g. Ctrl-C while waiting: still leave nothing running
                self.note(f"interrupted while {name} was stopping; killing its process tree")
                interrupted = error
        tree.update(_tree(popen, self.handle.datadir, self.launch.user, self.since))
        rest = [proc for proc in tree.values() if _alive(proc)]
        for proc in rest:
            with suppress(psutil.NoSuchProcess):
                proc.kill()
        if popen.poll() is None:
            with suppress(subprocess.TimeoutExpired):
                popen.wait(KILL_WAIT_S)
        others = [proc for proc in rest if proc.pid != popen.pid]
        psutil.wait_procs(others, timeout=KILL_WAIT_S)
        survivors = [proc for proc in rest if _alive(proc)]
        if rest:
            self.note(f"killed {len(rest)} process(es) of {name}: {sorted(proc.pid for proc in rest)}")
        self.note(f"{name} stopped (exit {popen.returncode}) after {time.monotonic() - started:.2f} s")
        if not survivors:
            for path in self.launch.leftovers:
                path.unlink(missing_ok=True)
        if interrupted is not None:
            raise interrupted
        return survivors


def refuse_if_running(datadir: Path, user: str, socket_path: Path, leftovers: list[Path]) -> None:
    """Refuse to start a second server on a datadir or socket; clear stale files a killed server left."""
    running = datadir_processes(datadir, user)
    if running:
        raise RuntimeError(f"a server is already running on {datadir} (pid {', '.join(map(str, sorted(running)))})")
    if socket_path.exists() and socket_answers(socket_path):
        raise RuntimeError(f"another server answers on {socket_path}")
    for path in leftovers:
        path.unlink(missing_ok=True)


@contextmanager
def supervise(launch: Launch, handle: Handle, log, cgroup: Callable[[int], None] | None = None) -> Iterator[Handle]:
    """Start the server, yield once it accepts connections, and always stop it.

    Raises RuntimeError with the server's own messages when it does not get
    ready, and after the body when the server had exited while the body ran
    (e.g. it was killed), once everything is cleaned up.
    """
    refuse_if_running(handle.datadir, launch.user, handle.socket, launch.leftovers)
    supervisor = Supervisor(launch, handle, log)
    supervisor.start()
    exit_code = None
    try:
        if cgroup is not None:
            cgroup(handle.pid)
        supervisor.wait_ready()
        yield handle
        exit_code = supervisor.popen.poll()
        if exit_code is not None and handle.stopped_by_event:
            supervisor.note(f"{launch.name} had been stopped by a timed event (exit {exit_code})")
            exit_code = None
        elif exit_code is not None:
            supervisor.note(f"{launch.name} had exited (code {exit_code}) before the end of the run")
    finally:
        survivors = supervisor.stop()
    if survivors:
        raise RuntimeError(f"{launch.name}: processes {sorted(proc.pid for proc in survivors)} survived SIGKILL")
    if exit_code is not None:
        raise RuntimeError(f"{launch.name} exited (code {exit_code}) while the run was using it; "
                           f"it said:\n{supervisor.errors()}")
