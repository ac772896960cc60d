"""PostgreSQL: datadir, postgresql.conf, server lifecycle, SQL and counters.

The server runs as postgres with the postgresql.conf written into its run
folder (-c config_file=...), listens on 127.0.0.1:port and a socket in the run
folder, and logs to stderr, which goes to rundir/server.log. The superuser
postgres logs in through the socket with peer authentication; benchmark users
connect over TCP with SCRAM, and the server is only ever sent the SCRAM
verifier, never the password.

Debian's postgresql-15 runs by default; `basedir` names another build (bin/
with postgres and initdb: one dbsweep.servers fetched, or a user's own). Its
own psql and pg_isready are used when it has them, else Debian's, which talk
to every version from 13 on. Clusters of PostgreSQL 18, whose initdb turns on
data checksums by default, are made without them like every other version's.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import os
import re
import signal
import subprocess
import threading
import time
import unicodedata
from contextlib import contextmanager
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from dbsweep.engines import (
    ENV, LOADS_LIBRARY, NAMES_PATH, RUNS_COMMAND, SET_BY_DBSWEEP, Conn, Handle, Launch, as_user, binary,
    check_identifier, check_reachable, check_socket_path, config_port, line_break, prepare_rundir, program_env,
    run_client, run_logged, supervise, sysbench_line, version_line, write_config, write_private)
from dbsweep.errors import ConfigError
from dbsweep.topology.network import enter_argv
from dbsweep.units import format_size, parse_size

if TYPE_CHECKING:
    import psycopg  # imported where it is used, so that loading the module does not need it

FAMILY = "postgresql"
NAME = "PostgreSQL"
SERVICE_USER = "postgres"
STOP_SIGNAL = signal.SIGINT  # a clean, prompt shutdown
ENGINE_NAMES = ("postgresql",)
DEBIAN_ONLY: dict[str, str] = {}
FOREIGN_KEYS = {"postgresql": True}
SERVER_PROGRAMS = ("postgres",)
VERSION_PARTS = 2  # "postgres (PostgreSQL) 15.18": major and minor
CONFIG_NAME = "postgresql.conf"
PID_NAME = "postgresql.pid"
SERVER_LOG = "server.log"
PG_UNITS = {"": "B", "K": "kB", "M": "MB", "G": "GB", "T": "TB"}
SCRAM_ITERATIONS = 4096

BASE = [
    ("max_connections", 300),
    ("shared_buffers", "128MB"),
    ("huge_pages", False),
    ("work_mem", "4MB"),
    ("maintenance_work_mem", "64MB"),
    ("effective_cache_size", "512MB"),
    # Crash-safe, PostgreSQL's own WAL and checkpoint defaults written out.
    ("fsync", True),
    ("synchronous_commit", True),
    ("full_page_writes", True),
    ("wal_level", "replica"),
    ("wal_compression", False),
    ("max_wal_size", "1GB"),
    ("min_wal_size", "80MB"),
    ("checkpoint_timeout", "5min"),
    ("checkpoint_completion_target", 0.9),
    ("default_transaction_isolation", "read committed"),
    ("autovacuum", True),
    ("track_io_timing", True),  # blk_read_time / blk_write_time in pg_stat_database
    # Messages: English, UTC, one line prefix, checkpoints logged.
    ("log_line_prefix", "%m [%p] "),
    ("log_checkpoints", True),
    ("log_timezone", "UTC"),
    ("timezone", "UTC"),
    ("lc_messages", "C"),
    ("datestyle", "iso, mdy"),
    ("default_text_search_config", "pg_catalog.english"),
]

# Topologies (engines.postgresql_cluster): streaming replication, asynchronous or synchronous. A synchronous
# primary waits for its standby for ever (no fallback to count, no commits unacknowledged), and there is no
# cluster flow control.
REPLICATION = {"postgresql": ("async", "sync")}
SYNC_KINDS, SYNC_STATUS, SYNC_UNACKED, FLOW_PAUSED_NS = (), None, None, None
POSITION_UNIT = "bytes of WAL"  # replication_position: a WAL position (counters)
FIRST_START_ONLY = ()  # node options a node started again (a timed event) goes without: none

# Options a study may not set (compared in lower case), and why: the paths and port dbsweep gives the server,
# and what would read settings from another file, run a command, load a library or write outside the
# cell's datadir. postgres takes whole names only.
REFUSED = {
    **dict.fromkeys(("data_directory", "config_file", "hba_file", "ident_file", "listen_addresses", "port",
                     "unix_socket_directories", "external_pid_file", "logging_collector", "log_destination"),
                    SET_BY_DBSWEEP),
    **dict.fromkeys(("include", "include_if_exists", "include_dir"), "reads settings from another file"),
    **dict.fromkeys(("archive_command", "restore_command", "archive_cleanup_command", "recovery_end_command",
                     "ssl_passphrase_command"), RUNS_COMMAND),
    **dict.fromkeys(("archive_library", "shared_preload_libraries", "session_preload_libraries",
                     "local_preload_libraries", "dynamic_library_path", "jit_provider"), LOADS_LIBRARY),
    **dict.fromkeys(("log_directory", "stats_temp_directory"), NAMES_PATH),
}
# Settings fixed when the cluster is made, which postgresql.conf cannot change (the server reports them as
# read-only parameters of these names): a study sets them as server options, and initdb gets them (INITDB);
# config_text leaves them out. They shape the dataset: the image key holds a cell's values of them
# (engines.dataset_options), so two values make two images.
INITDB = {"data_checksums": "--data-checksums", "wal_segment_size": "--wal-segsize", "server_encoding": "--encoding",
          "lc_collate": "--lc-collate", "lc_ctype": "--lc-ctype"}
DATASET_SETTINGS = tuple(INITDB)
LOCALE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]*")  # C, POSIX, en_US.UTF-8, de_DE@euro, LATIN1
TRUE, FALSE = ("on", "true", "yes", "1"), ("off", "false", "no", "0")
# A parameter's name; a dot: an extension's own (pg_stat_statements.max).
OPTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
OPTION_SPELLING = "a letter or _, then letters, digits, _ and ."


def bindir(basedir: Path | None = None) -> Path:
    """basedir/bin, or the newest installed server, e.g. /usr/lib/postgresql/15/bin (Debian's layout)."""
    if basedir is not None:
        folder = Path(basedir).absolute() / "bin"
        if not (folder / "postgres").is_file():
            raise ConfigError(f"version.basedir: {str(basedir)!r} has no server binary (bin/postgres)")
        return folder
    found = sorted((p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "postgres").is_file()),
                   key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if found:
        return found[-1]
    return Path(binary("postgres")).parent


@functools.cache
def option_names() -> frozenset[str] | None:
    """Every parameter Debian's newest postgres takes (`postgres --describe-config`), lower case; None when
    it cannot tell. For the check of a study's options at load."""
    try:
        done = subprocess.run([str(bindir() / "postgres"), "--describe-config"], capture_output=True, text=True,
                              env=ENV, cwd="/", stdin=subprocess.DEVNULL, timeout=60)
    except (OSError, RuntimeError, subprocess.TimeoutExpired):
        return None
    names = [line.split("\t", 1)[0].lower() for line in done.stdout.splitlines() if "\t" in line]
    # --describe-config leaves out read-only parameters; those initdb sets are options here (INITDB)
    return frozenset(names) | frozenset(INITDB) if done.returncode == 0 and names else None


def _client(name: str, basedir: Path | None) -> str:
    """A client program (psql, pg_isready): the build's own when it has one, else Debian's."""
    if basedir is not None and (bindir(basedir) / name).is_file():
        return str(bindir(basedir) / name)
    return str(bindir() / name)


def _env(program: str, basedir: Path | None) -> dict:
    return program_env(basedir) if basedir is not None and program.startswith(str(bindir(basedir))) else dict(ENV)


def client(name: str, basedir: Path | None) -> tuple[str, dict]:
    """A client program (psql, pgbench): the build's own when it has it, else Debian's; its environment."""
    program = _client(name, basedir)
    return program, _env(program, basedir)


@contextmanager
def client_env(conn: Conn, rundir: Path) -> Iterator[dict]:
    """The environment of a client program (psql, pgbench) reaching the benchmark database as its user: PGHOST,
    PGPORT, PGUSER, PGDATABASE, and the password in a 0600 password file (PGPASSFILE), removed afterwards."""
    passfile = Path(rundir) / f"client-{os.getpid()}-{threading.get_ident()}.pgpass"
    write_private(passfile, ":".join(str(v).replace("\\", "\\\\").replace(":", "\\:") for v in
                                     (conn.host, conn.port, conn.database, conn.user, conn.password)) + "\n")
    try:
        yield {"PGHOST": conn.host, "PGPORT": str(conn.port), "PGUSER": conn.user, "PGDATABASE": conn.database,
               "PGPASSFILE": str(passfile)}
    finally:
        passfile.unlink(missing_ok=True)


def server_binary(basedir: Path | None = None) -> Path:
    return bindir(basedir) / "postgres"


def build_family(basedir: Path) -> str | None:
    """"postgresql" for a build in basedir, None if not one."""
    return FAMILY if (Path(basedir) / "bin" / "postgres").is_file() else None


def supports(engine: str, basedir: Path | None = None) -> bool:
    """Every PostgreSQL build runs the postgresql engine."""
    if engine not in ENGINE_NAMES:
        raise ConfigError(f"engine: {engine!r} is not a PostgreSQL engine")
    return True


def server_version(basedir: Path | None = None) -> str:
    """e.g. "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"."""
    return version_line([str(bindir(basedir) / "postgres"), "--version"], program_env(basedir))


def major(basedir: Path | None = None) -> int:
    """The build's major version, e.g. 16."""
    match = re.search(r"\(PostgreSQL\)\s+(\d+)", server_version(basedir))
    if not match:
        raise RuntimeError(f"cannot tell the major version from {server_version(basedir)!r}")
    return int(match.group(1))


def initialize(datadir: Path, log, basedir: Path | None = None, options: dict | None = None) -> list[list[str]]:
    """An empty cluster at datadir, owned by postgres: peer login on the socket, SCRAM over TCP; UTF8, locale
    C and no data checksums unless options (the cell's server options) set them (INITDB)."""
    check_dataset(options, "server options")
    datadir = Path(datadir).absolute()
    if datadir.exists() and any(datadir.iterdir()):
        raise RuntimeError(f"datadir {datadir}: not empty; initialize needs an empty or new folder")
    if basedir is not None:
        check_reachable(bindir(basedir) / "initdb", SERVICE_USER, "basedir")
    datadir.mkdir(parents=True, exist_ok=True)
    check_reachable(datadir, SERVICE_USER, "datadir")
    ids = as_user(SERVICE_USER)
    os.chown(datadir, ids["user"], ids["group"])
    datadir.chmod(0o700)
    argv = [str(bindir(basedir) / "initdb"), "-D", str(datadir), "--auth-local=peer", "--auth-host=scram-sha-256",
            "-U", "postgres", "--encoding=UTF8", "--locale=C"]
    fixed = initdb_args(options)
    if basedir is not None and major(basedir) >= 18 and "--data-checksums" not in fixed:
        argv.append("--no-data-checksums")  # 18 turns them on by default, as no earlier version does
    run_logged(argv + fixed, log, user=SERVICE_USER, env=program_env(basedir))
    return [argv + fixed]


def initdb_args(options: dict | None) -> list[str]:
    """initdb's arguments for the INITDB settings among options (checked by check_dataset); later ones
    override the defaults initialize gives (--encoding=UTF8 --locale=C)."""
    args = []
    for name, value in (options or {}).items():
        key = str(name).lower()
        if key == "data_checksums":
            args += ["--data-checksums"] if _flag(value) else []
        elif key == "wal_segment_size":
            args.append(f"--wal-segsize={parse_size(_bytes_text(value)) >> 20}")
        elif key in INITDB:
            args.append(f"{INITDB[key]}={value}")
    return args


def _flag(value) -> bool | None:
    """A boolean setting's value as PostgreSQL reads one (on/off, true/false, yes/no, 1/0), None if not one."""
    text = str(value).lower() if not isinstance(value, bool) else ("on" if value else "off")
    return True if text in TRUE else False if text in FALSE else None


def _bytes_text(value) -> str:
    """A size as PostgreSQL writes it (16MB, 1GB) or as dbsweep does (16M), for units.parse_size."""
    text = str(value).strip().upper()
    return text[:-1] if text.endswith("B") and len(text) > 1 and text[-2] in "KMGT" else text


def check_dataset(options: dict | None, where: str) -> None:
    """Refuse, at load, a value of a setting initdb takes (INITDB) that it would refuse only in prepare:
    data_checksums a boolean; wal_segment_size a power of two from 1MB to 1GB; server_encoding, lc_collate,
    lc_ctype a plain name (C, en_US.UTF-8, LATIN1)."""
    for name, value in (options or {}).items():
        key = str(name).lower()
        if key == "data_checksums" and _flag(value) is None:
            raise ConfigError(f"{where}.{name}: {value!r} is not on or off")
        if key == "wal_segment_size":
            try:
                size = parse_size(_bytes_text(value))
            except ConfigError:
                size = 0
            if not (1 << 20 <= size <= 1 << 30 and size & (size - 1) == 0):
                raise ConfigError(f"{where}.{name}: {value!r} is not a power of two from 1MB to 1GB")
        if key in ("server_encoding", "lc_collate", "lc_ctype") and not LOCALE_NAME.fullmatch(str(value)):
            raise ConfigError(f"{where}.{name}: {value!r} is not a locale or encoding name")


def refused(name: str, value) -> str | None:
    """Why a study may not set the parameter name (REFUSED), or None."""
    return REFUSED.get(str(name).lower())


def _value(name: str, value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    if line_break(text):
        raise ConfigError(f"server option {name}: {value!r} contains a line break")
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def config_text(engine: str, memory: str | None, options: dict, datadir: Path, rundir: Path, port: int,
                basedir: Path | None = None, listen: str = "127.0.0.1", node_options: dict | None = None) -> str:
    """The complete postgresql.conf: where to listen (listen: a topology node's address) and log, the base,
    then memory, then options, then node_options: what dbsweep sets for a node of a topology (replication),
    which the user's options cannot change; its hba_file, when given, replaces the datadir's pg_hba.conf
    (a topology node's own logins, see postgresql_cluster). The same for every version from 13 on (basedir only has to
    hold a server)."""
    if engine not in ENGINE_NAMES:
        raise ConfigError(f"engine: {engine!r} is not a PostgreSQL engine")
    if basedir is not None:
        bindir(basedir)
    settings: dict[str, tuple[str, object]] = {name: (name, value) for name, value in BASE}
    if memory is not None:
        try:
            size = parse_size(memory)
        except ConfigError as error:
            raise ConfigError(f"memory: {error}") from None
        settings["shared_buffers"] = ("shared_buffers", format_size(size, PG_UNITS))
    for name, value in (options or {}).items():
        name = str(name)
        if not OPTION_NAME.fullmatch(name):
            raise ConfigError(f"server option {name!r}: not an option name")
        why = refused(name, value)
        if why:
            raise ConfigError(f"server option {name}: {value!r} {why}; remove it")
        if name.lower() not in INITDB:  # fixed in the datadir by initdb (initialize), read-only here
            settings[name.lower()] = (name, value)
    datadir, rundir = Path(datadir).absolute(), Path(rundir).absolute()
    hba = datadir / "pg_hba.conf"
    for name, value in (node_options or {}).items():
        if str(name).lower() == "hba_file":  # a topology node's own (engines.postgresql_cluster.write_hba)
            hba = Path(value)
            continue
        settings[str(name).lower()] = (str(name), value)
    lines = [f"# dbsweep: PostgreSQL, memory {memory or 'base'}; written for one run, no passwords here",
             f"data_directory = {_value('data_directory', datadir)}",
             f"hba_file = {_value('hba_file', hba)}",
             f"ident_file = {_value('ident_file', datadir / 'pg_ident.conf')}",
             f"listen_addresses = {_value('listen_addresses', listen)}",
             f"port = {int(port)}",
             f"unix_socket_directories = {_value('unix_socket_directories', rundir)}",
             f"external_pid_file = {_value('external_pid_file', rundir / PID_NAME)}",
             "logging_collector = off",
             "log_destination = 'stderr'"]
    lines += [f"{name} = {_value(name, value)}" for name, value in settings.values()]
    return "\n".join(lines) + "\n"


def _socket_path(rundir: Path, port: int) -> Path:
    return rundir / f".s.PGSQL.{port}"


def _accepts(handle: Handle) -> bool:
    """pg_isready, as postgres (peer login, so no failed-login lines in the log): 0 = accepting connections."""
    program = _client("pg_isready", handle.basedir)
    done = subprocess.run([program, "-q", "-h", str(handle.rundir), "-p", str(handle.port),
                           "-U", "postgres", "-d", "postgres", "-t", "2"],
                          capture_output=True, env=_env(program, handle.basedir), cwd="/", stdin=subprocess.DEVNULL,
                          **as_user(SERVICE_USER))
    return done.returncode == 0


_ERROR = re.compile(r"\b(FATAL|PANIC|ERROR|DETAIL|HINT):|unrecognized|invalid|could not|outside the valid range|"
                    r"contains errors")


def _error_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if _ERROR.search(line)]


@contextmanager
def server(engine: str, datadir: Path, rundir: Path, config: str, log,
           cgroup: Callable[[int], None] | None = None, basedir: Path | None = None,
           netns: str | None = None) -> Iterator[Handle]:
    """postgres on datadir with config, ready for connections; stopped (SIGINT = fast, then SIGKILL) on exit.
    netns: the network namespace it runs in (a topology node's), else the host's."""
    if engine not in ENGINE_NAMES:
        raise ConfigError(f"engine: {engine!r} is not a PostgreSQL engine")
    if basedir is not None:
        basedir = Path(basedir).absolute()
        check_reachable(bindir(basedir) / "postgres", SERVICE_USER, "basedir")
    datadir = Path(datadir).absolute()
    if not (datadir / "PG_VERSION").is_file():
        raise RuntimeError(f"datadir {datadir}: not a PostgreSQL datadir (no PG_VERSION); initialize it first")
    check_reachable(datadir, SERVICE_USER, "datadir")
    rundir = prepare_rundir(rundir, SERVICE_USER)
    port = config_port(config)
    sock = _socket_path(rundir, port)
    check_socket_path(sock)
    handle = Handle(engine=engine, port=port, socket=sock, rundir=rundir, datadir=datadir, basedir=basedir)
    write_config(rundir / CONFIG_NAME, config)
    launch = Launch(name="postgres",
                    argv=[*enter_argv(netns, SERVICE_USER), str(bindir(basedir) / "postgres"), "-D", str(datadir),
                          "-c", f"config_file={rundir / CONFIG_NAME}"],
                    user=SERVICE_USER, drop_privileges=netns is None, ready=_accepts, stop_signal=STOP_SIGNAL,
                    logs=[], error_lines=_error_lines,
                    leftovers=[sock, Path(f"{sock}.lock"), rundir / PID_NAME, datadir / "postmaster.pid"],
                    env=None if basedir is None else program_env(basedir))
    try:
        with supervise(launch, handle, log, cgroup) as running:
            yield running
    finally:
        _forget(port)


def admin_sql(handle: Handle, sql: str, database: str | None = None) -> str:
    """Run sql as postgres over the socket (peer login), in database (default postgres); rows tab-separated,
    no header. psql is the build's own when it has one, else Debian's."""
    program = _client("psql", handle.basedir)
    if database is not None:
        check_identifier("database", database)
    return run_client([program, "-h", str(handle.rundir), "-p", str(handle.port), "-U", "postgres",
                       "-d", database or "postgres", "-v", "ON_ERROR_STOP=1", "-X", "-q", "-A", "-t", "-F", "\t"],
                      sql, user=SERVICE_USER, env=_env(program, handle.basedir))


def analyze(handle: Handle, database: str) -> list[str]:
    """The optimizer's statistics and the visibility map of every table in database, as a loaded database
    has them once autovacuum has come by (and as `pgbench -i` leaves them): VACUUM ANALYZE, as postgres.
    A server that shuts down right after its load has neither; its planner then guesses (sysbench's range
    queries run as bitmap heap scans instead of index scans), and the first reads set hint bits (writes)
    inside the measured window. Returns the statement as its command line, for the record."""
    admin_sql(handle, "VACUUM ANALYZE", database=database)
    return ["psql", f"--dbname={database}", "--command=VACUUM ANALYZE"]


def user_sql(handle: Handle, conn: Conn, sql: str) -> str:
    """Run sql (e.g. a study's setup file) with psql, as the benchmark user in its database, stopping at the
    first error; the password goes through a 0600 password file that is removed afterwards. Raises with
    the server's error ("psql:<stdin>:3: ERROR:  ...")."""
    program, env = client("psql", handle.basedir)
    with client_env(conn, handle.rundir) as connection:
        return run_client([program, "-w", "-v", "ON_ERROR_STOP=1", "-X", "-q"], sql, env=env | connection)


def set_session(cursor, name: str, value) -> None:
    """A session setting of a client session (a name checked by the caller, the value as a parameter)."""
    cursor.execute("SELECT set_config(%s, %s, false)", (name, str(value)))


def session_value(cursor, name: str) -> str:
    """A session setting as the session reports it, in its own unit (current_setting: "64MB", "off")."""
    cursor.execute("SELECT current_setting(%s)", (name,))
    return str(cursor.fetchone()[0])


def flush_statistics(session) -> None:
    """PostgreSQL reports a backend's statistics when it goes idle, at most once a second unless asked."""
    with session.cursor() as cursor:
        if session.info.server_version >= 150000:
            cursor.execute("SELECT pg_stat_force_next_flush()")
        else:
            time.sleep(0.6)  # PGSTAT_STAT_INTERVAL is 500 ms before 15


PLAN = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)"  # runs the statement and says what each node did
PLAN_NOT_RUN = "EXPLAIN (FORMAT JSON)"  # the plan alone, the statement not run


