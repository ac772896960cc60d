"""One node of a placed topology on its own host (issue 34): what a Slurm job step runs there.

    srun --overlap --nodes=1 --ntasks=1 --nodelist=HOST python -m dbsweep.topology.host_step
    stdin: one JSON line {recipe, image, node: {name, role, index}, options: {server options}, raw}
        or {proxy: {kind, settings, backends, login}, node: {name: proxy}, raw}: the cell's proxy (serve_proxy)
    python -m dbsweep.topology.host_step --sweep      (the Slurm Epilog: release what a killed step left)

On that host, as a repetition does on one host (runtime.owned): it holds the host's own measuring lock,
sweeps what a dead run left there, and runs in a cgroup of its own with a guardian; it restores the
cell's image on the host's own storage (a copy, loop device and mount under SCRATCH, in the host's
mount namespace), starts the node's server with the options its topology gives it (replication's),
listening on the host's address (its hostname's, on the network between the hosts; never a wildcard),
and exposes its admin socket to the coordinator (relay.py), which sets the topology up through it with
the family's own start_cluster. Then it prints one JSON line, the node's facts (host, address, port,
datadir, server pid, the relay's port and token, the benchmark user's login), and holds everything
until its stdin closes or a signal stops it (scancel: SIGTERM), when it stops the server, unmounts and
detaches, and returns. Meanwhile it answers the coordinator's questions, one JSON line each (answer):
its clock, the round trip from here to another node's host, and a file of its server's run folder
(run_file: the error log, where a Galera joiner says how it got its state). Every process it starts is in the job
step (Slurm kills them with it) and in its cgroup.

Monitors (`monitors start` / `monitors stop`, around the measured window): vmstat, and iostat of the
node's own loop device, on this host and on its clock (the coordinator records the offset; collect puts
the rows on the client's clock).

Timed events (`event stop|kill|pause|resume|start`, `event close`: the coordinator's schedule asks at each
event's time, hosts.on_host): done here by a Targets over this one node (HostEvents), the mechanisms of one
host: a stopped or killed server is the events' (its exit is not a failure), one started again is started
with its first start's options but those a first start only takes (the family's FIRST_START_ONLY) on the
same port, address and datadir, and stopped at `event close` (the schedule's end) or with the step. The
relayed admin socket leads to whichever server runs.

The node's results (its server's config and logs, its monitors' output) go to RAW/<node>: where this
host sees the submitting results tree (a shared filesystem: the coordinator's probe file there holds
the spec's token), straight into it; where it does not, into a folder of the host's own, sent back whole
at the end on stdout (one JSON line: each file's bytes and sha256), which the coordinator writes into
RAW/<node> and checks byte for byte (hosts.node_on_host). The facts say which (`results`).

The login (user and password) and the relay's token go to the coordinator on stdout: through srun's
own channel, never on a command line, in a log or in a file.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dbsweep import accounting, database, engines, runtime, storage
from dbsweep.events.actions import ACTIONS, STEP
from dbsweep.events.targets import Node, Targets
from dbsweep.monitors import Monitors
from dbsweep.server_death import server_death
from dbsweep.recipe import Recipe
from dbsweep.runtime import cgroup
from dbsweep.runtime.resources import Stack
from dbsweep.runtime.signals import signals_raise
from dbsweep.topology import network, proxies, relay
from dbsweep.topology.nodes import NodeSpec

# Where a host keeps its copy of the image and its mount: its own storage, reachable by the server's user;
# and its records of what a node holds (mounts, loop devices, scratch), which a step killed by SIGKILL
# leaves for the host's Slurm Epilog (`python -m dbsweep.topology.host_step --sweep`) or its next step.
SCRATCH = Path(os.environ.get("DBSWEEP_HOST_SCRATCH", "/var/tmp/dbsweep-hosts"))
ACTIVE = Path(os.environ.get("DBSWEEP_HOST_ACTIVE", "/run/dbsweep/active"))


def host_address() -> str:
    """This host's address on the network between the hosts: what its own name resolves to."""
    return socket.gethostbyname(socket.gethostname())


PROBE = ".results-probe"  # in RAW/<node>: the spec's probe token, where the results tree is shared
SHARED, COPY_BACK = "shared", "copy-back"


def results_path(spec: dict) -> str:
    """SHARED when this host sees the coordinator's probe file in RAW/<node> (the same results tree),
    COPY_BACK when it does not (its own filesystem, or another at that path)."""
    try:
        seen = (Path(spec["raw"]) / spec["node"]["name"] / PROBE).read_text()
    except OSError:
        return COPY_BACK
    return SHARED if seen == spec["probe"] else COPY_BACK


