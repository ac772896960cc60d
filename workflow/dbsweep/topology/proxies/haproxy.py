"""Debian's haproxy in TCP mode in front of a topology's nodes.

It runs in the foreground (-db: one process, no master) as the unprivileged haproxy user, in its run
folder (-C: its cwd there, which is how supervise finds all of it), with its config written there (no
passwords: in TCP mode haproxy only passes bytes; the client logs in to the node). A unix stats socket
in the run folder answers "show stat", which stats() turns into numbers.

balance:
    roundrobin   each new connection to the next healthy node
    first        single writer: every connection to the first healthy node in order; when it is taken
                 out, to the next (and back to the first once it answers again)
    leastconn    to the node with the fewest connections

Health checks are plain TCP connects every check_interval_ms; a node failing `fall` (2) of them in a row
is taken out and its open connections are closed (a killed node is out within about 2 x the interval);
a connection refused by a node is retried on another one.
"""
from __future__ import annotations

import csv
import io
import re
import signal
import socket
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Callable, Iterator

from dbsweep.engines import (Handle, Launch, binary, check_socket_path, prepare_rundir, socket_answers,
                             supervise, version_line, write_config)
from dbsweep.topology.network import enter_argv
from dbsweep.topology.proxies import ProxyHandle

KIND = "haproxy"
USER = "haproxy"  # Debian's package makes it; nothing else of this user's runs in our run folder
SETTINGS = {"balance": "roundrobin", "check_interval_ms": 500, "timeout_s": 3600, "maxconn": 4096}
BALANCE = ("roundrobin", "first", "leastconn")
LIMITS = {"check_interval_ms": (50, 60_000), "timeout_s": (1, 86_400), "maxconn": (16, 100_000)}
FALL, RISE = 2, 2
CONNECT_TIMEOUT_S = 3
CONFIG_NAME, STATS_NAME = "haproxy.cfg", "stats.sock"
FRONTEND, BACKEND = "dbsweep", "nodes"
# "show stat" columns -> our metric names; running totals are CUMULATIVE.
COLUMNS = {"scur": "sessions_current", "stot": "sessions_total", "bin": "bytes_in", "bout": "bytes_out",
           "qcur": "queue", "econ": "connection_errors", "ereq": "request_errors", "eresp": "response_errors",
           "wretr": "retries", "wredis": "redispatches", "downtime": "downtime_s"}
TOTALS = {"sessions_total", "bytes_in", "bytes_out", "connection_errors", "request_errors", "response_errors",
          "retries", "redispatches", "downtime_s"}
STATS_TIMEOUT_S = 2


def check_settings(settings: dict, where: str = f"proxies.{KIND}") -> None:
    """Debian's haproxy runs every setting proxies.check_settings lets through: nothing more to refuse."""


def CUMULATIVE(name: str) -> bool:  # noqa: N802 - the interface's name
    """Whether a stats() number is a running total (sessions, bytes, errors) or a level (current, queue, up)."""
    return name.rsplit(".", 1)[-1] in TOTALS


def config_text(settings: dict, listen: tuple[str, int], backends: list, stats_socket: Path) -> str:
    """The complete haproxy.cfg."""
    address, port = listen
    interval = int(settings["check_interval_ms"])
    timeout = int(settings["timeout_s"])
    maxconn = int(settings["maxconn"])
    lines = ["# dbsweep: haproxy for one run (TCP mode); no passwords here",
             "global",
             f"    maxconn {maxconn}",
             f"    stats socket {stats_socket} mode 600 level operator",
             "    log stderr format iso local0 notice",  # node up/down with a timestamp (and a [WARNING] copy)
             "",
             "defaults",
             "    mode tcp",
             "    log global",
             f"    maxconn {maxconn}",
             f"    timeout connect {CONNECT_TIMEOUT_S}s",
             f"    timeout client {timeout}s",
             f"    timeout server {timeout}s",
             f"    timeout queue {timeout}s",
             "    retries 3",
             "    option redispatch 1",  # a node that refuses: the retry goes to another one
             "",
             f"frontend {FRONTEND}",
             f"    bind {address}:{int(port)}",
             f"    default_backend {BACKEND}",
             "",
             f"backend {BACKEND}",
             f"    balance {settings['balance']}",
             f"    default-server check inter {interval}ms fastinter {interval}ms downinter {interval}ms "
             f"fall {FALL} rise {RISE} on-marked-down shutdown-sessions"]
    lines += [f"    server {b.name} {b.address}:{int(b.port)}" for b in backends]
    return "\n".join(lines) + "\n"