def explain(session, sql: str) -> tuple[str, str]:
    """The plan the server chooses for sql in session (with its settings): (the statement used, the server's
    JSON text, as it sent it: psycopg would parse a json column). ANALYZE runs sql, so it runs in a read-only
    transaction that is rolled back; where the server refuses it there (a statement that writes), the plan
    comes from EXPLAIN, which does not run the statement."""
    import psycopg

    with session.cursor() as cursor:
        try:
            cursor.execute("BEGIN READ ONLY")
            cursor.execute(f"{PLAN} {sql}")
            return PLAN, cursor.pgresult.get_value(0, 0).decode()
        except psycopg.Error:
            pass
        finally:
            cursor.execute("ROLLBACK")
        cursor.execute(f"{PLAN_NOT_RUN} {sql}")
        return PLAN_NOT_RUN, cursor.pgresult.get_value(0, 0).decode()


def table_counters(conn: Conn) -> dict[str, float]:
    return statio(conn)


def statio(conn: Conn) -> dict[str, float]:
    """Blocks read and hit in the user tables of conn's database, their indexes and TOAST
    (pg_statio_user_tables, summed), as "statio.<column>"."""
    columns = ["heap_blks_read", "heap_blks_hit", "idx_blks_read", "idx_blks_hit", "toast_blks_read",
               "toast_blks_hit", "tidx_blks_read", "tidx_blks_hit"]
    row = _query(conn, "SELECT " + ", ".join(f"coalesce(sum({c}), 0)::float8" for c in columns)
                 + " FROM pg_statio_user_tables")[0]
    return {f"statio.{c}": float(v) for c, v in zip(columns, row, strict=False)}