def serve(spec: dict, log, stdin) -> None:
    """Start spec's node on this host, print its facts on stdout, hold it until stdin closes; then, when
    its results were kept here, print them (returned)."""
    recipe = Recipe.from_dict(spec["recipe"])
    node, host = spec["node"], socket.gethostname()
    SCRATCH.mkdir(parents=True, exist_ok=True)
    SCRATCH.chmod(0o755)
    scratch = SCRATCH / f"{os.getpid()}-{node['name']}"
    path = results_path(spec)
    with signals_raise(), runtime.owned(f"node {node['name']} of {spec['raw']}", ACTIVE, log):
        with storage.scratch_files(scratch, runtime.active):
            raw = Path(spec["raw"]) / node["name"] if path == SHARED else scratch / "results"
            raw.mkdir(parents=True, exist_ok=True)
            raw.chmod(0o755)
            with Stack(log) as stack:
                fs = stack.enter("filesystem", f"{recipe.filesystem['type']} {node['name']}",
                                 storage.filesystem(recipe.filesystem, scratch, runtime.active,
                                                    Path(spec["image"])))
                place(fs.path, spec.get("files") or {})
                # the hosts' own round trip to each later node's host, before any rule of theirs or this
                # host's delays it (they start after this one): what the link's added delay is measured from
                base = {f"{node['name']}-{peer}": rtt_ms(address)
                        for peer, address in (spec.get("later_peers") or {}).items()}
                stack.enter("network", f"link delays of {node['name']}",
                            network.host_delays([network.PeerDelay(**delay) for delay in spec.get("delays", [])],
                                                spec.get("comment", "dbsweep"), log, runtime.active))
                node_spec = NodeSpec(name=node["name"], role=node["role"], index=node["index"],
                                     address=host_address(), port=spec.get("port") or database.free_port(),
                                     root=fs.path)
                db = stack.enter("server", f"{recipe.engine} {node['name']}",
                                 database.running(recipe, fs.path, log, recipe.memory, keep=raw, node=node_spec,
                                                  node_options=spec["options"]))
                events = HostEvents(node_to_act_on(recipe, fs.path, raw, node_spec, spec["options"], db, log),
                                    raw, log)
                port, token = stack.enter("service", "admin socket relay",  # to the server running now
                                          relay.exposed(lambda: events.node.db.handle.socket, node_spec.address))
                stack.enter("event", "what the timed events started", events)
                facts = {"node": node["name"], "host": host, "address": node_spec.address, "port": node_spec.port,
                         "datadir": str(fs.path / database.DATADIR), "pid": db.handle.pid, "filesystem": fs.facts,
                         "cpus": sorted(os.sched_getaffinity(db.handle.pid)),
                         "socket_name": db.handle.socket.name, "relay_port": port, "relay_token": token.hex(),
                         "basedir": str(db.handle.basedir) if db.handle.basedir else None, "results": path,
                         "user": db.conn.user, "password": db.conn.password, "database": db.conn.database,
                         "base_rtt_ms": base}
                print(json.dumps(facts), flush=True)
                watch = HostMonitors(raw, fs.devices, events.node)
                with watch:
                    for line in stdin:  # the coordinator's questions, until it closes stdin (or a signal)
                        question = line.split()
                        said = watch.answer(question) or events.answer(question) \
                            or run_file(events.node.db, question) or answer(question)
                        print(json.dumps(said), flush=True)
                log.write(f"node {node['name']} on {host}: stopping\n")
            # the server stopped, its logs kept: the whole of raw goes back when it is not the shared tree's
            print(json.dumps({"returned": returned(raw) if path == COPY_BACK else {}}), flush=True)


