"""ProxySQL from the user's own binary (settings `path`): no package registry reachable here has it.

ProxySQL speaks the MySQL protocol to the client and logs in to the nodes itself, so it must know the
benchmark user's password: the whole proxysql.cnf (servers, the benchmark user, a fresh admin password) is
written mode 0600, owned by the user ProxySQL runs as, and never shows on a command line or in a log.
It runs in the foreground (-f) as nobody, from a fresh datadir in its run folder (--initial: the cnf, not a
database left from an earlier run); its admin interface listens only on a unix socket in the run folder,
which stats() reads (stats_mysql_connection_pool, stats_mysql_global).

balance:
    roundrobin   every node in one hostgroup with the same weight (ProxySQL picks at random by weight)
    first        single writer, approximately: weight 10,000,000 on the first node and 1 on the others (a
                 strict order needs ProxySQL's Galera or replication hostgroups, which dbsweep does not set up)

Tested here only as far as this host allows: the config text and the refusals (no ProxySQL binary).
"""
from __future__ import annotations

import os
import secrets
import signal
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Callable, Iterator

from dbsweep.engines import (Handle, Launch, chown_tree, check_socket_path, prepare_rundir, socket_answers,
                             supervise, version_line, write_private)
from dbsweep.errors import ConfigError
from dbsweep.topology.network import enter_argv
from dbsweep.topology.proxies import ProxyHandle

KIND = "proxysql"
USER = "nobody"
SETTINGS = {"path": None, "balance": "roundrobin", "check_interval_ms": 500, "maxconn": 4096, "threads": 2}
BALANCE = ("roundrobin", "first")
LIMITS = {"check_interval_ms": (100, 60_000), "maxconn": (16, 100_000), "threads": (1, 64)}
FIRST_WEIGHT = 10_000_000  # ProxySQL's largest weight
CONFIG_NAME, ADMIN_NAME = "proxysql.cnf", "admin.sock"
ADMIN_USER = "dbsweep"
HOSTGROUP = 0
POOL = ("SELECT srv_host, srv_port, status, ConnUsed, ConnOK, ConnERR, Queries, Bytes_data_sent, "
        "Bytes_data_recv FROM stats_mysql_connection_pool")
GLOBAL = {"Client_Connections_connected": "sessions_current", "Client_Connections_created": "sessions_total",
          "Client_Connections_aborted": "request_errors", "Queries_frontends_bytes_recv": "bytes_in",
          "Queries_frontends_bytes_sent": "bytes_out", "Questions": "queries"}
TOTALS = {"sessions_total", "bytes_in", "bytes_out", "connection_errors", "request_errors", "queries"}


def check_settings(settings: dict, where: str = f"proxies.{KIND}") -> None:
    """Refuse a missing or unusable binary, one line (balance and limits: proxies.check_settings)."""
    path = settings.get("path")
    if path is None:
        raise ConfigError(f"{where}.path: None: ProxySQL is not packaged here; give the path of your own "
                          f"proxysql binary")
    if not isinstance(path, str) or not Path(path).is_absolute():
        raise ConfigError(f"{where}.path: {path!r} is not an absolute path")
    if not Path(path).is_file():
        raise ConfigError(f"{where}.path: {path!r}: no such file")
    if not os.access(path, os.X_OK):
        raise ConfigError(f"{where}.path: {path!r} is not executable")


def CUMULATIVE(name: str) -> bool:  # noqa: N802 - the interface's name
    return name.rsplit(".", 1)[-1] in TOTALS


def _quoted(value) -> str:
    """A libconfig string: in double quotes, backslash and quote escaped; no line breaks."""
    text = str(value)
    if "\n" in text or "\r" in text:
        raise ConfigError(f"proxysql config: {text!r} contains a line break")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def config_text(settings: dict, listen: tuple[str, int], backends: list, rundir: Path, login: tuple[str, str],
                admin_password: str) -> str:
    """The complete proxysql.cnf. It holds passwords: write it with write_private (0600)."""
    user, password = login
    weights = [FIRST_WEIGHT if settings["balance"] == "first" and i == 0 else 1 for i in range(len(backends))]
    servers = ",\n".join(f"    {{ address={_quoted(b.address)}, port={int(b.port)}, hostgroup={HOSTGROUP}, "
                         f"weight={w}, max_connections={int(settings['maxconn'])} }}"
                         for b, w in zip(backends, weights, strict=False))
    interval = int(settings["check_interval_ms"])
    return "\n".join([
        "# dbsweep: ProxySQL for one run; holds passwords (mode 0600)",
        f"datadir={_quoted(rundir / 'data')}",
        f"errorlog={_quoted(rundir / 'proxysql.log')}",
        "admin_variables=",
        "{",
        f"    admin_credentials={_quoted(f'{ADMIN_USER}:{admin_password}')}",
        f"    mysql_ifaces={_quoted(rundir / ADMIN_NAME)}",
        "}",
        "mysql_variables=",
        "{",
        f"    threads={int(settings['threads'])}",
        f"    max_connections={int(settings['maxconn'])}",
        f"    interfaces={_quoted(f'{listen[0]}:{int(listen[1])}')}",
        f"    monitor_username={_quoted(user)}",
        f"    monitor_password={_quoted(password)}",
        f"    monitor_ping_interval={interval}",
        f"    monitor_connect_interval={max(interval, 1000)}",
        "    monitor_ping_max_failures=2",
        "    shun_recovery_time_sec=1",
        "    connect_timeout_server=3000",
        "}",
        "mysql_servers=",
        "(",
        servers,
        ")",
        "mysql_users=",
        "(",
        f"    {{ username={_quoted(user)}, password={_quoted(password)}, default_hostgroup={HOSTGROUP}, "
        f"active=1 }}",
        ")",
    ]) + "\n"