def _scram_verifier(password: str) -> str:
    """What PostgreSQL stores for SCRAM-SHA-256 (RFC 5802/7677), computed here so the server never sees the
    password. NFKC stands in for SASLprep, which leaves ASCII passwords unchanged."""
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", unicodedata.normalize("NFKC", password).encode(), salt, SCRAM_ITERATIONS)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    return f"SCRAM-SHA-256${SCRAM_ITERATIONS}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def create_user(handle: Handle, user: str, password: str, database: str) -> None:
    """A login role owning database (created if missing); its password set as a SCRAM verifier."""
    check_identifier("user", user)
    check_identifier("database", database)
    if user == "postgres":
        raise ConfigError("user: 'postgres' is the superuser; choose another name")
    sql = "\n".join([
        f"SELECT 'CREATE ROLE \"{user}\" LOGIN' "
        f"WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{user}') \\gexec",
        f"ALTER ROLE \"{user}\" LOGIN PASSWORD '{_scram_verifier(password)}';",
        f"SELECT 'CREATE DATABASE \"{database}\" OWNER \"{user}\"' "
        f"WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '{database}') \\gexec",
        f"ALTER DATABASE \"{database}\" OWNER TO \"{user}\";",
    ]) + "\n"
    admin_sql(handle, sql)


