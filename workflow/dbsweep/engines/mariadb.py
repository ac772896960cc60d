"""MariaDB with InnoDB or MyRocks: datadir, my.cnf, server lifecycle, SQL and counters.

The server reads only the my.cnf written into its run folder (never
/etc/mysql), listens on 127.0.0.1:port and rundir/mysqld.sock, and writes its
error log to rundir/error.log. root reaches it through the socket with
unix_socket authentication; benchmark users connect over TCP with a password
that travels only inside this process (the server stores its hash).
"""
from __future__ import annotations

import hashlib
import re
import signal
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pymysql

from dbsweep.engines import (
    ENV, Conn, Handle, Launch, binary, check_identifier, check_reachable, check_socket_path, chown_tree, config_port,
    prepare_rundir, run_client, run_logged, supervise, sysbench_line, version_line, write_config)
from dbsweep.errors import ConfigError
from dbsweep.units import format_size, parse_size

FAMILY = "mariadb"
SERVICE_USER = "mysql"
ENGINE_NAMES = ("innodb", "myrocks")
CONFIG_NAME = "my.cnf"
SOCKET_NAME = "mysqld.sock"
PID_NAME = "mysqld.pid"
ERROR_LOG = "error.log"

# What `memory` sets, per engine.
MEMORY_OPTION = {"innodb": "innodb_buffer_pool_size", "myrocks": "rocksdb_block_cache_size"}

_COMMON = [
    ("performance_schema", "OFF"),
    ("max_connections", 300),
    ("character-set-server", "utf8mb4"),
    ("collation-server", "utf8mb4_general_ci"),
    ("transaction-isolation", "REPEATABLE-READ"),
    # The binary log stays off (MariaDB's default) unless an option set turns it on.
    # InnoDB durability and IO: crash-safe commits, no double buffering in the page cache.
    ("innodb_flush_log_at_trx_commit", 1),
    ("innodb_doublewrite", "ON"),
    ("innodb_flush_method", "O_DIRECT"),
    ("innodb_file_per_table", "ON"),
    ("innodb_log_buffer_size", "16M"),
    ("innodb_io_capacity", 1000),
    ("innodb_io_capacity_max", 2000),
    # Every start from an image is equally cold: no buffer pool dump and reload.
    ("innodb_buffer_pool_dump_at_shutdown", "OFF"),
    ("innodb_buffer_pool_load_at_startup", "OFF"),
]

BASE = {
    "innodb": _COMMON + [
        ("innodb_buffer_pool_size", "128M"),
        ("innodb_log_file_size", "128M"),
    ],
    "myrocks": _COMMON + [
        # InnoDB only holds a few system tables here.
        ("innodb_buffer_pool_size", "32M"),
        ("innodb_log_file_size", "32M"),
        ("plugin-load-add", "ha_rocksdb.so"),
        ("default-storage-engine", "rocksdb"),
        ("rocksdb_block_cache_size", "128M"),
        ("rocksdb_flush_log_at_trx_commit", 1),
        ("rocksdb_max_background_jobs", 2),
        # LZ4 like the published MyRocks runs; index and filter blocks live in (and count against) the block cache.
        ("rocksdb_default_cf_options",
         "write_buffer_size=32m;target_file_size_base=32m;max_bytes_for_level_base=128m;"
         "compression=kLZ4Compression;block_based_table_factory={cache_index_and_filter_blocks=1;"
         "filter_policy=bloomfilter:10:false;whole_key_filtering=1}"),
    ],
}

# Set by dbsweep from the paths and port it is given; an option set may not move them.
RESERVED = {"datadir", "port", "bind_address", "socket", "pid_file", "log_error", "user", "skip_grant_tables",
            "skip_name_resolve", "defaults_file", "defaults_extra_file", "no_defaults"}
OPTION_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def _mariadbd() -> str:
    return binary("mariadbd", "/usr/sbin")


def server_version() -> str:
    """e.g. "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)"."""
    return version_line([_mariadbd(), "--version"])


