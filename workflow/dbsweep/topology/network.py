"""Network namespaces for a topology: one per host (each node, the client), joined by veth pairs.

Each host gets a namespace of its own (named `dbs<pid><random>-<host>`, so repetitions running at once
on one machine never meet) with `lo` up and one IPv4 address, a /32 on `lo` from 198.18.0.0/15 (the
range set aside for benchmarks, RFC 2544). Every link is a veth pair (the end in a's namespace is
named `to-<b>`, or `peer<i>` when that is too long) with a /32 route to the peer's address over it:
nothing is routed anywhere else, and nothing of it is in the host's namespace.

Link conditions act on what ARRIVES at each end, in that end's iptables INPUT chain, so the sender
never sees a local error and TCP behaves as over a real link:
- latency_ms (the added ROUND TRIP) is half on each end: with tc netem on each end's egress where
  the kernel has sch_netem (Debian's does), else held by a user-space delayer through NFQUEUE at
  each end's input (topology/delayer.py; some VM kernels, this project's CI host among them, are
  built without netem; the delayer costs CPU, see BENCHMARKS.md); jitter_ms spreads the round trip by
  ±jitter_ms (±jitter_ms/2 each way). A link at latency 0 has no rule and no delay: the plain veth.
- cut drops everything both ways, silently, like a cable pulled between two switches: the interfaces
  stay up and routed, so TCP retransmits and a connect times out, and heal lets the same connections
  go on (a link set down would instead delete the routes and fail sends at once).
- loss drops that percentage of packets at random, each way.

On exit (success, exception, Ctrl-C) the delayers stop and the namespaces are deleted, which removes
their veths and rules. A record in `active` lets storage.release / sweep_stale delete them after a
SIGKILL (the delayers end on their own: their stdin closes with the owner).
"""
from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import pwd
import re
import secrets
import statistics
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterator

from dbsweep import storage

FIRST_ADDRESS = ipaddress.IPv4Address("198.18.0.1")
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
IFNAMSIZ = 15


def program(argv: list[str]) -> str:
    """The program an argv runs, whether or not it enters a namespace first (for messages)."""
    return argv[4] if argv[:3] == ["ip", "netns", "exec"] and len(argv) > 4 else argv[0]


def enter_argv(netns: str | None, user: str | None = None) -> list[str]:
    """The argv prefix that runs a program inside namespace netns (none: this one), as user when given
    (setns needs root, so the switch to user comes after it; the user's own primary group, whatever
    its name: nobody's is nogroup)."""
    prefix = ["ip", "netns", "exec", netns] if netns else []
    if user is not None and prefix:
        gid = pwd.getpwnam(user).pw_gid
        prefix += ["setpriv", f"--reuid={user}", f"--regid={gid}", "--init-groups", "--"]
    return prefix


@dataclass(frozen=True)
class LinkSpec:
    a: str
    b: str
    latency_ms: float = 0.0  # added ROUND-TRIP time between hosts a and b (half each way)
    jitter_ms: float = 0.0  # spread of that round trip: uniform within ±jitter_ms


def topology_links(settings: dict, client: str, nodes: list[str]) -> list[LinkSpec]:
    """A topology's links as its recipe's network settings declare them: the client with each node
    (client_latency_ms), each node with each later one (node_latency_ms), all with jitter_ms."""
    jitter = settings["jitter_ms"]
    out = [LinkSpec(client, node, settings["client_latency_ms"], jitter) for node in nodes]
    out += [LinkSpec(a, b, settings["node_latency_ms"], jitter) for i, a in enumerate(nodes) for b in nodes[i + 1:]]
    return out


@dataclass
class _Link:
    """A link's conditions now (they change with set_latency, set_loss, cut and heal)."""

    a: str
    b: str
    latency_ms: float
    jitter_ms: float
    loss_percent: float = 0.0
    cut: bool = False