def connect(conn: Conn):
    """A psycopg connection over TCP (over the socket when conn.host is None), autocommit. psycopg is imported
    here, not with the module: its 80 ms would be every Snakemake start's and every job's, PostgreSQL or not."""
    import psycopg

    host = conn.host if conn.host is not None else str(Path(conn.socket).parent)
    return psycopg.connect(host=host, port=conn.port, user=conn.user, password=conn.password,
                           dbname=conn.database, autocommit=True, connect_timeout=10)


def sysbench_options(conn: Conn, engine: str) -> list[str]:
    """Lines for sysbench --config-file: the driver and the connection (it holds the password: write it
    with engines.write_private, mode 0600).

    sysbench 1.0.20 reads only its own and the drivers' options from that file
    (a Lua script's options there are reset to their defaults); see sysbench_args().
    """
    return ["db-driver=pgsql",
            sysbench_line("pgsql-host", conn.host),
            sysbench_line("pgsql-port", conn.port),
            sysbench_line("pgsql-user", conn.user),
            sysbench_line("pgsql-password", conn.password),
            sysbench_line("pgsql-db", conn.database)]


def sysbench_args(engine: str) -> list[str]:
    """sysbench command-line options the engine needs: none for PostgreSQL."""
    return []


# One cached session per server, user and thread (a sampler thread has its own), so sampling counters
# every second costs a query, not a login.
_sessions: dict[tuple, psycopg.Connection] = {}


