"""The nodes of a placed topology started on their hosts, from the job's first host (issue 34).

Inside the cell's Slurm job (one job over its hosts: placement.py), each node's server is started on
its host by a job step (`srun --overlap --nodelist=HOST`) running topology/host_step.py; this module
is the other end: it starts the step, hands it the node's spec on its stdin, waits for the node's facts,
and on exit closes the step's stdin (the node stops, unmounts and detaches on its host) and waits for
the step to end. A step that does not end in time is cancelled by Slurm (scancel of the step), so
nothing of it is left on its host. The step's last line holds the node's results when its host does not
share the results tree (copy_back writes and checks them); HostMonitors starts and stops the host's
monitors around the measured window.
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import secrets
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from collections.abc import Iterator

from dbsweep import database, engines, manifest, runtime
from dbsweep.recipe import Recipe
from dbsweep.runtime.resources import Stack
from dbsweep.runtime.signals import signals_raise
from dbsweep.topology import host_step, network, placement, proxied, proxies, relay
from dbsweep.topology.nodes import role
from dbsweep.topology.host_step import host_address, rtt_ms
from dbsweep.topology.nodes import NodeSpec

PACKAGE = Path(__file__).resolve().parents[2]  # workflow/: what the step imports dbsweep from
READY_S = 300  # restore the image, start the server, let the clients in
STOP_S = 120


# What the client's host reads back from each node's server, over the network between the hosts: where it
# runs (the family's variables: MariaDB's hostname, datadir, port; PostgreSQL's data_directory, port).
IDENTITY = ("hostname", "datadir", "data_directory", "port")


@contextmanager
def placed_nodes(recipe: Recipe, image: Path, raw: Path, log) -> Iterator[dict[str, dict]]:
    """Every node of recipe's placed topology running on its host (one job step each) and replicating as
    its topology says, from this process on the client's host; yields node name -> facts (host_step.py's,
    less the login and the relay's token; `db`: the node's database.Database as this host reaches it;
    `topology`: what the family's start_cluster recorded of it; `delivered`: the server's own identity,
    read over the network from here as the benchmark user; `clock`: its host's clock offset)."""
    placed = placement.of(recipe.topology)
    if placed is None:
        raise RuntimeError(f"topology {recipe.topology['name']} is not placed on hosts")
    # where each part runs in this job (one Slurm chose the host of: here); the client where this runs: the
    # host it names, or (spread) the job's first host, where Slurm runs the batch script
    on = placement.landed(placed)
    here = socket.gethostname()
    if on[placement.CLIENT] != here:
        raise RuntimeError(f"placed nodes start from the client's host ({on[placement.CLIENT]}); this is {here}")
    family = engines.family(recipe.engine)
    kind = recipe.topology["replication"]
    with ExitStack() as stack:
        local = Path(tempfile.mkdtemp(prefix="dbsweep-placed-"))  # the relayed sockets and option files
        stack.callback(shutil.rmtree, local, True)
        # Each node's address is its host's and its port is chosen here, both known before any starts (a
        # primary lets its replicas in by address; a Galera member lists every member's address and port).
        # Its root, for the family's start_cluster, is a staging folder here: what it writes there (a Galera
        # joiner's grastate.dat) goes to the node's filesystem on its host before its server starts.
        names = recipe.topology["nodes"]
        specs = [NodeSpec(name=name, role=role(kind, index), index=index,
                          address=socket.gethostbyname(on[name]), port=port, root=local / "stage" / name)
                 for index, (name, port) in enumerate(zip(names, ports(len(names)), strict=True))]
        for node in specs:
            (node.root / database.DATADIR).mkdir(parents=True)
        addresses = {placement.CLIENT: host_address()} | {node.name: node.address for node in specs}
        comment = delay_comment(raw)
        # the hosts' own round trip from the client's to each node's, before any delay rule (delivered.py
        # checks what each link adds beyond it); each node's step measures its own to the later nodes
        base = {node.name: rtt_ms(node.address) for node in specs}
        # the client's host's ends of its links (each node's step adds its own ends)
        stack.enter_context(network.host_delays(peer_delays(recipe, placement.CLIENT, addresses), comment, log,
                                                runtime.active))
        nodes = {}

        def start(node: NodeSpec, options: dict) -> database.Database:
            spec = {"recipe": recipe.as_dict(), "image": str(image), "raw": str(raw), "options": options,
                    "node": {"name": node.name, "role": node.role, "index": node.index}, "port": node.port,
                    "files": staged(node.root), "comment": comment,
                    "delays": [dataclasses.asdict(d) for d in peer_delays(recipe, node.name, addresses)],
                    "later_peers": {later.name: later.address for later in specs[node.index + 1:]}}
            facts = stack.enter_context(node_on_host(on[node.name], spec, log))
            if facts["address"] != node.address:
                raise RuntimeError(f"node {node.name} on {facts['host']}: its server listens on "
                                   f"{facts['address']}, not on {node.address}, its host's address here")
            facts["base_rtt_ms"] = {f"{placement.CLIENT}-{node.name}": base[node.name]} | facts["base_rtt_ms"]
            nodes[node.name] = facts
            node.fetch = fetcher(facts["step"], local / "fetched" / node.name)
            return stack.enter_context(_reached(recipe, family, node, facts, local))

        cluster = engines.cluster(recipe.engine)
        # the benchmark user logs in from the client's host, and from the proxy's where it has one of its own
        clients = [host_address()] + ([socket.gethostbyname(on[placement.PROXY])] if placement.PROXY in on else [])
        dbs = cluster.start_cluster(recipe.engine, kind, recipe.topology["settings"], specs, start, clients, log)
        for node in specs:
            facts = nodes[node.name]
            facts |= {"db": dbs[node.name], "spec": node, "topology": dict(node.facts)}
            shown = dict(family.variables(facts["db"].conn))
            facts["delivered"] = {key: shown[key] for key in IDENTITY if key in shown}
            facts["clock"] = clock_offset(facts["step"])
        yield nodes