def version() -> str:
    return version_line([binary("haproxy"), "-v"])


def query(stats_socket: Path, command: str) -> str:
    """One command on the stats socket; its whole answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(STATS_TIMEOUT_S)
        sock.connect(str(stats_socket))
        sock.sendall(command.encode() + b"\n")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def parse_stat(text: str, names: set[str]) -> dict[str, float]:
    """"show stat" CSV -> numbers: "frontend.<metric>", "backend.<metric>", "server.<name>.<metric>" for the
    backends' names; "up" 1/0 from the status column."""
    out = {}
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# "):
        raise RuntimeError(f"haproxy stats: not a show stat answer: {text[:200]!r}")
    for row in csv.DictReader(io.StringIO("\n".join([lines[0][2:], *lines[1:]]))):
        if row["pxname"] == FRONTEND and row["svname"] == "FRONTEND":
            prefix = "frontend"
        elif row["pxname"] == BACKEND and row["svname"] == "BACKEND":
            prefix = "backend"
        elif row["pxname"] == BACKEND and row["svname"] in names:
            prefix = f"server.{row['svname']}"
        else:
            continue
        for column, metric in COLUMNS.items():
            value = row.get(column, "")
            if value not in ("", None):
                out[f"{prefix}.{metric}"] = float(value)
        status = row.get("status", "")
        out[f"{prefix}.up"] = 1.0 if re.match(r"(UP|OPEN|no check)", status) else 0.0
    return out


@contextmanager
def run(settings: dict, listen: tuple[str, int], backends: list, rundir: Path, log, netns: str | None,
        login: tuple[str, str] | None, cgroup: Callable[[int], None] | None) -> Iterator:
    """haproxy on listen in front of backends, ready (its stats socket answers); stopped on exit."""
    del login  # TCP mode: the client logs in to the node itself
    rundir = prepare_rundir(rundir, USER)
    stats_socket = rundir / STATS_NAME
    check_socket_path(stats_socket)
    config = rundir / CONFIG_NAME
    write_config(config, config_text(settings, listen, backends, stats_socket))
    program = binary("haproxy")
    # -db: foreground, one process; -C: work in the run folder; -f: the config.
    argv = [program, "-db", "-C", str(rundir), "-f", str(config)]
    launch = Launch(name="haproxy", argv=[*enter_argv(netns, USER), *argv] if netns else argv,
                    user=USER, drop_privileges=netns is None, ready=lambda h: socket_answers(h.socket),
                    stop_signal=signal.SIGTERM, logs=[], error_lines=_error_lines, leftovers=[stats_socket])
    handle = Handle(engine=KIND, port=int(listen[1]), socket=stats_socket, rundir=rundir, datadir=rundir)
    names = {b.name for b in backends}
    facts = {"kind": KIND, "version": version(), "balance": settings["balance"], "config": str(config),
             "settings": dict(settings), "backends": [f"{b.name}={b.address}:{b.port}" for b in backends],
             "netns": netns}
    with supervise(launch, handle, log, cgroup) as started:
        yield ProxyHandle(kind=KIND, address=listen[0], port=int(listen[1]), facts=facts, pid=started.pid,
                          sample=lambda: parse_stat(query(stats_socket, "show stat"), names))


def _error_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if "[ALERT]" in line or "[WARNING]" in line]