def parse_stats(pool: list[tuple], global_rows: list[tuple], names: dict[tuple[str, int], str]) -> dict:
    """stats_mysql_connection_pool rows and stats_mysql_global rows -> numbers named as haproxy's are."""
    out = {}
    for host, port, status, used, ok, errors, queries, sent, received in pool:
        name = names.get((str(host), int(port)))
        if name is None:
            continue
        prefix = f"server.{name}"
        out.update({f"{prefix}.sessions_current": float(used), f"{prefix}.sessions_total": float(ok),
                    f"{prefix}.connection_errors": float(errors), f"{prefix}.queries": float(queries),
                    f"{prefix}.bytes_in": float(sent), f"{prefix}.bytes_out": float(received),
                    f"{prefix}.up": 1.0 if status == "ONLINE" else 0.0})
    for variable, value in global_rows:
        if variable in GLOBAL:
            out[f"frontend.{GLOBAL[variable]}"] = float(value)
    return out


@contextmanager
def run(settings: dict, listen: tuple[str, int], backends: list, rundir: Path, log, netns: str | None,
        login: tuple[str, str] | None, cgroup: Callable[[int], None] | None) -> Iterator:
    """ProxySQL on listen in front of backends, ready (its admin socket answers); stopped on exit."""
    import pymysql

    if login is None:
        raise RuntimeError("ProxySQL logs in to the nodes itself: proxy() needs the benchmark login")
    program = str(settings["path"])
    rundir = prepare_rundir(rundir, USER)
    admin_socket = rundir / ADMIN_NAME
    check_socket_path(admin_socket)
    (rundir / "data").mkdir(exist_ok=True)
    admin_password = secrets.token_urlsafe(24)
    config = rundir / CONFIG_NAME
    write_private(config, config_text(settings, listen, backends, rundir, login, admin_password))
    chown_tree(rundir, USER)
    # -f: foreground; -e: exit on a crash (no restart by its angel process); --initial: the cnf, not a database.
    argv = [program, "-f", "-e", "--initial", "-c", str(config), "-D", str(rundir / "data")]
    launch = Launch(name="proxysql", argv=[*enter_argv(netns, USER), *argv] if netns else argv,
                    user=USER, drop_privileges=netns is None, ready=lambda h: socket_answers(h.socket),
                    stop_signal=signal.SIGTERM, logs=[rundir / "proxysql.log"],
                    error_lines=lambda lines: [line for line in lines if "[ERROR]" in line],
                    leftovers=[admin_socket])
    handle = Handle(engine=KIND, port=int(listen[1]), socket=admin_socket, rundir=rundir, datadir=rundir / "data")
    names = {(b.address, int(b.port)): b.name for b in backends}
    facts = {"kind": KIND, "version": version_line([program, "--version"]), "balance": settings["balance"],
             "config": str(config), "settings": dict(settings),
             "backends": [f"{b.name}={b.address}:{b.port}" for b in backends], "netns": netns}

    def sample() -> dict[str, float]:
        with pymysql.connect(unix_socket=str(admin_socket), user=ADMIN_USER, password=admin_password,
                             connect_timeout=2) as admin, admin.cursor() as cursor:
            cursor.execute(POOL)
            pool = cursor.fetchall()
            cursor.execute("SELECT Variable_Name, Variable_Value FROM stats_mysql_global")
            return parse_stats(pool, cursor.fetchall(), names)

    with supervise(launch, handle, log, cgroup) as started:
        yield ProxyHandle(kind=KIND, address=listen[0], port=int(listen[1]), facts=facts, pid=started.pid,
                          sample=sample)