def initialize(datadir: Path, log) -> list[list[str]]:
    """An empty datadir at datadir, owned by mysql; root logs in through the socket only, no test database."""
    datadir = Path(datadir).absolute()
    if datadir.exists() and any(datadir.iterdir()):
        raise RuntimeError(f"datadir {datadir}: not empty; initialize needs an empty or new folder")
    datadir.mkdir(parents=True, exist_ok=True)
    check_reachable(datadir, SERVICE_USER, "datadir")
    argv = [binary("mariadb-install-db", "/usr/bin"), "--no-defaults", f"--datadir={datadir}",
            f"--user={SERVICE_USER}", "--auth-root-authentication-method=socket", "--skip-test-db",
            "--skip-name-resolve"]
    run_logged(argv, log)
    chown_tree(datadir, SERVICE_USER)
    return [argv]


def _key(name: str) -> str:
    return name.lower().replace("-", "_")


def _line(name: str, value) -> str:
    if not OPTION_NAME.match(name):
        raise ConfigError(f"server option {name!r}: not an option name")
    if value is True:
        return name  # a flag, e.g. skip-log-bin
    if value is False:
        return f"{name}=OFF"
    text = str(value)
    if "\n" in text or "\r" in text:
        raise ConfigError(f"server option {name}: {value!r} contains a line break")
    text = text.replace("\\", "\\\\")
    if not text or text != text.strip() or "#" in text or text[0] in "'\"":
        text = '"' + text.replace('"', '\\"') + '"'
    return f"{name}={text}"


def config_text(engine: str, memory: str | None, options: dict, datadir: Path, rundir: Path, port: int) -> str:
    """The complete my.cnf: where to listen and log, the engine's base, then memory, then options."""
    if engine not in ENGINE_NAMES:
        raise ConfigError(f"engine: {engine!r} is not a MariaDB engine ({', '.join(ENGINE_NAMES)})")
    settings: dict[str, tuple[str, object]] = {}
    for name, value in BASE[engine]:
        settings[_key(name)] = (name, value)
    if memory is not None:
        try:
            size = format_size(parse_size(memory))
        except ConfigError as error:
            raise ConfigError(f"memory: {error}") from None
        settings[_key(MEMORY_OPTION[engine])] = (MEMORY_OPTION[engine], size)
    for name, value in (options or {}).items():
        name = str(name)
        if _key(name).removeprefix("loose_") in RESERVED:
            raise ConfigError(f"server option {name}: {value!r} is set by dbsweep; remove it")
        settings[_key(name)] = (name, value)
    rundir, datadir = Path(rundir).absolute(), Path(datadir).absolute()
    lines = [f"# dbsweep: MariaDB {engine}, memory {memory or 'base'}; written for one run, no passwords here",
             "[mariadbd]",
             f"datadir={datadir}",
             f"port={int(port)}",
             "bind-address=127.0.0.1",
             f"socket={rundir / SOCKET_NAME}",
             f"pid-file={rundir / PID_NAME}",
             f"log-error={rundir / ERROR_LOG}",
             "skip-name-resolve"]
    lines += [_line(name, value) for name, value in settings.values()]
    return "\n".join(lines) + "\n"


def _pings(handle: Handle) -> bool:
    """root gets an answer on the socket: the server accepts connections.

    (A bare handshake probe would work too, but each one leaves an "Aborted
    connection" warning in the error log.)
    """
    done = subprocess.run([binary("mariadb-admin", "/usr/bin"), "--no-defaults", f"--socket={handle.socket}",
                           "--user=root", "--connect-timeout=2", "ping"],
                          capture_output=True, env=ENV, cwd="/", stdin=subprocess.DEVNULL)
    return done.returncode == 0


def _error_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if "[ERROR]" in line or "Fatal" in line]