class Network:
    """The namespaces of one repetition, their addresses and their links (see the module's doc)."""

    def __init__(self, hosts: list[str], links: list[LinkSpec], tag: str, log, floor_ms: float = 0.0):
        self.addresses = {h: str(FIRST_ADDRESS + i) for i, h in enumerate(hosts)}
        self.namespaces = {h: f"{tag}-{h}" for h in hosts}
        self._index = {h: i for i, h in enumerate(hosts)}
        self._links = {(spec.a, spec.b): _Link(spec.a, spec.b, spec.latency_ms, spec.jitter_ms) for spec in links}
        self._log = log
        self._delayers: dict[str, subprocess.Popen] = {}
        self._queued: dict[str, dict[int, tuple[float, float]]] = {}  # host -> queue -> what its delayer was told
        self._rtt: dict[str, float] = {}
        self._shaped: dict[tuple[str, str], tuple[float, float]] = {}  # (host, its link end) -> netem delay, jitter
        self._floor_ms = floor_ms  # the round trip the user-space delayer adds by itself (link_floor)

    def enter(self, host: str, user: str | None = None) -> list[str]:
        return enter_argv(self.namespaces[host], user)

    def ifname(self, host: str, peer: str) -> str:
        """The name, in host's namespace, of its end of the link to peer."""
        name = f"to-{peer}"
        return name if len(name) <= IFNAMSIZ else f"peer{self._index[peer]}"

    # link conditions (issue 15's timed events call these during the measured window)
    def cut(self, a: str, b: str) -> None:
        self._change(a, b, cut=True)

    def heal(self, a: str, b: str) -> None:
        self._change(a, b, cut=False)

    def set_latency(self, a: str, b: str, latency_ms: float, jitter_ms: float = 0.0) -> None:
        if latency_ms < 0 or jitter_ms < 0:
            raise ValueError(f"link {a}-{b}: latency_ms {latency_ms} and jitter_ms {jitter_ms} must be >= 0")
        self._change(a, b, latency_ms=latency_ms, jitter_ms=jitter_ms)

    def set_loss(self, a: str, b: str, percent: float) -> None:
        if not 0 <= percent <= 100:
            raise ValueError(f"link {a}-{b}: loss percent {percent} must be within 0..100")
        self._change(a, b, loss_percent=percent)

    def link(self, a: str, b: str) -> _Link:
        found = self._links.get((a, b)) or self._links.get((b, a))
        if found is None:
            raise KeyError(f"no link between {a} and {b}: links are {', '.join(f'{x}-{y}' for x, y in self._links)}")
        return found

    def _change(self, a: str, b: str, **conditions) -> None:
        link = self.link(a, b)
        for key, value in conditions.items():
            setattr(link, key, value)
        self._apply([link.a, link.b])

    def _apply(self, hosts: list[str]) -> None:
        """Make each host's INPUT chain (and its delayer) match the conditions of its links, each in one
        step, all hosts at once (a cut takes effect at both ends within a few ms)."""
        texts = {host: self._rules(host) for host in hosts}
        restores = {}
        for host, text in texts.items():
            argv = [*self.enter(host), "iptables-restore"]
            self._log.write(f"$ {' '.join(argv)}\n")
            restores[host] = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, text=True)
            restores[host].stdin.write(text)
            restores[host].stdin.close()
        for host, proc in restores.items():
            out = proc.stdout.read()
            if proc.wait() != 0:
                raise RuntimeError(f"iptables-restore in {self.namespaces[host]} failed ({proc.returncode}): "
                                   f"{out.strip()}")
            proc.stdout.close()
        if netem_available():
            for host in hosts:
                self._netem(host)

    def _netem(self, host: str) -> None:
        """With sch_netem: half of each link's round trip as a netem delay on host's end (its egress)."""
        for link in self._links.values():
            if host not in (link.a, link.b):
                continue
            dev = self.ifname(host, link.b if host == link.a else link.a)
            wanted = (link.latency_ms / 2, link.jitter_ms / 2)
            if self._shaped.get((host, dev), (0.0, 0.0)) == wanted:
                continue
            if wanted[0] > 0:
                delay = [f"{wanted[0]:g}ms"] + ([f"{wanted[1]:g}ms"] if wanted[1] > 0 else [])
                self._run([*self.enter(host), "tc", "qdisc", "replace", "dev", dev, "root", "netem", "delay", *delay])
            else:
                self._run([*self.enter(host), "tc", "qdisc", "del", "dev", dev, "root"])
            self._shaped[(host, dev)] = wanted

    def _rules(self, host: str) -> str:
        """host's INPUT chain for the conditions of its links, as iptables-restore reads it."""
        rules = []
        for link in self._links.values():
            if host not in (link.a, link.b):
                continue
            peer = link.b if host == link.a else link.a
            dev = self.ifname(host, peer)
            if link.cut:
                rules.append(["-A", "INPUT", "-i", dev, "-j", "DROP"])
            elif link.loss_percent > 0:
                rules.append(["-A", "INPUT", "-i", dev, "-m", "statistic", "--mode", "random",
                              "--probability", f"{link.loss_percent / 100:.6f}", "-j", "DROP"])
            if link.latency_ms > 0 and not netem_available():
                queue = self._index[peer]
                # the delayer's own trip is part of the round trip: it holds each packet for the rest
                self._delay(host, queue, max(0.0, link.latency_ms - self._floor_ms) / 2, link.jitter_ms / 2)
                rules.append(["-A", "INPUT", "-i", dev, "-j", "NFQUEUE", "--queue-num", str(queue)])
        return "*filter\n:INPUT ACCEPT [0:0]\n" + "".join(" ".join(rule) + "\n" for rule in rules) + "COMMIT\n"

    def _delay(self, host: str, queue: int, delay_ms: float, jitter_ms: float) -> None:
        """Tell host's delayer (started when first needed) the one-way delay of a queue; returns once the
        queue is bound, so no packet is queued before anything listens."""
        if self._queued.get(host, {}).get(queue) == (delay_ms, jitter_ms):
            return
        proc = self._delayers.get(host)
        if proc is None:
            proc = self._delayers[host] = start_delayer(self.enter(host), self._log)
        tell_delayer(proc, queue, delay_ms, jitter_ms, host)
        self._queued.setdefault(host, {})[queue] = (delay_ms, jitter_ms)

    def measure_rtt(self, count: int = 5, pick=statistics.median) -> dict[str, float]:
        """"a-b" -> the median (or pick's) round trip of count pings from a to b, in ms (nan: no answer, e.g.
        cut)."""
        for host, proc in self._delayers.items():
            if proc.poll() is not None:  # its links would drop everything: say so, not "cut"
                raise RuntimeError(f"the delayer of {host} ({self.namespaces[host]}) exited with {proc.returncode}")
        pings = {f"{a}-{b}": subprocess.Popen([*self.enter(a), "ping", "-n", "-U", "-c", str(count), "-i", "0.01",
                                               "-W", "2", self.addresses[b]],
                                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for a, b in self._links}
        rtt = {}
        for name, proc in pings.items():
            out, _ = proc.communicate()
            times = [float(t) for t in re.findall(r"time=([0-9.]+) ms", out)]
            rtt[name] = pick(times) if times else float("nan")
        self._rtt = rtt
        return rtt

    @property
    def facts(self) -> dict:
        return {"namespaces": dict(self.namespaces), "addresses": dict(self.addresses),
                "links": [{"a": link.a, "b": link.b, "latency_ms": link.latency_ms, "jitter_ms": link.jitter_ms,
                           "loss_percent": link.loss_percent, "cut": link.cut} for link in self._links.values()],
                "rtt_ms": dict(self._rtt),
                "method": "veth pairs; latency: " + ("tc netem at each end's egress (half each)" if netem_available()
                                                     else "NFQUEUE user-space delayer at each end's input (half "
                                                          "each): this kernel has no sch_netem")
                          + "; loss and cut: iptables INPUT drop"}

    def _run(self, argv: list[str]) -> None:
        self._log.write(f"$ {' '.join(argv)}\n")
        storage.sh(argv)

    def _build(self) -> None:
        for host, ns in self.namespaces.items():
            self._run(["ip", "netns", "add", ns])
            self._run(["ip", "-n", ns, "link", "set", "lo", "up"])
            self._run(["ip", "-n", ns, "address", "add", f"{self.addresses[host]}/32", "dev", "lo"])
        for a, b in self._links:
            ns_a, ns_b, dev_a, dev_b = self.namespaces[a], self.namespaces[b], self.ifname(a, b), self.ifname(b, a)
            self._run(["ip", "-n", ns_a, "link", "add", dev_a, "type", "veth", "peer", "name", dev_b, "netns", ns_b])
            for host, peer, ns, dev in ((a, b, ns_a, dev_a), (b, a, ns_b, dev_b)):
                self._run(["ip", "-n", ns, "link", "set", dev, "up"])
                self._run(["ip", "-n", ns, "route", "add", f"{self.addresses[peer]}/32", "dev", dev,
                           "src", self.addresses[host]])
        self._apply([host for host in self.namespaces if any(host in pair for pair in self._links)])

    def _close(self) -> None:
        """Stop the delayers, delete the namespaces (and with them every veth and rule); raise if one stays."""
        for proc in self._delayers.values():
            stop_delayer(proc)
        self._delayers.clear()
        for name in storage.delete_netns(list(self.namespaces.values())):
            self._log.write(f"$ ip netns delete {name}\n")


def start_delayer(prefix: list[str], log) -> subprocess.Popen:
    """The user-space delayer (delayer.py), run after prefix (a namespace to enter; none: this one)."""
    argv = [*prefix, sys.executable, "-m", "dbsweep.topology.delayer"]
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    log.write(f"$ {' '.join(argv)}\n")
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd="/")


