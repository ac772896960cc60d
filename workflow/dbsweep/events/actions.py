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

On a topology placed on hosts (topology/placement.py) the node actions marked on_host (stop, kill, pause,
resume, start, restart) run on the node's own host, by its job step; the others are refused at load.
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


@dataclass(frozen=True)
class Action:
    target: str  # node, link, host or server (a node's server, the first node by default)
    undo: str | None = None  # the action `for` schedules at the event's end
    needs: tuple[str, ...] = ()
    takes: tuple[str, ...] = ()  # beyond at, for, action, target
    check: Callable = _nothing  # (event, where): ConfigError naming key and value
    # done on a placed node's own host by its job step (events.targets.Node.on_host), where the node's server
    # is that host's process; the others are refused for a topology placed on hosts (check_placed)
    on_host: bool = False


ACTIONS: dict[str, Action] = {
    "stop": Action("node", on_host=True),
    "kill": Action("node", on_host=True),
    "pause": Action("node", undo="resume", on_host=True),
    "resume": Action("node", on_host=True),
    "start": Action("node", on_host=True),
    "restart": Action("node", on_host=True),
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
    "sql": Action("server", needs=("statement",), takes=("statement",), check=_statement),
    "command": Action("server", needs=("argv",), takes=("argv",), check=_argv),
}
