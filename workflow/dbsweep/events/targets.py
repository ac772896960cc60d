"""What events act on, and how: the cell's nodes (their servers' process trees, a way to start each
again), its links (the topology's network), the host. Only what the repetition started is touched.

A node an event stopped or killed is `down`: its sampler skips it (a gap in its counters, not an
error), and its supervisor does not fail the run when it finds it gone. A node started again by an
event is the events' own: stopped when the schedule ends, with the repetition's other resources
after it. A paused node is resumed, a cut link healed, a hog stopped, whatever ended the window.

A node of a topology placed on hosts (topology/placed.py) has `on_host`: its server is a process of its
own host, so its node actions (events.actions' placed=STEP ones) are asked of its job step there, which
does them with a Targets of its own over that one node (topology/host_step.HostEvents); here it is marked
down, paused or started again as on one host, so that its sampler skips it as on one host. An sql event
reaches it through its relayed admin socket, as its family's code does.
"""
from __future__ import annotations

import signal
import subprocess
import threading
import time
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable

import psutil

from dbsweep import accounting, database, storage
from dbsweep.runtime import blkio
from dbsweep.units import format_size

STOP_TIMEOUT_S = 60


@dataclass
class Node:
    name: str
    db: database.Database | None
    open: Callable | None  # () -> a context manager yielding a new Database on the node's datadir
    spec: object = None  # its topology NodeSpec (None for a cell without topology)
    down: bool = False
    paused: list[int] = field(default_factory=list)
    # a placed node's: action -> what its host's step said ({outcome, paused: its pids there}); raises when
    # the step could not do it (topology/hosts.py's on_host)
    on_host: Callable[[str], dict] | None = None

    def pids(self) -> list[int]:
        """The server's process tree (it runs in a session of its own)."""
        if self.db is None or not self.db.handle.pid:
            return []
        try:
            root = psutil.Process(self.db.handle.pid)
            return [root.pid] + [p.pid for p in root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []


class Targets:
    """The nodes (name -> Node, in the topology's order), the network (None without a topology), and
    what events started (hogs, commands, restarted servers), released by close()."""

    def __init__(self, nodes: list[Node], network, latency: Callable[[str, str], tuple[float, float]], raw: Path,
                 log):
        self.nodes = {node.name: node for node in nodes}
        self.network, self.latency, self.raw, self.log = network, latency, raw, log
        self.started = ExitStack()  # servers events started again
        self.restarted: set[str] = set()  # the nodes whose server is in self.started
        self.children: dict[str, subprocess.Popen] = {}
        self.threads: list[threading.Thread] = []
        self.outcomes: dict[int, str] = {}  # event index -> outcome of what runs in the background
        self.throttles = blkio.Throttles()

    def node(self, event: dict) -> Node:
        return self.nodes[event.get("target") or next(iter(self.nodes))]

    def link(self, event: dict) -> tuple[str, str]:
        a, b = str(event["target"]).removeprefix("link ").split("-", 1)
        return a, b

    # --- nodes -----------------------------------------------------------------------------

    def _signal(self, node: Node, sig: int) -> list[int]:
        sent = []
        for pid in node.pids():
            try:
                psutil.Process(pid).send_signal(sig)
                sent.append(pid)
            except psutil.NoSuchProcess:
                pass
        return sent

    def _there(self, node: Node, action: str) -> str:
        """action done on a placed node's host by its job step; its outcome there."""
        said = node.on_host(action)
        node.paused = said.get("paused", [])
        return said["outcome"]

    def kill(self, event: dict) -> str:
        node = self.node(event)
        node.down = True
        if node.on_host is not None:
            return self._there(node, "kill")
        if node.db is not None:
            node.db.handle.stopped_by_event = True
        pids = self._signal(node, signal.SIGKILL)
        return f"SIGKILL to {node.name}'s {len(pids)} processes"

    def stop(self, event: dict) -> str:
        node = self.node(event)
        node.down = True
        if node.on_host is not None:
            return self._there(node, "stop")
        if node.db is None:
            return f"{node.name} was not running"
        node.db.handle.stopped_by_event = True
        try:
            server = psutil.Process(node.db.handle.pid)
            server.send_signal(node.db.family.STOP_SIGNAL)
            server.wait(STOP_TIMEOUT_S)
        except psutil.NoSuchProcess:
            pass
        except psutil.TimeoutExpired:
            self._signal(node, signal.SIGKILL)
            return f"{node.name} did not stop within {STOP_TIMEOUT_S} s; killed"
        return f"{node.name} stopped"

    def pause(self, event: dict) -> str:
        node = self.node(event)
        if node.on_host is not None:
            return self._there(node, "pause")
        node.paused = self._signal(node, signal.SIGSTOP)
        return f"SIGSTOP to {node.name}'s {len(node.paused)} processes"

    def resume(self, event: dict) -> str:
        node = self.node(event)
        if node.on_host is not None:
            return self._there(node, "resume")
        for pid in node.paused:
            with suppress(psutil.NoSuchProcess):
                psutil.Process(pid).send_signal(signal.SIGCONT)
        count, node.paused = len(node.paused), []
        return f"SIGCONT to {node.name}'s {count} processes"

    def start(self, event: dict) -> str:
        node = self.node(event)
        if not node.down:
            return f"{node.name} was running"
        if node.on_host is not None:  # its host's step stops what it started when the schedule ends
            said = self._there(node, "start")
            if node.name not in self.restarted:
                self.started.callback(node.on_host, "close")
        else:
            node.db = self.started.enter_context(node.open())
            said = f"{node.name} started, ready after {node.db.handle.ready_seconds:.2f} s"
        self.restarted.add(node.name)
        node.down = False
        return said

    def restart(self, event: dict) -> str:
        return f"{self.stop(event)}; {self.start(event)}"

    # --- links -----------------------------------------------------------------------------

    def cut(self, event: dict) -> str:
        self.network.cut(*self.link(event))
        return f"{event['target']} cut"

    def heal(self, event: dict) -> str:
        self.network.heal(*self.link(event))
        return f"{event['target']} healed"

    def delay(self, event: dict) -> str:
        a, b = self.link(event)
        self.network.set_latency(a, b, event["latency_ms"], event.get("jitter_ms", 0.0))
        return f"{event['target']} round trip +{event['latency_ms']} ms"

    def undelay(self, event: dict) -> str:
        a, b = self.link(event)
        latency, jitter = self.latency(a, b)
        self.network.set_latency(a, b, latency, jitter)
        return f"{event['target']} back to +{latency} ms"

    def loss(self, event: dict) -> str:
        self.network.set_loss(*self.link(event), event["percent"])
        return f"{event['target']} losing {event['percent']}%"

    def unloss(self, event: dict) -> str:
        self.network.set_loss(*self.link(event), 0)
        return f"{event['target']} losing nothing"

    # --- host ------------------------------------------------------------------------------

    def _spawn(self, key: str, argv: list[str], name: str) -> subprocess.Popen:
        with open(self.raw / f"{name}.stdout.txt", "ab") as out:  # the child holds its own copy
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd="/",
                                    start_new_session=True)
        self.children[key] = proc
        return proc

    def cpu_hog(self, event: dict) -> str:
        workers = int(event.get("workers", 0))  # stress-ng: 0 = one per CPU
        proc = self._spawn("cpu_hog", ["stress-ng", "--cpu", str(workers), "--quiet"], "cpu_hog")
        return f"stress-ng --cpu {workers} pid {proc.pid}"

    def cpu_unhog(self, event: dict, index: int) -> str:
        """SIGTERM to the hog now; its exit is awaited beside the schedule (on a busy host stress-ng takes
        100 ms or more to end, and an action planned for the same second must not wait for it)."""
        proc = self.children.pop("cpu_hog", None)
        if proc is None:
            return "no hog running"
        tree = _terminate(proc)
        self._background(index, lambda: _reap(proc, tree), "ended")
        return f"stress-ng pid {proc.pid} sent SIGTERM"

    def drop_caches(self, event: dict, index: int) -> str:
        return self._background(index, storage.drop_caches, "dropped (sync, then page cache, dentries, inodes)")

    def _background(self, index: int, work, said: str) -> str:
        """work() in a thread of its own (a sync may take seconds; the schedule goes on); its outcome
        noted when it ends."""
        def run():
            started = time.time()
            try:
                work()
                self.outcomes[index] = f"{said} after {time.time() - started:.2f} s"
            except Exception as e:  # noqa: BLE001 - its outcome, recorded
                self.outcomes[index] = f"failed after {time.time() - started:.2f} s: {e}"

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)
        return "started"

    def io_throttle(self, event: dict) -> str:
        node = self.node(event)
        if node.db is None or node.down:
            raise RuntimeError(f"{node.name} is not running")
        dev = blkio.device(node.db.handle.datadir)
        limits = blkio.limits(event)
        held = self.throttles.limit(node.name, node.pids(), dev, limits)
        said = ", ".join(f"{key} {format_size(value) if key.endswith('_bps') else value}"
                         for key, value in limits.items())
        return f"{node.name} ({held} process{'' if held == 1 else 'es'}) limited to {said} on device {dev}"

    def io_unthrottle(self, event: dict) -> str:
        node = self.node(event)
        dev = self.throttles.lift(node.name)
        return f"{node.name}'s IO on device {dev} unlimited" if dev else f"{node.name} had no IO limit"

    # --- server ----------------------------------------------------------------------------

    def sql(self, event: dict, index: int) -> str:
        node = self.node(event)
        db = node.db
        statement = event["statement"].rstrip().rstrip(";") + ";\n"
        self._background(index, lambda: db.family.admin_sql(db.handle, statement, db.conn.database), "done")
        return f"running on {node.name}"

    def command(self, event: dict, index: int) -> str:
        node = self.node(event)
        prefix = node.spec.enter() if node.spec is not None else []
        proc = self._spawn(f"command-{index}", prefix + [str(a) for a in event["argv"]], f"command-{index}")
        return f"pid {proc.pid} on {node.name}'s host"

    # --- the end ---------------------------------------------------------------------------

    def close(self, wait_s: float = 30.0) -> None:
        """Resume paused nodes, lift IO limits (every server back in its own blkio cgroup), stop hogs and
        commands still running (their outcome noted), wait a little for statements, and stop servers the
        events started."""
        for node in self.nodes.values():
            if node.paused:
                self.resume({"target": node.name})
        for key, proc in list(self.children.items()):
            if proc.poll() is None:
                _end(proc)
                if key.startswith("command-"):
                    self.outcomes[int(key.split("-")[1])] = "still running at the end of the window; stopped"
            elif key.startswith("command-"):
                self.outcomes[int(key.split("-")[1])] = f"exited with {proc.returncode}"
        self.throttles.close()
        deadline = time.monotonic() + wait_s
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        for node in self.nodes.values():  # the servers events started stop now: their samplers skip them
            if node.name in self.restarted:
                node.down = True
        self.started.close()