def declared_links(recipe: Recipe) -> list[dict]:
    """The placed topology's links as the record lists them (a, b, the added round trip and its jitter, as on
    one host: the client with each node, each node with each later one), for delivered.py's link check."""
    return [{"a": link.a, "b": link.b, "latency_ms": link.latency_ms, "jitter_ms": link.jitter_ms}
            for link in network.topology_links(recipe.network, placement.CLIENT, recipe.topology["nodes"])]


def peer_delays(recipe: Recipe, me: str, addresses: dict[str, str]) -> list[network.PeerDelay]:
    """me's ends (the client's, or a node's) of its links with an added delay: what arrives from each peer's
    address held half the link's round trip, ±half its jitter, as each end does on one host (network.py); one
    queue per peer (its place among the client and the nodes)."""
    order = list(addresses)
    out = []
    for link in network.topology_links(recipe.network, placement.CLIENT, recipe.topology["nodes"]):
        if me not in (link.a, link.b) or link.latency_ms <= 0:
            continue
        peer = link.b if me == link.a else link.a
        out.append(network.PeerDelay(addresses[peer], order.index(peer), link.latency_ms / 2, link.jitter_ms / 2))
    return out


def delay_comment(raw: Path) -> str:
    """The comment naming a repetition's delay rules on every host (iptables takes up to 256 characters)."""
    return f"dbsweep {str(raw)[-240:]}"


def ports(count: int) -> list[int]:
    """count distinct ports, free on this host, for the nodes' servers on theirs (a node's step fails with its
    server's words where its host has one taken)."""
    chosen: list[int] = []
    while len(chosen) < count:
        port = database.free_port()
        if all(abs(port - other) > 3 for other in chosen):  # a Galera member also listens on port + 1 .. + 3
            chosen.append(port)
    return chosen