def tell_delayer(proc: subprocess.Popen, queue: int, delay_ms: float, jitter_ms: float, who: str) -> None:
    """Give queue of the delayer proc its one-way delay; returns once the queue is bound."""
    proc.stdin.write(f"{queue} {delay_ms} {jitter_ms}\n")
    proc.stdin.flush()
    answer = proc.stdout.readline().strip()
    if answer != f"ok {queue}":
        raise RuntimeError(f"the delayer of {who} did not bind queue {queue} (exit {proc.poll()}): {answer!r}")


def stop_delayer(proc: subprocess.Popen) -> None:
    """End a delayer: its stdin closed, it exits (killed if it does not within 5 s)."""
    with contextlib.suppress(BrokenPipeError):  # it died already
        proc.stdin.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stdout.close()


@dataclass(frozen=True)
class PeerDelay:
    """One end of a link between hosts of a placed topology: what arrives from the peer's address is held
    delay_ms (half the link's round trip), uniform within ±jitter_ms, by this host's delayer's queue."""

    address: str
    queue: int
    delay_ms: float
    jitter_ms: float = 0.0

    def rule(self, comment: str) -> list[str]:
        """The INPUT rule that hands what arrives from the peer to the queue; --queue-bypass: with no delayer
        bound (it died, a kill left the rule) packets pass undelayed instead of being dropped."""
        return ["INPUT", "-s", f"{self.address}/32", "-m", "comment", "--comment", comment,
                "-j", "NFQUEUE", "--queue-num", str(self.queue), "--queue-bypass"]