def _query(conn: Conn, sql: str) -> list[tuple]:
    import psycopg

    key = (conn.host, conn.port, str(conn.socket), conn.user, conn.database, threading.get_ident())
    for attempt in (1, 2):
        session = _sessions.get(key)
        if session is None or session.closed:
            session = _sessions[key] = connect(conn)
        try:
            return session.execute(sql).fetchall()
        except psycopg.OperationalError:
            _sessions.pop(key, None)
            session.close()
            if attempt == 2:
                raise
    return []


def _forget(port: int) -> None:
    """Close the cached sessions of the server on port (it is stopping)."""
    for key in [key for key in list(_versions) if key[1] == port]:
        _versions.pop(key, None)
    for key in [key for key in list(_sessions) if key[1] == port]:
        session = _sessions.pop(key, None)
        if session is not None:
            session.close()


def variables(conn: Conn) -> list[tuple[str, ...]]:
    """pg_settings' name, setting and unit (8kB, ms, …: delivered.py compares sizes and times through it)."""
    return [(name, "" if value is None else str(value), unit or "")
            for name, value, unit in _query(conn, "SELECT name, setting, unit FROM pg_settings ORDER BY name")]


def version(conn: Conn) -> str:
    return str(_query(conn, "SELECT version()")[0][0])