@contextmanager
def server(engine: str, datadir: Path, rundir: Path, config: str, log,
           cgroup: Callable[[int], None] | None = None) -> Iterator[Handle]:
    """mariadbd on datadir with config, ready for connections; stopped (SIGTERM, then SIGKILL) on exit."""
    if engine not in ENGINE_NAMES:
        raise ConfigError(f"engine: {engine!r} is not a MariaDB engine ({', '.join(ENGINE_NAMES)})")
    datadir = Path(datadir).absolute()
    if not (datadir / "mysql").is_dir():
        raise RuntimeError(f"datadir {datadir}: not a MariaDB datadir (no mysql/ folder); initialize it first")
    check_reachable(datadir, SERVICE_USER, "datadir")
    rundir = prepare_rundir(rundir, SERVICE_USER)
    sock = rundir / SOCKET_NAME
    check_socket_path(sock)
    handle = Handle(engine=engine, port=config_port(config), socket=sock, rundir=rundir, datadir=datadir)
    write_config(rundir / CONFIG_NAME, config)
    launch = Launch(name="mariadbd",
                    argv=[_mariadbd(), f"--defaults-file={rundir / CONFIG_NAME}", f"--user={SERVICE_USER}"],
                    user=SERVICE_USER, drop_privileges=False, ready=_pings, stop_signal=signal.SIGTERM,
                    logs=[rundir / ERROR_LOG], error_lines=_error_lines,
                    leftovers=[sock, rundir / f"{SOCKET_NAME}.lock", rundir / PID_NAME])
    try:
        with supervise(launch, handle, log, cgroup) as running:
            yield running
    finally:
        _forget(handle.port)


def admin_sql(handle: Handle, sql: str) -> str:
    """Run sql as root over the socket (unix_socket authentication); rows tab-separated, no header."""
    return run_client([binary("mariadb", "/usr/bin"), "--no-defaults", f"--socket={handle.socket}", "--user=root",
                       "--batch", "--skip-column-names"], sql)


def _native_hash(password: str) -> str:
    """What mysql_native_password stores: the server never sees the password itself."""
    return "*" + hashlib.sha1(hashlib.sha1(password.encode()).digest()).hexdigest().upper()


def create_user(handle: Handle, user: str, password: str, database: str) -> None:
    """user@127.0.0.1 and user@localhost with all privileges on database (created if missing)."""
    check_identifier("user", user)
    check_identifier("database", database)
    secret = _native_hash(password)
    sql = [f"CREATE DATABASE IF NOT EXISTS `{database}`;"]
    for host in ("127.0.0.1", "localhost"):
        account = f"'{user}'@'{host}'"
        sql += [f"CREATE USER IF NOT EXISTS {account} IDENTIFIED BY PASSWORD '{secret}';",
                f"ALTER USER {account} IDENTIFIED BY PASSWORD '{secret}';",
                f"GRANT ALL PRIVILEGES ON `{database}`.* TO {account};"]
    admin_sql(handle, "\n".join(sql) + "\n")


def connect(conn: Conn):
    """A PyMySQL connection over TCP, autocommit."""
    return pymysql.connect(host=conn.host, port=conn.port, user=conn.user, password=conn.password,
                           database=conn.database, autocommit=True, connect_timeout=10)


def sysbench_options(conn: Conn, engine: str) -> list[str]:
    """Lines for sysbench --config-file: the driver and the connection (it holds the password: write it
    with engines.write_private, mode 0600).

    sysbench 1.0.20 reads only its own and the drivers' options from that file;
    a Lua script's options there (mysql_storage_engine, tables, ...) are reset
    to the script's defaults, so they go on the command line: sysbench_args().
    """
    return ["db-driver=mysql",
            sysbench_line("mysql-host", conn.host),
            sysbench_line("mysql-port", conn.port),
            sysbench_line("mysql-user", conn.user),
            sysbench_line("mysql-password", conn.password),
            sysbench_line("mysql-db", conn.database)]


def sysbench_args(engine: str) -> list[str]:
    """sysbench command-line options the engine needs (none secret): MyRocks tables need ENGINE=ROCKSDB."""
    return ["--mysql-storage-engine=rocksdb"] if engine == "myrocks" else []


# One cached session per server, user and thread (a sampler thread has its own), so sampling counters
# every second costs a query, not a login.
_sessions: dict[tuple, object] = {}


def _query(conn: Conn, sql: str) -> list[tuple]:
    key = (conn.host, conn.port, conn.user, conn.database, threading.get_ident())
    for attempt in (1, 2):
        session = _sessions.get(key)
        if session is None:
            session = _sessions[key] = connect(conn)
        try:
            with session.cursor() as cursor:
                cursor.execute(sql)
                return list(cursor.fetchall())
        except (pymysql.err.OperationalError, pymysql.err.InterfaceError):
            _sessions.pop(key, None)
            try:
                session.close()
            except pymysql.err.Error:
                pass
            if attempt == 2:
                raise
    return []