def staged(root: Path) -> dict[str, dict]:
    """The files the family's start_cluster wrote under a node's staging root, for its step to write into the
    node's filesystem (host_step.place): relative path -> its text and mode."""
    return {str(path.relative_to(root)): {"text": path.read_text(), "mode": path.stat().st_mode & 0o777}
            for path in sorted(root.rglob("*")) if path.is_file()}


@contextmanager
def _reached(recipe: Recipe, family, node: NodeSpec, facts: dict, local: Path) -> Iterator[database.Database]:
    """The node's server as this host reaches it: over the network as the benchmark user (conn, and a 0600
    sysbench option file here), and as root through its admin socket, relayed (relay.py)."""
    folder = local / node.name
    folder.mkdir()
    with relay.relayed(folder / facts.pop("socket_name"), facts["address"], facts["relay_port"],
                       bytes.fromhex(facts.pop("relay_token"))) as path:
        handle = engines.Handle(engine=recipe.engine, port=facts["port"], socket=path, rundir=folder,
                                datadir=Path(facts["datadir"]), pid=facts["pid"],
                                basedir=Path(facts["basedir"]) if facts["basedir"] else None)
        conn = family.Conn(host=facts["address"], port=facts["port"], socket=None, user=facts.pop("user"),
                           password=facts.pop("password"), database=facts.pop("database"))
        option_file = folder / "sysbench.cfg"
        database.write_secret(option_file, "\n".join(family.sysbench_options(conn, recipe.engine)) + "\n")
        yield database.Database(recipe.engine, family, handle, conn, option_file, conn, node.name)


ANSWER_S = 30
# One question at a time on a step's channel (the counters' sampler asks too), a lock per step (by its srun's
# pid): a timed event that starts one node's server again does not hold up the other nodes' samplers.
ASKING: dict[int, threading.Lock] = {}


def ask(step: subprocess.Popen, question: str, timeout: float = ANSWER_S) -> dict:
    """A node's host step's answer to one question (host_step.answer, HostMonitors.answer, HostEvents.answer)."""
    with ASKING.setdefault(step.pid, threading.Lock()):
        step.stdin.write(question + "\n")
        step.stdin.flush()
        line = _line(step, timeout)
    if not line:
        raise RuntimeError(f"a node's job step did not answer {question!r}")
    return json.loads(line)


def on_host(facts: dict):
    """A placed node's events.targets.Node.on_host: a timed event's action (stop, kill, pause, resume, start;
    close: stop what the events started) asked of its job step, which does it on its host (host_step.HostEvents);
    returns what the step said, raises with its words when it could not. A start may take as long as the node's
    first start; a stop, as long as the server's clean shutdown there (events.targets.STOP_TIMEOUT_S)."""
    step = facts["step"]

    def act(action: str) -> dict:
        said = ask(step, f"event {action}", READY_S if action in ("start", "close") else STOP_S)
        if "error" in said:
            raise RuntimeError(said["error"])
        return said
    return act


def fetcher(step: subprocess.Popen, folder: Path):
    """NodeSpec.fetch of a placed node: a file of its server's run folder, asked of its step now (host_step.run_file)
    and written into folder here (0600: a server's log is not for every user of this host)."""
    def fetch(name: str) -> Path:
        said = ask(step, f"file {name}")
        if "text" not in said:
            raise RuntimeError(f"a node's job step could not send {name}: {said.get('error')}")
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = folder / name
        path.touch(mode=0o600)
        path.write_text(said["text"])
        return path
    return fetch


def counters_reader(facts: dict):
    """A counters Sampler's read() of a placed node (topology.cell.sampling): its family's counters over the
    network, and server_cpu_s, its server's process tree's CPU seconds as its host reads them (asked of its
    step each second: the server's pid means nothing here)."""
    db = facts["db"]

    def read() -> dict:
        return db.family.counters(db.local) | {"server_cpu_s": ask(facts["step"], "cpu")["cpu_s"]}
    return read


