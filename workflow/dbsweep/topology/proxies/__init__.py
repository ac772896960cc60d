"""Proxies in front of a topology's nodes: the client connects to the proxy, the proxy to the nodes.

KINDS maps a proxy kind (a value of the `proxy` axis, a key of the study's `proxies:`) to its adapter
module. Every adapter declares the same things, and nothing outside its module tests its kind:

    SETTINGS, BALANCE, LIMITS      the settings it takes with their defaults, its balance modes, numeric ranges
    check_settings(settings, where)  optional: what else it refuses when the study loads (ConfigError, one line)
    run(settings, listen, backends, rundir, log, netns, login, cgroup)
                                   context manager: the proxy, ready; yields a ProxyHandle; always stopped
    CUMULATIVE(name)               whether a stats() number is a running total (per-second deltas)

haproxy.py   Debian's haproxy in TCP mode (installed with dbsweep)
proxysql.py  ProxySQL from the user's own binary (settings `path`): no registry here packages it
"""
from __future__ import annotations

import importlib
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from collections.abc import Callable, Iterator

from dbsweep.errors import ConfigError

KINDS = {"haproxy": f"{__name__}.haproxy", "proxysql": f"{__name__}.proxysql"}
# A backend's name goes into the proxy's config and into stats() keys: a plain word.
BACKEND_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")


@dataclass(frozen=True)
class Backend:
    """A node the proxy sends clients to: its name (the node column), its address and port."""

    name: str
    address: str
    port: int


@dataclass
class ProxyHandle:
    """A running proxy: where the client connects, what the manifest records, its numbers.

    stats(): one sample for per-second sampling, name -> number. Names are "frontend.<metric>",
    "backend.<metric>" (the pool of nodes as one) and "server.<backend name>.<metric>"; the adapter's
    CUMULATIVE(name) tells running totals from levels."""

    kind: str
    address: str
    port: int
    facts: dict
    sample: Callable[[], dict[str, float]] = field(repr=False)
    pid: int = 0  # the proxy's process (for a timed event that kills it)

    def stats(self) -> dict[str, float]:
        return self.sample()


def adapter(kind: str) -> ModuleType:
    """The module of a proxy kind."""
    if kind not in KINDS:
        raise ConfigError(f"proxy: {kind!r} is not one of {', '.join(KINDS)}")
    return importlib.import_module(KINDS[kind])


def check_settings(kind: str, settings: dict | None, where: str | None = None) -> None:
    """Refuse, when the study loads, a kind or settings the proxy would refuse (ConfigError, one line naming
    where: the study's key, proxies.<name>)."""
    where = where or f"proxies.{kind}"
    module = adapter(kind)
    if settings is not None and not isinstance(settings, dict):
        raise ConfigError(f"{where}: {settings!r} is not a mapping of settings")
    unknown = sorted(set(settings or {}) - set(module.SETTINGS), key=str)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: {(settings or {})[unknown[0]]!r} is not a setting of "
                          f"{kind} ({', '.join(module.SETTINGS)})")
    settings = settings or {}
    balance = settings.get("balance", module.SETTINGS["balance"])
    if balance not in module.BALANCE:
        raise ConfigError(f"{where}.balance: {balance!r} is not one of {', '.join(module.BALANCE)}")
    for key, (low, high) in module.LIMITS.items():
        value = settings.get(key, module.SETTINGS[key])
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"{where}.{key}: {value!r} is not a whole number from {low} to {high}")
    module.check_settings(settings, where)  # what only that proxy checks (ProxySQL: its binary)


def check_backends(backends: list[Backend]) -> None:
    if not backends:
        raise ValueError("a proxy needs at least one backend")
    names = [backend.name for backend in backends]
    for backend in backends:
        if not BACKEND_NAME.match(backend.name):
            raise ValueError(f"proxy backend {backend.name!r}: not a plain name (a letter, then letters, digits, "
                             f"_ or -; at most 32)")
        if not 0 < int(backend.port) < 65536:
            raise ValueError(f"proxy backend {backend.name}: port {backend.port} out of range")
    if len(set(names)) != len(names):
        raise ValueError(f"proxy backends: names repeat ({', '.join(names)})")


@contextmanager
def proxy(kind: str, settings: dict, listen: tuple[str, int], backends: list[Backend], rundir: Path, log,
          netns: str | None = None, *, login: tuple[str, str] | None = None,
          cgroup: Callable[[int], None] | None = None) -> Iterator[ProxyHandle]:
    """The proxy of kind listening on listen (address, port) in front of backends, ready; stopped on exit
    with nothing left running. rundir: its own folder (config, stats socket, logs); netns: the network
    namespace it runs in (the proxy host's), else the host's. login: the benchmark user and password, for a
    proxy that authenticates clients itself (ProxySQL; they go to a 0600 file, never a command line);
    cgroup: called with the proxy's pid once it started (the repetition's cgroup)."""
    check_settings(kind, settings)
    check_backends(backends)
    module = adapter(kind)
    with module.run({**module.SETTINGS, **(settings or {})}, listen, list(backends), Path(rundir), log, netns,
                    login, cgroup) as handle:
        yield handle
