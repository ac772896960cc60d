"""A topology cell's resources, entered into the repetition's stack in its order:

    filesystem of every node (each a copy of the cell's prepared image; the first is the run's own)
    → network (a namespace per host: client, every node; links with the declared round-trip times)
    → servers (the family's cluster module's start_cluster decides their order and sets replication up)
    → proxy (in the client's namespace, in front of the nodes that take writes)

The client's tool runs in the client's namespace (`client_argv`) and reaches the primary, or the
proxy, over its links. Every node's counters are sampled through its socket, from the host.
"""
from __future__ import annotations

import socket
from pathlib import Path

from dbsweep import database, engines, runtime, storage
from dbsweep.recipe import Recipe
from dbsweep.runtime.resources import Stack
from dbsweep.events.targets import Node, sampler_reader
from dbsweep.topology import proxied
from dbsweep.topology.nodes import NodeSpec, role
from dbsweep.topology.started import CLIENT, Topology

def links(recipe: Recipe, nodes: list[str]) -> list:
    """Every pair that talks: the client with each node, each node with each other node."""
    from dbsweep.topology.network import topology_links
    return topology_links(recipe.network, CLIENT, nodes)


def start(recipe: Recipe, fs, image: Path | None, scratch: Path, raw: Path, log, stack: Stack) -> Topology:
    """Start the cell's topology inside stack; fs is the run's filesystem (the first node's). A topology
    placed on hosts starts there instead (placed.py)."""
    from dbsweep.topology import placed, placement
    if placement.of(recipe.topology) is not None:
        return placed.start(recipe, image, raw, log, stack)
    from dbsweep.topology.network import network
    topology = recipe.topology
    names, kind = topology["nodes"], topology["replication"]
    roots, devices = [fs.path], {names[0]: list(fs.devices)}
    for name in names[1:]:
        node_fs = stack.enter("filesystem", f"{recipe.filesystem['type']} {name}",
                              storage.filesystem(recipe.filesystem, scratch / name, runtime.active, image))
        roots.append(node_fs.path)
        devices[name] = list(node_fs.devices)
    # The delayer holds the whole declared delay (its own trip comes on top: delivered.py's link check says so).
    # Taking its floor off (network's floor_ms) is measured in bench/link_delay.py, not yet used: a floor
    # measured once under load and kept would take too much off on a quieter run.
    net = stack.enter("network", topology["name"], network([CLIENT, *names], links(recipe, names), log,
                                                             runtime.active))
    specs = [NodeSpec(name=name, role=role(kind, i), index=i, address=net.addresses[name], port=database.free_port(),
                      root=root, netns=net.namespaces[name])
             for i, (name, root) in enumerate(zip(names, roots, strict=False))]

    openers = {}

    def start_node(node: NodeSpec, options: dict) -> database.Database:
        keep = raw if node.index == 0 else raw / node.name
        keep.mkdir(exist_ok=True)
        again = {k: v for k, v in options.items() if k not in family.FIRST_START_ONLY}  # e.g. no new cluster
        openers[node.name] = lambda: database.running(recipe, node.root, log, recipe.memory, keep=keep,
                                                      node=node, node_options=again)
        return stack.enter("server", f"{recipe.engine} {node.name}",
                           database.running(recipe, node.root, log, recipe.memory, keep=keep, node=node,
                                            node_options=options))

    family = engines.family(recipe.engine)
    client = net.addresses[CLIENT]
    dbs = engines.cluster(recipe.engine).start_cluster(recipe.engine, kind, topology["settings"], specs, start_node,
                                                       [client], log)
    dbs = {name: dbs[name] for name in names}
    first = dbs[names[0]]
    first, handle = proxied.front(recipe, specs, first, client, net.namespaces[CLIENT], log, stack)
    here = socket.gethostname()
    declared = topology.get("hosts", {})
    facts = {
        "name": topology["name"], "replication": kind,
        "nodes": [{"name": s.name, "role": s.role, "address": s.address, "port": s.port, "host": here,
                   "devices": devices[s.name],
                   **({"declared_host": declared[s.name]} if s.name in declared else {}), **s.facts}
                  for s in specs],
        "client": client, "network": net.facts | {"rtt_ms": net.measure_rtt()},
        "proxy": None if handle is None else handle.facts,
    }
    return Topology(first, dbs, specs, net, handle, facts, openers, [d for n in names for d in devices[n]])


def serve(recipe: Recipe, fs, image: Path | None, scratch: Path, raw: Path, log, stack: Stack):
    """The cell's servers entered into stack: its topology (nodes, network, proxy: start), or its one server.
    Returns (the server the client's tool reaches, the started Topology or None)."""
    if recipe.topology:
        topology = start(recipe, fs, image, scratch, raw, log, stack)
        return topology.target, topology
    return stack.enter("server", recipe.engine, database.running(recipe, fs.path, log, recipe.memory, keep=raw)), None


def rtt_at_end(topology, recipe: Recipe, record: dict) -> None:
    """The links' round trips measured again at the end of a window that ended well (run.json's
    topology.rtt_end_ms; the start's are the topology's own rtt_ms), for delivered.py's link check; not in
    a cell with timed events, which change the links."""
    if topology is not None and not recipe.events:
        record["topology"]["rtt_end_ms"] = topology.network.measure_rtt()


def latency(recipe: Recipe):
    """A link's declared round trip and jitter in ms, by the names of its two ends (a timed event that
    changes a link puts it back to these)."""
    def of(a: str, b: str) -> tuple[float, float]:
        net = recipe.network
        kind = "client_latency_ms" if CLIENT in (a, b) else "node_latency_ms"
        return net[kind], net["jitter_ms"]
    return of


def nodes(recipe: Recipe, db, topology, fs, raw: Path, log) -> list[Node]:
    """The cell's servers as timed events see them: each with a way to start it again on its datadir, or,
    placed on a host of its own, its job step there that acts on it (Topology.on_host)."""
    if topology is None:
        return [Node("primary", db, lambda: database.running(recipe, fs.path, log, recipe.memory,
                                                             keep=raw))]
    return [Node(spec.name, topology.nodes[spec.name], topology.open.get(spec.name), spec,
                 on_host=topology.on_host.get(spec.name)) for spec in topology.specs]


def sampling(nodes: list[Node], topology, raw: Path) -> database.Sampling:
    """The server's counters into raw/counters.jsonl; with a topology, that is its first node's (the
    primary's), and every other node's go to raw/counters-<node>.jsonl, the proxy's to counters-proxy.jsonl.
    A node a timed event took down leaves a gap. A placed topology's hosts' monitors start and stop with them."""
    samplers = []
    for i, node in enumerate(nodes):
        out = raw / ("counters.jsonl" if i == 0 else f"counters-{node.name}.jsonl")
        elsewhere = topology.readers.get(node.name) if topology is not None else None
        samplers.append(database.Sampler(sampler_reader(node, elsewhere), node.db.handle.datadir, out))
    if topology is not None and topology.proxy is not None:
        samplers.append(database.Sampler(topology.proxy.stats, None, raw / "counters-proxy.jsonl"))
    return database.Sampling(samplers + (topology.host_monitors if topology is not None else []))