# The dataset as the server's catalog reports it, in two queries: the database's encoding and locale and
# the cluster's settings fixed by initdb, then each user table's estimated rows (reltuples; -1: never
# vacuumed or analyzed) and indexes.
DATABASE_FACTS = ("SELECT pg_encoding_to_char(encoding), datcollate, datctype, current_setting('data_checksums'), "
                  "current_setting('wal_segment_size') FROM pg_database WHERE datname = current_database()")
TABLE_FACTS = ("SELECT CASE WHEN n.nspname = 'public' THEN c.relname ELSE n.nspname || '.' || c.relname END, "
               "c.reltuples::bigint, (SELECT count(*) FROM pg_index i WHERE i.indrelid = c.oid) "
               "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p') "
               "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%' "
               "ORDER BY 1")


def dataset_facts(conn: Conn) -> dict[str, str]:
    """What the benchmark database holds, as the server's catalog reports it, flat: database.encoding,
    database.collate, database.ctype, data_checksums, wal_segment_size, and per user table (outside public:
    schema.table) table.<name>.rows (the estimate) and table.<name>.indexes. For comparing what ran with what
    was declared (the settings initdb fixed, DATASET_SETTINGS)."""
    facts = {}
    for encoding, collate, ctype, checksums, segment in _query(conn, DATABASE_FACTS):
        facts |= {"database.encoding": str(encoding), "database.collate": str(collate),
                  "database.ctype": str(ctype), "data_checksums": str(checksums), "wal_segment_size": str(segment)}
    for name, rows, indexes in _query(conn, TABLE_FACTS):
        facts |= {f"table.{name}.rows": str(rows), f"table.{name}.indexes": str(indexes)}
    return facts