def serve_proxy(spec: dict, log, stdin) -> None:
    """The cell's proxy on this host, a host of its own (spec["proxy"]: kind, settings, backends, the benchmark
    user's login for a proxy that authenticates clients), as a node's step holds its server: under this host's
    measuring lock, in a cgroup of its own, listening on the host's address; prints its facts (host, address,
    port, pid, the proxy's own facts, how its results come back), answers `stats` (its per-second numbers, for
    the coordinator's sampler), `monitors start` / `monitors stop` (this host's vmstat, into RAW/proxy as a
    node's) and `clock` until stdin closes, then stops it; then, when its results were kept here, prints them
    (returned)."""
    proxy, host = spec["proxy"], socket.gethostname()
    path = results_path(spec)
    with signals_raise(), runtime.owned(f"proxy of {spec['raw']}", ACTIVE, log):
        folder = Path(tempfile.mkdtemp(prefix="dbsweep-proxy-"))
        with storage.scratch_files(folder, runtime.active):
            raw = Path(spec["raw"]) / spec["node"]["name"] if path == SHARED else folder / "results"
            raw.mkdir(parents=True, exist_ok=True)
            raw.chmod(0o755)
            with proxies.proxy(proxy["kind"], proxy["settings"], (host_address(), database.free_port()),
                               [proxies.Backend(**backend) for backend in proxy["backends"]], folder, log,
                               login=tuple(proxy["login"])) as handle, HostMonitors(raw, [], None) as watch:
                print(json.dumps({"host": host, "address": handle.address, "port": handle.port, "pid": handle.pid,
                                  "facts": handle.facts, "results": path}), flush=True)
                for line in stdin:
                    question = line.split()
                    said = ({"stats": handle.stats()} if question == ["stats"] else None) \
                        or watch.answer(question) or answer(question)
                    print(json.dumps(said), flush=True)
                log.write(f"proxy on {host}: stopping\n")
            print(json.dumps({"returned": returned(raw) if path == COPY_BACK else {}}), flush=True)


def place(root: Path, files: dict[str, dict]) -> None:
    """Write the files the coordinator's family code staged for this node (hosts.staged: a Galera joiner's
    grastate.dat) into its filesystem, owned as the folder they go into (the server's user's datadir)."""
    for name, staged in files.items():
        path = (root / name).resolve()
        if root.resolve() not in path.parents:
            raise RuntimeError(f"staged file {name!r} is outside the node's filesystem")
        owner = path.parent.stat()
        path.write_text(staged["text"])
        path.chmod(staged["mode"])
        os.chown(path, owner.st_uid, owner.st_gid)


def node_to_act_on(recipe: Recipe, root: Path, raw: Path, spec: NodeSpec, options: dict, db, log) -> Node:
    """The node's server as the events' Targets take it: db, and how to start it again (its first start's
    options but those a first start only takes: a Galera member joins the cluster, it does not found one)."""
    again = {k: v for k, v in options.items() if k not in engines.family(recipe.engine).FIRST_START_ONLY}
    return Node(spec.name, db, lambda: database.running(recipe, root, log, recipe.memory, keep=raw, node=spec,
                                                        node_options=again), spec)


class HostEvents:
    """A placed node's timed events, done on its host (`event ACTION`): a Targets over this one node (its
    server, and a way to start it again), entered around the node's serving, closed with it (a server the
    events started stops then, and a paused one is resumed)."""

    def __init__(self, node: Node, raw: Path, log):
        self.node = node
        self.targets = Targets([node], None, None, raw, log)

    def __enter__(self) -> HostEvents:
        return self

    def __exit__(self, *exc) -> None:
        self.targets.close()

    def answer(self, question: list[str]) -> dict | None:
        """`event ACTION` (a placed=STEP action of events.actions, or close): {outcome: what was done, naming this
        host; paused: the pids it holds paused} or {error}; None for another question."""
        if len(question) != 2 or question[0] != "event":
            return None
        action = question[1]
        if action != "close" and not (action in ACTIONS and ACTIONS[action].placed == STEP):
            return {"error": f"event {action!r}: not an action a node's host does"}
        try:
            if action == "close":
                self.targets.close()
                done = "what the events started stopped"
            else:
                done = getattr(self.targets, action)({"target": self.node.name})
        except Exception as e:  # noqa: BLE001 - the coordinator's schedule records it as the event's error
            return {"error": f"{type(e).__name__}: {e} (on {socket.gethostname()})"}
        return {"outcome": f"{done} on {socket.gethostname()}", "paused": self.node.paused}