def _end(proc: subprocess.Popen) -> None:
    _reap(proc, _terminate(proc))


def _terminate(proc: subprocess.Popen) -> list[psutil.Process]:
    """SIGTERM to proc and its descendants; returns them, for _reap."""
    try:
        tree = [psutil.Process(proc.pid)] + psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    for p in tree:
        with suppress(psutil.NoSuchProcess):
            p.terminate()
    return tree


def _reap(proc: subprocess.Popen, tree: list[psutil.Process]) -> None:
    """Wait up to 5 s for a terminated tree, then SIGKILL what is left, and reap proc."""
    _, alive = psutil.wait_procs(tree, timeout=5)
    for p in alive:
        with suppress(psutil.NoSuchProcess):
            p.kill()
    proc.wait()


def sampler_reader(node: Node, elsewhere: Callable[[], dict] | None = None):
    """A Sampler's read() of a node: its counters and server_cpu_s (user + system CPU seconds of the
    server's process tree and of the children it has reaped, a running total: accounting.reading), or
    elsewhere's reading of them, where the server runs on another host (topology/hosts.counters_reader);
    nothing while an event has it down or paused."""
    def here() -> dict:
        cpu = accounting.reading([node.db.handle.pid])["cpu_s"]
        return node.db.family.counters(node.db.local) | {"server_cpu_s": cpu}

    def read() -> dict:
        if node.down or node.paused or node.db is None:
            return {}
        try:
            return (elsewhere or here)()
        except Exception:
            if node.down or node.paused or (elsewhere is None and not node.pids()):
                return {}
            raise
    return read