def engine_status(handle: Handle, engine: str) -> None:
    """PostgreSQL has no status text of its own like MariaDB's SHOW ENGINE INNODB STATUS: what it could
    give (pg_stat_bgwriter, pg_stat_database) is already sampled every second (counters)."""
    return None


# The user tables' maintenance, summed: (auto)vacuums and (auto)analyzes so far, and dead rows now. An
# autovacuum inside a window (its count moving) is the server's own work, measured with the rest: a
# restored image without statistics had both its tables vacuumed and analyzed 40-50 s into a run.
USER_TABLES = ("(SELECT " + ", ".join(f"sum({c})::float8 AS {c}" for c in (
    "vacuum_count", "autovacuum_count", "analyze_count", "autoanalyze_count", "n_dead_tup"))
    + " FROM pg_stat_user_tables) t")
# The statistics views counters() reads, with the server version (server_version_num) that has them.
STAT_VIEWS = [("db.", "pg_stat_database d", 0), ("bgwriter.", "pg_stat_bgwriter b", 0),
              ("wal.", "pg_stat_wal w", 140000), ("checkpointer.", "pg_stat_checkpointer c", 170000),
              ("tables.", USER_TABLES, 0)]
_versions: dict[tuple, int] = {}  # (host, port) -> server_version_num


def counters_sql(version_num: int) -> tuple[list[str], str]:
    """The prefixes and the one query of counters() for a server version, e.g. 150000 for 15.0. After the
    views' rows: the WAL position in bytes (replayed on a standby, written elsewhere), whether the server is a
    standby, its replay delay, and one JSON row per standby streaming from it (pg_stat_replication)."""
    views = [(prefix, view) for prefix, view, since in STAT_VIEWS if version_num >= since]
    columns = ", ".join(f"row_to_json({view.split()[-1]})" for _, view in views)
    sql = (f"SELECT {columns}, pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
           f"ELSE pg_current_wal_lsn() END, '0/0')::float8,\n"
           f"  pg_is_in_recovery(),\n"
           f"  CASE WHEN pg_last_wal_receive_lsn() IS NULL THEN NULL\n"
           f"       WHEN pg_last_wal_receive_lsn() > pg_last_wal_replay_lsn()\n"
           f"       THEN extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 ELSE 0 END,\n"
           f"  (SELECT json_agg(json_build_object('name', application_name, 'streaming', state = 'streaming',\n"
           f"     'sync', sync_state IN ('sync', 'quorum'), 'write_lag_s', extract(epoch FROM write_lag),\n"
           f"     'flush_lag_s', extract(epoch FROM flush_lag), 'replay_lag_s', extract(epoch FROM replay_lag),\n"
           f"     'sent_replay_bytes', pg_wal_lsn_diff(sent_lsn, replay_lsn))) FROM pg_stat_replication)\n"
           f"FROM {', '.join(view for _, view in views)}\nWHERE d.datname = current_database()")
    return [prefix for prefix, _ in views], sql