def clock_offset(step: subprocess.Popen, tries: int = 5) -> dict:
    """How far the node's host's wall clock is from this one's, in ms (theirs minus ours), from the exchange
    with the shortest round trip: its clock is read between our t0 and t1, so the offset is known to within
    half that round trip (`within_ms`; the round trip goes through srun's relay of the step's stdio)."""
    best = None
    for _ in range(tries):
        t0 = time.time()
        theirs = ask(step, "clock")["clock"]
        t1 = time.time()
        if best is None or t1 - t0 < best[1] - best[0]:
            best = (t0, t1, theirs)
    t0, t1, theirs = best
    return {"offset_ms": round((theirs - (t0 + t1) / 2) * 1000, 3), "within_ms": round((t1 - t0) / 2 * 1000, 3),
            "method": "host step's time.time() between two of the client host's, shortest of "
                      f"{tries} exchanges"}


def link_rtts(nodes: dict[str, dict]) -> dict[str, float]:
    """"a-b" -> the median ping round trip of each link of a placed topology, in ms: from the client's host
    to each node's, and from each node's host to every later node's (asked of its step)."""
    out = {f"{placement.CLIENT}-{name}": rtt_ms(facts["address"]) for name, facts in nodes.items()}
    names = list(nodes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            out[f"{a}-{b}"] = ask(nodes[a]["step"], f"rtt {nodes[b]['address']}")["rtt_ms"]
    return out


def main(args: list[str]) -> int:
    """`python -m dbsweep.topology.hosts SPEC.json`, on the client's host inside the cell's job, as a repetition
    there holds them (runtime.owned: this host's measuring lock, a repetition cgroup): start the placed nodes
    and the cell's proxy, if it has one (proxy_front: beside the client, or on its own host), start each host's
    monitors, write
    RAW/hosts.json (each node's facts, no login; the proxy's), hold them SPEC's hold_s seconds (or until a
    signal), stop them. SPEC: {recipe, image, raw, hold_s}."""
    spec = json.loads(Path(args[0]).read_text())
    raw = Path(spec["raw"])
    raw.mkdir(parents=True, exist_ok=True)
    log = sys.stderr
    recipe = Recipe.from_dict(spec["recipe"])
    with signals_raise(), runtime.owned(f"placed cell of {raw}", raw / ".active", log), Stack(log) as stack:
        nodes = stack.enter("server", "placed nodes", placed_nodes(recipe, Path(spec["image"]), raw, log))
        first = next(iter(nodes.values()))
        _, proxy, proxy_facts, proxy_watch = proxy_front(recipe, placement.of(recipe.topology),
                                                         [facts["spec"] for facts in nodes.values()], first["db"],
                                                         raw, log, stack)
        shown = {name: {k: v for k, v in facts.items() if k not in ("db", "step", "spec")}
                 for name, facts in nodes.items()}
        counters = {name: facts["db"].family.counters(facts["db"].conn) for name, facts in nodes.items()}
        with ExitStack() as watching:  # each host's monitors, as in a measured window
            for name, facts in nodes.items():
                watching.enter_context(HostMonitors(name, facts))
            if proxy_watch is not None:
                watching.enter_context(proxy_watch)
            manifest.write_json(raw / "hosts.json", {
                "client": socket.gethostname(), "nodes": shown, "rtt_ms": link_rtts(nodes),
                "links": declared_links(recipe), "counters": counters,
                "proxy": None if proxy is None else proxy_facts | {"pid": proxy.pid, "stats": proxy.stats()}})
            hold(nodes, spec.get("hold_s", 0))
    return 0


def hold(nodes: dict[str, dict], seconds: float) -> None:
    """Keep the nodes up for seconds; raise as soon as one's step ends (its node is gone: the cell failed)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name, facts in nodes.items():
            if facts["step"].poll() is not None:
                raise RuntimeError(f"node {name} on {facts['host']}: its job step ended (exit "
                                   f"{facts['step'].returncode}) while it was serving")
        time.sleep(0.5)


def step_argv(host: str) -> list[str]:
    """The job step that runs one node on host: one task there, beside the job's other steps."""
    return ["srun", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={host}", "--quiet",
            f"--job-name=dbsweep-node@{host}", sys.executable, "-m", "dbsweep.topology.host_step"]


@contextmanager
def node_on_host(host: str, spec: dict, log) -> Iterator[dict]:
    """spec's node running on host (spec: recipe, image, node, options, raw; host_step.py); yields its facts
    (host, address, port, datadir, pid, login; `results`: how its results come back, with, once it has
    stopped, the files sent back and their sha256). Raises with the step's last words when it ends before
    its node is ready, and when a file it sent back does not arrive whole."""
    env = os.environ | {"PYTHONPATH": str(PACKAGE)}
    folder = Path(spec["raw"]) / spec["node"]["name"]
    folder.mkdir(parents=True, exist_ok=True)
    probe = secrets.token_hex(16)
    (folder / host_step.PROBE).write_text(probe)
    step = subprocess.Popen(step_argv(host), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env,
                            text=True)
    results = {}
    try:
        step.stdin.write(json.dumps(spec | {"probe": probe}) + "\n")
        step.stdin.flush()
        line = _line(step, READY_S)
        if not line:
            raise RuntimeError(f"node {spec['node']['name']} on {host}: its job step ended (exit {step.wait()}) "
                               f"before its server was ready; its log is in the run's log")
        facts = json.loads(line)
        results["path"] = facts.pop("results")
        yield facts | {"step": step, "results": results}
    finally:
        (folder / host_step.PROBE).unlink(missing_ok=True)
        last = _stop(step)
    if results.get("path") == host_step.COPY_BACK:
        results["files"] = copy_back(last, folder, f"node {spec['node']['name']} on {host}")


def proxy_front(recipe: Recipe, placed: placement.Placement, specs: list[NodeSpec], first: database.Database,
                raw: Path, log, stack: Stack) -> tuple[database.Database, object, dict | None, HostMonitors | None]:
    """The cell's proxy, if it has one: on its own host where the placement names one (proxy_on_host), else
    beside the client, here (proxied.front). Returns (what the client's tool reaches, the proxy's handle or
    None, its facts for the record: its host beside the one declared, its host's clock offset; its host's
    monitors for the measured window, None beside the client, whose host's monitors the run starts)."""
    if placement.PROXY not in placed.hosts:
        target, proxy = proxied.front(recipe, specs, first, host_address(), None, log, stack)
        # declared beside the client: on the host the placement names for it, or (spread) the one it landed on
        facts = None if proxy is None else proxy.facts | {
            "host": socket.gethostname(),
            "declared_host": placed.named.get(placement.CLIENT) or placement.landed(placed)[placement.CLIENT]}
        return target, proxy, facts, None
    host = placed.hosts[placement.PROXY]
    proxy, facts = stack.enter("service", f"{recipe.proxy['name']} on {host}",
                               proxy_on_host(host, recipe, specs, (first.conn.user, first.conn.password), raw, log))
    return (proxied.through(first, proxy.address, proxy.port), proxy,
            proxy.facts | {"declared_host": host, "clock": clock_offset(facts["step"])},
            HostMonitors(placement.PROXY, facts))


@contextmanager
def proxy_on_host(host: str, recipe: Recipe, specs: list[NodeSpec], login: tuple[str, str], raw: Path,
                  log) -> Iterator[tuple[proxies.ProxyHandle, dict]]:
    """The cell's proxy on a host of its own (its placement's `proxy`), started there by a job step
    (host_step.serve_proxy) in front of the nodes that take writes at their hosts' addresses; yields its
    handle as on one host, its numbers asked of the step each second, its facts with `host` and `results`
    (how its monitors' files come back to RAW/proxy, as a node's: node_on_host, the files sent back filled
    in once its step has stopped); and the step's facts."""
    spec = {"raw": str(raw), "node": {"name": placement.PROXY},
            "proxy": {"kind": proxied.kind(recipe), "settings": proxied.settings(recipe),
                      "backends": [dataclasses.asdict(b) for b in proxied.backends(recipe, specs)],
                      "login": list(login)}}
    with node_on_host(host, spec, log) as facts:
        step = facts["step"]
        yield proxies.ProxyHandle(proxied.kind(recipe), facts["address"], facts["port"],
                                  facts["facts"] | {"host": facts["host"], "results": facts["results"]},
                                  sample=lambda: ask(step, "stats")["stats"], pid=facts["pid"]), facts


def copy_back(last: str, folder: Path, who: str) -> dict[str, str]:
    """Write the files a node's step sent back (its last line: host_step.returned) into folder, each read
    back and checked against the sha256 its host computed; relative path -> sha256."""
    try:
        files = json.loads(last)["returned"]
    except (ValueError, KeyError, TypeError):
        raise RuntimeError(f"{who}: its results were kept on its host and its step ended without sending them "
                           f"back") from None
    out = {}
    for name, sent in files.items():
        path = (folder / name).resolve()
        if folder.resolve() not in path.parents:
            raise RuntimeError(f"{who}: sent back {name!r}, outside its results folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(sent["data"]))
        got = hashlib.sha256(path.read_bytes()).hexdigest()
        if got != sent["sha256"]:
            raise RuntimeError(f"{who}: {name} arrived with sha256 {got}, its host's is {sent['sha256']}")
        out[name] = got
    return out


class HostMonitors:
    """A node's host's monitors (host_step.HostMonitors) as the measured window's sampler list takes one
    (database.Sampling): started on its host at the window's start, stopped at its end; error: what went
    wrong there (a monitor that died inside the window). Its stop raises when the node's server died in the
    window (host_step.HostMonitors), so that the run fails as for a server that died on one host."""

    def __init__(self, name: str, facts: dict):
        self.name, self.facts, self.error, self.cpu_s = name, facts, None, {}

    def __enter__(self) -> HostMonitors:
        said = ask(self.facts["step"], "monitors start")
        if "monitors" not in said:
            raise RuntimeError(f"node {self.name} on {self.facts['host']}: its monitors did not start: {said}")
        return self

    def __exit__(self, *exc) -> None:
        try:
            said = ask(self.facts["step"], "monitors stop")
        except (OSError, RuntimeError, ValueError) as e:  # its step is gone: hold() or the run says why
            said = {"error": f"its monitors could not be stopped ({e})"}
        if "error" in said:
            self.error = RuntimeError(f"node {self.name} on {self.facts['host']}: {said['error']}")
        self.cpu_s = said.get("cpu_s", {})
        if "server_died" in said:  # the repetition failed: a crash, not the client's refusal
            raise RuntimeError(f"node {self.name} on {self.facts['host']}: {said['server_died']}\n"
                               f"the server's last words: {said['said']}")


def _line(step: subprocess.Popen, timeout: float) -> str:
    """The step's first line of output, or '' when it ends or says nothing within timeout."""
    with selectors.DefaultSelector() as sel:
        sel.register(step.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            return ""
    return step.stdout.readline()


def _stop(step: subprocess.Popen) -> str:
    """Close the step's stdin (its node stops and cleans up on its host) and wait, reading what it says last
    (returned); after STOP_S, signal srun, which has Slurm end the step on its host. Returns its last
    line ('' when it said nothing)."""
    with suppress(OSError):
        step.stdin.close()
    deadline = time.monotonic() + STOP_S
    last = ""
    while time.monotonic() < deadline:
        line = _line(step, deadline - time.monotonic())
        if not line:
            break
        last = line
    while step.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if step.poll() is None:
        step.terminate()  # srun forwards it to the step's task, then Slurm kills what is left
        try:
            step.wait(timeout=60)
        except subprocess.TimeoutExpired:
            step.kill()
            step.wait()
    return last


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