@contextmanager
def host_delays(delays: list[PeerDelay], comment: str, log, active: Path | None) -> Iterator[None]:
    """This host's ends of a placed topology's links (issue 34): in this network namespace (the host's own),
    for each peer an iptables rule named by comment (the repetition) handing what arrives from it to a queue
    of a delayer, this process's child; on exit the rules are deleted and the delayer stops; after a SIGKILL
    the record in active lets storage.release (the guardian) or sweep_stale (the next run, a Slurm Epilog)
    delete the rules."""
    if not delays:
        yield
        return
    rules = [delay.rule(comment) for delay in delays]
    entry = storage.register(active, {"iptables": rules}) if active is not None else None
    proc = None
    try:
        proc = start_delayer([], log)
        for delay in delays:
            tell_delayer(proc, delay.queue, delay.delay_ms, delay.jitter_ms, f"link from {delay.address}")
        for rule in rules:
            log.write(f"$ iptables -w -I {' '.join(rule)}\n")
            storage.sh(["iptables", "-w", "-I", *rule])
        yield
    finally:
        try:
            storage.delete_rules(rules)
            if entry is not None:  # the rules are gone: nothing left for a sweep (else the record stays for it)
                entry.unlink(missing_ok=True)
        finally:  # the delayer stops even where a rule could not be deleted
            if proc is not None:
                stop_delayer(proc)


@functools.cache
def netem_available() -> bool:
    """Whether this kernel has sch_netem (Debian's has; some VM kernels are built without it), tried once
    in a namespace of its own."""
    probe = f"dbs-netem-probe-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode != 0:
        return False
    try:
        done = subprocess.run(["ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
                               "delay", "1ms"], capture_output=True)
        return done.returncode == 0
    finally:
        subprocess.run(["ip", "netns", "delete", probe], capture_output=True)


def check(hosts: list[str], links: list[LinkSpec]) -> None:
    """Refuse hosts and links the network cannot build, in one line."""
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"hosts: a name appears twice in {hosts}")
    if len(hosts) > 250:
        raise ValueError(f"hosts: {len(hosts)} is more than 250")
    for host in hosts:
        if not HOST_NAME.fullmatch(host) or len(host) > 40:
            raise ValueError(f"hosts: {host!r} is not a name of letters, digits, '_', '.', '-' (at most 40)")
    seen = set()
    for spec in links:
        if spec.a not in hosts or spec.b not in hosts or spec.a == spec.b:
            raise ValueError(f"link {spec.a}-{spec.b}: joins no two distinct hosts of {hosts}")
        if frozenset((spec.a, spec.b)) in seen:
            raise ValueError(f"link {spec.a}-{spec.b}: given twice")
        seen.add(frozenset((spec.a, spec.b)))
        if not (spec.latency_ms >= 0 and spec.jitter_ms >= 0):
            raise ValueError(f"link {spec.a}-{spec.b}: latency_ms {spec.latency_ms} and jitter_ms {spec.jitter_ms} "
                             "must be >= 0")


@contextmanager
def network(hosts: list[str], links: list[LinkSpec], log, active: Path | None = None,
            floor_ms: float = 0.0) -> Iterator[Network]:
    """A namespace per host, a veth pair per link with its latency, measured once (facts["rtt_ms"]);
    all of it deleted on exit, and after a SIGKILL through the record in active. floor_ms: the round trip
    the user-space delayer adds by itself (link_floor.floor()), taken off what it is told to hold, so a
    link delivers its declared round trip (0: hold the whole delay, as the floor's own probe does)."""
    check(hosts, links)
    net = Network(hosts, links, f"dbs{os.getpid()}{secrets.token_hex(2)}", log, floor_ms)
    entry = storage.register(active, {"netns": list(net.namespaces.values())}) if active is not None else None
    try:
        net._build()
        net.measure_rtt(10)
        yield net
    finally:
        net._close()
        if entry is not None:
            entry.unlink(missing_ok=True)