def counters(conn: Conn) -> dict[str, float]:
    """One sample in one query: pg_stat_database of conn's database ("db."), pg_stat_bgwriter ("bgwriter."),
    pg_stat_wal ("wal.", from 14), pg_stat_checkpointer ("checkpointer.", from 17), pg_stat_user_tables'
    maintenance summed ("tables.": vacuum_count, autovacuum_count, analyze_count, autoanalyze_count, and
    n_dead_tup, a level), and replication:

    - wal_lsn_bytes: the WAL position in bytes this server wrote (not on a standby, which writes none);
    - replication_position: the WAL position in bytes, the replayed one on a standby (pg_last_wal_replay_lsn),
      else the written one (= wal_lsn_bytes); equal on a primary and a caught-up standby;
    - replication_lag_s (standby only): now() - pg_last_xact_replay_timestamp() while it has received WAL it
      has not replayed yet, else 0 (caught up with what it received: a standby cut off from its primary
      reads 0; the primary's <standby>.replay_lag_s sees that). Missing before it received any WAL;
    - per standby streaming from this server (pg_stat_replication; the benchmark user needs
      pg_read_all_stats to see it, which start_cluster grants), keyed by its application_name:
      <name>.write_lag_s, .flush_lag_s, .replay_lag_s (PostgreSQL's lag columns in seconds; NULL, i.e. no
      recent measurement, reads 0 when the standby has replayed all it was sent, else is left out),
      <name>.sent_replay_bytes (sent but not replayed yet), <name>.streaming and <name>.sync (1/0: state
      streaming; sync_state sync or quorum)."""
    key = (conn.host, conn.port)
    if key not in _versions:
        _versions[key] = int(_query(conn, "SHOW server_version_num")[0][0])
    prefixes, sql = counters_sql(_versions[key])
    *rows, lsn, standby, lag, senders = _query(conn, sql)[0]
    sample = {}
    for prefix, row in zip(prefixes, rows, strict=False):
        for name, value in row.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and name != "datid":
                sample[prefix + name] = float(value)
    if not standby:
        sample["wal_lsn_bytes"] = float(lsn)
    sample["replication_position"] = float(lsn)
    if standby and lag is not None:
        sample["replication_lag_s"] = max(0.0, float(lag))
    for sender in senders or []:
        sample.update(_sender(sender))
    return sample


def _sender(row: dict) -> dict[str, float]:
    """The counters of one pg_stat_replication row (see counters)."""
    name = row.get("name")
    if not name:
        return {}
    behind = row.get("sent_replay_bytes")
    out = {f"{name}.streaming": float(bool(row.get("streaming"))), f"{name}.sync": float(bool(row.get("sync")))}
    if behind is not None:
        out[f"{name}.sent_replay_bytes"] = float(behind)
    for lag in ("write_lag_s", "flush_lag_s", "replay_lag_s"):
        if row.get(lag) is not None:
            out[f"{name}.{lag}"] = float(row[lag])
        elif behind is not None and float(behind) == 0:
            out[f"{name}.{lag}"] = 0.0
    return out


_GAUGE = {"db.numbackends", "replication_lag_s", "tables.n_dead_tup"}
# Per standby, "<application_name>.<suffix>" (no statistics view's column ends so).
_GAUGE_SUFFIXES = (".write_lag_s", ".flush_lag_s", ".replay_lag_s", ".sent_replay_bytes", ".streaming", ".sync")


def CUMULATIVE(name: str) -> bool:  # noqa: N802 - the interface's name
    """Whether a counter is a running total (per-second deltas make sense) or a level. Levels: backends, dead
    rows, the replication lags and bytes behind, streaming and sync flags; replication_position and wal_lsn_bytes grow
    (their deltas are WAL bytes per second)."""
    return name not in _GAUGE and not name.endswith(_GAUGE_SUFFIXES)


def hit_ratio(engine: str, first: dict, last: dict) -> float | None:
    """Share of block requests served from shared buffers between two counters() samples; None without any."""
    if engine not in ENGINE_NAMES:
        raise ConfigError(f"engine: {engine!r} is not a PostgreSQL engine")
    try:
        hit = last["db.blks_hit"] - first["db.blks_hit"]
        read = last["db.blks_read"] - first["db.blks_read"]
    except KeyError:
        return None
    if hit + read <= 0:
        return None
    return hit / (hit + read)


# The counters the query workload reports per execution (a regular expression, case-insensitive): the user
# tables' block reads and hits, and the database's blocks, tuples and temporary bytes.
QUERY_COUNTERS = r"statio\.\w+|db\.(blks_read|blks_hit|tup_returned|tup_fetched|temp_bytes)"


def logs_written(engine: str, first: dict, last: dict) -> dict[str, float | None]:
    """WAL bytes written between two counters() samples: the advance of the written WAL position, read at
    each sample's instant; no binary log. Not pg_stat_wal's wal_bytes: from 15 each backend adds its
    share when it next reports its statistics, at most once a second, so over a short window it lags (in
    tests/fixtures/pgbench_counters it stood still for a second while the position moved 43 KB; over 2 s
    of sysbench it gave PostgreSQL 0.097 KB per read-write transaction). wal_bytes only where the position
    is missing at either end (a standby, or one promoted inside the window)."""
    if engine not in ENGINE_NAMES:
        raise ConfigError(f"engine: {engine!r} is not a PostgreSQL engine")
    name = "wal_lsn_bytes" if "wal_lsn_bytes" in first and "wal_lsn_bytes" in last else "wal.wal_bytes"
    wal = last[name] - first[name] if name in first and name in last else None
    return {"log": wal, "binlog": None}


def check_replication(engine: str, kind: str | None, basedir: Path | None = None) -> None:
    """Every PostgreSQL build dbsweep runs streams WAL (REPLICATION): nothing more to refuse for a build."""
