"""The actions an event may take: what each acts on, what it needs and takes, and its undo (what `for`
schedules at its end). The mechanisms are events.targets'; each action is one method there of its name.

    node    stop (clean shutdown), kill (SIGKILL), pause / resume (SIGSTOP / SIGCONT), start, restart
    link    cut / heal (the link's veth pair down / up), delay (latency_ms, jitter_ms added round trip),
            loss (percent)
    host    cpu_hog (stress-ng --cpu workers), drop_caches
    node    io_throttle (read_bps, write_bps: a size per second; read_iops, write_iops) on the device its
            datadir is on (runtime.blkio: cgroup v1 blkio)
    server  sql (a statement, run as the server's administrator through its socket, in the benchmark's
            database), command (argv: a program and its arguments, never a shell string)

On a topology placed on hosts (topology/placement.py) the node actions (stop, kill, pause, resume, start,
restart) run on the node's own host, by its job step, and sql here through the node's relayed admin socket
(`placed`); the others are refused at load.
"""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

from dbsweep.errors import ConfigError, shown
from dbsweep.runtime import blkio
from dbsweep.units import parse_size


def _nothing(event: dict, where: str) -> None:
    pass


def _number(key: str, low: float, high: float | None = None):
    def check(event: dict, where: str) -> None:
        value = event.get(key)
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low \
                or (high is not None and value > high):
            bounds = f"from {low:g}" + (f" to {high:g}" if high is not None else "")
            raise ConfigError(f"{where}.{key}: {value!r} is not a number {bounds}")
    return check


def _all(*checks):
    def check(event: dict, where: str) -> None:
        for c in checks:
            c(event, where)
    return check


def _statement(event: dict, where: str) -> None:
    if not isinstance(event["statement"], str) or not event["statement"].strip():
        raise ConfigError(f"{where}.statement: {event['statement']!r} is not an SQL statement")


def _io_limits(event: dict, where: str) -> None:
    given = [key for key in blkio.LIMITS if key in event]
    if not given:
        raise ConfigError(f"{where}: {shown(event)}: io_throttle needs one of {', '.join(blkio.LIMITS)}")
    for key in given:
        value = event[key]
        try:
            amount = parse_size(value) if key.endswith("_bps") else value
        except ConfigError:
            amount = None
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            kind = "a size per second like 10M" if key.endswith("_bps") else "a whole number of IOs per second"
            raise ConfigError(f"{where}.{key}: {value!r} is not {kind}")
    if blkio.hierarchy() is None:
        raise ConfigError(f"{where}.action: io_throttle: this host mounts no cgroup v1 blkio hierarchy "
                          f"(cgroup v2's io.max is not supported)")


def _argv(event: dict, where: str) -> None:
    argv = event["argv"]
    if not isinstance(argv, list) or not argv or not all(isinstance(a, (str, int, float)) for a in argv):
        raise ConfigError(f"{where}.argv: {shown(argv)} is not a list of a program and its arguments")
    if not str(argv[0]).startswith("/"):
        raise ConfigError(f"{where}.argv: {shown(argv[0])}: give the program's absolute path")


STEP, RELAY = "by its job step on its host", "through its relayed admin socket"  # Action.placed


@dataclass(frozen=True)
class Action:
    target: str  # node, link, host or server (a node's server, the first node by default)
    undo: str | None = None  # the action `for` schedules at the event's end
    needs: tuple[str, ...] = ()
    takes: tuple[str, ...] = ()  # beyond at, for, action, target
    check: Callable = _nothing  # (event, where): ConfigError naming key and value
    # how it runs on a node of a topology placed on hosts: STEP, by the node's job step on its host, where its
    # server is that host's process (events.targets.Node.on_host); RELAY, here, through the node's admin socket
    # relayed from its host (topology/relay.py); None: not there (refused at load)
    placed: str | None = None



ACTIONS: dict[str, Action] = {
    "stop": Action("node", placed=STEP),
    "kill": Action("node", placed=STEP),
    "pause": Action("node", undo="resume", placed=STEP),
    "resume": Action("node", placed=STEP),
    "start": Action("node", placed=STEP),
    "restart": Action("node", placed=STEP),
    "cut": Action("link", undo="heal"),
    "heal": Action("link"),
    "delay": Action("link", undo="undelay", needs=("latency_ms",), takes=("latency_ms", "jitter_ms"),
                    check=_all(_number("latency_ms", 0, 10000), _number("jitter_ms", 0, 10000))),
    "undelay": Action("link"),
    "loss": Action("link", undo="unloss", needs=("percent",), takes=("percent",),
                   check=_number("percent", 0, 100)),
    "unloss": Action("link"),
    "cpu_hog": Action("host", undo="cpu_unhog", takes=("workers",), check=_number("workers", 1, 1024)),
    "cpu_unhog": Action("host"),
    "drop_caches": Action("host"),
    "io_throttle": Action("node", undo="io_unthrottle", takes=blkio.LIMITS, check=_io_limits),
    "io_unthrottle": Action("node"),
    "sql": Action("server", needs=("statement",), takes=("statement",), check=_statement, placed=RELAY),
    "command": Action("server", needs=("argv",), takes=("argv",), check=_argv),
}