def _forget(port: int) -> None:
    """Close the cached sessions of the server on port (it is stopping)."""
    for key in [key for key in list(_sessions) if key[1] == port]:
        session = _sessions.pop(key, None)
        try:
            if session is not None:
                session.close()
        except pymysql.err.Error:  # the server is gone; nothing to close politely
            pass


def variables(conn: Conn) -> list[tuple[str, str]]:
    return [(name, "" if value is None else str(value)) for name, value in _query(conn, "SHOW GLOBAL VARIABLES")]


def version(conn: Conn) -> str:
    return str(_query(conn, "SELECT version()")[0][0])


def counters(conn: Conn) -> dict[str, float]:
    """One sample of SHOW GLOBAL STATUS, numeric values only, names as the server gives them."""
    sample = {}
    for name, value in _query(conn, "SHOW GLOBAL STATUS"):
        try:
            sample[name] = float(value)
        except (TypeError, ValueError):
            continue
    return sample


# Status variables that are levels, not running totals (everything else only grows while the server runs).
_GAUGE = re.compile(
    r"^(acl_|aria_pagecache_blocks_|binlog_snapshot_|delayed_insert_threads$|"
    r"innodb_buffer_pool_(pages_(data|dirty|free|misc|old|total)$|bytes_)|innodb_checkpoint_|"
    r"innodb_data_pending_|innodb_history_list_length$|innodb_ibuf_(free_list|segment_size|size)$|innodb_mem_|"
    r"innodb_page_size$|innodb_row_lock_(current_waits|time_avg|time_max)$|innodb_num_open_files$|"
    r"innodb_available_undo_logs$|innodb_onlineddl_|innodb_encryption_rotation_estimated_iops$|"
    r"innodb_have_|key_blocks_(not_flushed|unused|used|warm)$|last_query_cost$|max_used_connections$|"
    r"memory_used|max_memory_used$|not_flushed_delayed_rows$|open_|prepared_stmt_count$|"
    r"qcache_(free_blocks|free_memory|queries_in_cache|total_blocks)$|rpl_semi_sync_\w*(clients|status|avg_\w*|"
    r"wait_sessions)$|slave_(heartbeat_period|open_temp_tables|running)$|slaves_|ssl_|"
    r"table_open_cache_active_instances$|tc_log_(max_pages_used|page_size)$|threadpool_|"
    r"threads_(cached|connected|running)$|wsrep|"
    r"rocksdb_(memtable_(total|unflushed)|num_iterators|manual_compactions_running|block_cache_usage|"
    r"block_cache_pinned_usage|estimate_\w+|num_running_\w+|cur_size_\w+|size_all_mem_tables|"
    r"actual_delayed_write_rate|is_write_stopped|num_snapshots|oldest_snapshot_time|\w*_pending\w*)$)",
    re.IGNORECASE)


def CUMULATIVE(name: str) -> bool:  # noqa: N802 - the interface's name
    """Whether a status variable is a running total (per-second deltas make sense) or a level."""
    return not _GAUGE.match(name)


def _delta(first: dict, last: dict, name: str) -> float | None:
    lowered = {key.lower(): key for key in last}
    key = lowered.get(name.lower())
    if key is None or key not in first:
        return None
    return last[key] - first[key]


def hit_ratio(engine: str, first: dict, last: dict) -> float | None:
    """Share of page/block requests served from memory between two counters() samples; None without requests."""
    if engine == "innodb":
        reads = _delta(first, last, "Innodb_buffer_pool_reads")
        requests = _delta(first, last, "Innodb_buffer_pool_read_requests")
        if reads is None or not requests:
            return None
        return 1 - reads / requests
    if engine == "myrocks":
        hit = _delta(first, last, "Rocksdb_block_cache_hit")
        miss = _delta(first, last, "Rocksdb_block_cache_miss")
        if hit is None or miss is None or hit + miss <= 0:
            return None
        return hit / (hit + miss)
    raise ConfigError(f"engine: {engine!r} is not a MariaDB engine ({', '.join(ENGINE_NAMES)})")