class HostMonitors:
    """This host's monitors (monitors.Monitors: vmstat, iostat of the node's devices) around the measured
    window, started and stopped by the coordinator's questions; stopped when the step ends. At the stop it
    also says whether the node's server outlived the window: a server that died there fails the
    repetition (a crash, retried), where the client's tool alone would call its lost connections a
    refusal; one a timed event took down did not die (node: events.targets.Node, its server now; None on a
    proxy's host, which has no server)."""

    def __init__(self, raw: Path, devices: list[str], node: Node | None):
        self.raw, self.devices, self.node, self.running = raw, devices, node, None

    def __enter__(self) -> HostMonitors:
        return self

    def __exit__(self, *exc) -> None:
        if self.running is not None:
            self.running.__exit__(None, None, None)
            self.running = None

    def answer(self, question: list[str]) -> dict | None:
        """`monitors start` / `monitors stop` (the latter with each monitor's CPU seconds, an error when one
        died inside the window, and server_died and said when the node's server is gone); `cpu`: the
        server's CPU seconds so far; None for another question."""
        # the server's process tree's CPU seconds, a running total (accounting.reading); a proxy's host has none
        if question == ["cpu"] and self.node is not None:
            return {"cpu_s": accounting.reading([self.node.db.handle.pid])["cpu_s"]}
        if question == ["monitors", "start"] and self.running is None:
            self.running = Monitors(self.raw, self.devices).__enter__()
            return {"monitors": self.running.commands, "clock": time.time()}
        if question == ["monitors", "stop"] and self.running is not None:
            running, self.running = self.running, None
            out = {}
            try:
                running.__exit__(None, None, None)
            except RuntimeError as e:
                out["error"] = str(e)
            gone = None if self.node is None or self.node.down else server_death(self.node.db)
            if gone:
                out["server_died"], out["said"] = gone
            return out | {"cpu_s": running.cpu_s}
        return None


def run_file(db, question: list[str]) -> dict | None:
    """`file NAME`: the text of a file of the node's server's run folder (its error log), for the family code
    on the coordinator's host (NodeSpec.run_file); a plain name only, nothing outside that folder. None for
    another question."""
    if len(question) != 2 or question[0] != "file":
        return None
    name = question[1]
    if "/" in name or name in (".", ".."):
        return {"error": f"file {name!r}: not a plain file name of the server's run folder"}
    path = db.handle.rundir / name
    try:
        return {"text": path.read_text(errors="replace")}
    except OSError as e:
        return {"error": f"file {name}: {e.strerror}"}


def returned(raw: Path) -> dict[str, dict]:
    """Every file below raw, by relative path: its bytes (base64) and sha256, for the coordinator to write
    and check."""
    out = {}
    for path in sorted(p for p in raw.rglob("*") if p.is_file()):
        data = path.read_bytes()
        out[str(path.relative_to(raw))] = {"sha256": hashlib.sha256(data).hexdigest(),
                                           "data": base64.b64encode(data).decode()}
    return out


def answer(question: list[str]) -> dict:
    """`clock`: this host's wall clock (the monitors' clock), for the coordinator's offset; `rtt ADDRESS`:
    the median round trip from here to another node's host."""
    if question == ["clock"]:
        return {"clock": time.time()}
    if len(question) == 2 and question[0] == "rtt":
        return {"rtt_ms": rtt_ms(question[1])}
    return {"error": f"unknown question {' '.join(question)!r}"}


def rtt_ms(address: str, count: int = 5) -> float:
    """The median round trip of count pings to address, in ms (nan: no answer), as topology/network.py
    measures a link on one host."""
    done = subprocess.run(["ping", "-n", "-U", "-c", str(count), "-i", "0.01", "-W", "2", address],
                          capture_output=True, text=True)
    times = [float(t) for t in re.findall(r"time=([0-9.]+) ms", done.stdout)]
    return statistics.median(times) if times else float("nan")


def sweep(log) -> list[str]:
    """Release what steps on this host that died left behind (as a repetition does before it starts):
    the processes in their cgroups first, then their mounts, loop devices and scratch files. Only the
    cgroups of steps this host's records name: on the test cluster the hosts share one cgroup tree, and
    each host's Epilog runs at the same moment."""
    owners = {record.get("pid") for record in _records() if record.get("host") == socket.gethostname()}
    released = []
    for left in cgroup.leftovers(cgroup.hierarchy()):
        if int(left.name.split("-", 1)[0]) in owners:
            killed = left.kill()
            left.remove()
            released.append(f"cgroup {left.name} ({len(killed)} processes killed)")
    released += storage.sweep_stale(ACTIVE)
    if released:
        log.write(f"dbsweep: released on {socket.gethostname()} what a killed node left: {released}\n")
    return released


def _records() -> list[dict]:
    out = []
    for entry in sorted(ACTIVE.glob("*.json")) if ACTIVE.is_dir() else []:
        try:
            out.append(json.loads(entry.read_text()))
        except (OSError, ValueError):
            continue
    return out


def main() -> int:
    log = sys.stderr
    if sys.argv[1:] == ["--sweep"]:
        sweep(log)
        return 0
    spec = json.loads(sys.stdin.readline())
    (serve_proxy if "proxy" in spec else serve)(spec, log, sys.stdin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
