"""A placed topology as a repetition uses it (issue 34): its nodes on their hosts (hosts.placed_nodes), the
client here, on the job's first host, which the placement names as the client's.

The repetition sees the same Topology as on one host (topology/cell.py), with what differs said here:

- the client's tool runs in this host's own network (no namespace to enter), against the primary's
  address on the network between the hosts;
- each node's Database reaches its server over that network (the benchmark user) and through its relayed
  admin socket (root); its handle has no pid and no datadir here (the server runs elsewhere: a death
  watch, CPU accounting, CPU pinning or a datadir size taken from this host would be another process's or
  nothing); its real pid, datadir and host are in the record's topology facts;
- the record's nodes carry `host`, where each ran (its step's hostname), beside what was declared of it
  (`declared_host`, `declared_constraint` with the host's `features`, or `declared_spread`: a host of its
  own; the client's `declared_client_host` or `declared_client_spread`), and `results`, how its files came
  back (host_step: shared or copy-back); `network` has each link's
  measured round trip and each host's clock offset;
- each node's host runs its own monitors around the measured window (host_monitors: started and stopped
  with the window's samplers), whose rows the tables carry with the node's host (host_tables.py); each
  second its server's CPU time is read there (readers: hosts.counters_reader).

- its proxy, if it has one, runs here, beside the client (as on one host, where it runs in the client's
  namespace), in front of the nodes on their hosts (proxied.front); or, where the placement names its own
  host (`proxy`), there, started by a job step (hosts.proxy_on_host), its numbers asked of it each second;
  the record's proxy carries `host` beside `declared_host` (the client's, or its own) and, on its own host,
  `results`, as a node's.

- its timed events' node actions (stop, kill, pause, resume, start, restart: events.actions' placed=STEP) are
  asked of the node's job step (hosts.on_host), which does them on its host at the schedule's time, with the
  same mechanisms as on one host (host_step.HostEvents); the event log's outcome names the host. An sql event
  runs here, as on one host, through the node's relayed admin socket (which leads to the server running now).

- an added link delay (`network:`) is added at both ends of each link, half each, as on one host: on each
  host (the client's here, each node's by its job step) an iptables rule, its comment naming the repetition,
  hands what arrives from the peer's host address to a user-space delayer (network.host_delays); the record's
  `network.links` declares each link's round trip beside the measured `rtt_ms` (delivered.py's link check).

Not built for a placed cell (refused at load): an added link delay with a proxy on a host of its own
(placement.check_cell); the events that act on a link or on a host, io_throttle, command (the events concern).
"""
from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path

from dbsweep.recipe import Recipe
from dbsweep.runtime.resources import Stack
from dbsweep.topology import hosts, placement
from dbsweep.topology.host_step import host_address
from dbsweep.topology.started import Topology

CLIENT = placement.CLIENT


class Links:
    """The network between the hosts as the repetition asks about it: where the client runs (here) and the
    links' round trips."""

    def __init__(self, nodes: dict[str, dict], links: list[dict]):
        self.nodes, self.links = nodes, links
        self.addresses = {CLIENT: host_address()} | {name: facts["address"] for name, facts in nodes.items()}

    def enter(self, host: str) -> list[str]:
        """The argv prefix that runs a program on host: the client's is this one (nothing to enter)."""
        if host != CLIENT:
            raise RuntimeError(f"{host} runs on {self.nodes[host]['host']}: only the client's programs run here")
        return []

    def measure_rtt(self) -> dict[str, float]:
        return hosts.link_rtts(self.nodes)

    @property
    def facts(self) -> dict:
        landed = {CLIENT: socket.gethostname()} | {name: facts["host"] for name, facts in self.nodes.items()}
        base = {link: ms for facts in self.nodes.values() for link, ms in facts.get("base_rtt_ms", {}).items()}
        return {"hosts": landed, "addresses": dict(self.addresses), "links": self.links, "base_rtt_ms": base,
                "method": "Slurm nodes of one job; latency: NFQUEUE user-space delayer at each end's input (half "
                          "each; an iptables rule on each host for what arrives from the peer's address); round "
                          "trips: ping from the client's host and from each node's host step, the hosts' own "
                          "(base_rtt_ms) before any delay rule; clocks: each host "
                          "step's time.time() between two of the client host's",
                "clocks": {name: facts["clock"] for name, facts in self.nodes.items()},
                # the CPUs each part may use on its host (the client's here, each node's server's there): hosts
                # of one machine confined to CPUs of their own (tests/slurm/cluster.sh's CLUSTER_CPUS) show it
                "cpus": {CLIENT: sorted(os.sched_getaffinity(0))}
                | {name: facts["cpus"] for name, facts in self.nodes.items()}}


def start(recipe: Recipe, image: Path | None, raw: Path, log, stack: Stack):
    """Start the cell's placed topology inside stack; returns a topology.started.Topology."""
    placement.check_cell(recipe.topology["name"], recipe)  # refused at load
    if image is None:
        raise RuntimeError(f"topology {recipe.topology['name']}: a placed topology starts from a prepared image")
    placed = placement.of(recipe.topology)
    nodes = stack.enter("server", f"{recipe.engine} nodes of {placed.topology}",
                        hosts.placed_nodes(recipe, image, raw, log))
    links = Links(nodes, hosts.declared_links(recipe))
    specs = [facts["spec"] for facts in nodes.values()]
    dbs = {name: _here(facts["db"]) for name, facts in nodes.items()}
    target, proxy, proxy_facts, proxy_watch = hosts.proxy_front(recipe, placed, specs, dbs[specs[0].name], raw, log,
                                                                stack)
    facts = {
        "name": recipe.topology["name"], "replication": recipe.topology["replication"],
        "nodes": [{"name": spec.name, "role": spec.role, "address": spec.address, "port": spec.port,
                   "host": nodes[spec.name]["host"], **placement.declared(placed, spec.name),
                   # the Slurm features of the host a node placed by constraint landed on, as Slurm lists them
                   **({"features": placement.features(nodes[spec.name]["host"])}
                      if spec.name in placed.constraints else {}),
                   "pid": nodes[spec.name]["pid"], "datadir": nodes[spec.name]["datadir"],
                   "filesystem": nodes[spec.name]["filesystem"], "devices": [],
                   "results": nodes[spec.name]["results"],
                   **nodes[spec.name]["topology"]} for spec in specs],
        "client": links.addresses[CLIENT], **_declared_client(placed),
        "network": _with_proxy_clock(links.facts, proxy_facts) | {"rtt_ms": links.measure_rtt()},
        "proxy": proxy_facts,
    }
    watches = [hosts.HostMonitors(name, facts) for name, facts in nodes.items()] \
        + ([proxy_watch] if proxy_watch is not None else [])
    readers = {name: hosts.counters_reader(facts) for name, facts in nodes.items()}
    on_host = {name: hosts.on_host(facts) for name, facts in nodes.items()}
    return Topology(target, dbs, specs, links, proxy, facts, {}, [], watches, readers, on_host)


def _declared_client(placed: placement.Placement) -> dict:
    """What the record says was declared of the client's host: its name, or (spread) a host of its own."""
    return {"declared_client_spread": True} if placed.spread else {"declared_client_host": placed.hosts[CLIENT]}


def _with_proxy_clock(network: dict, proxy_facts: dict | None) -> dict:
    """network's clocks with the proxy's host's offset, where it ran on a host of its own (its monitors'
    rows are put on the client's clock by it, as a node's: host_tables.other_hosts_system)."""
    if not proxy_facts or "clock" not in proxy_facts:
        return network
    return network | {"clocks": network["clocks"] | {placement.PROXY: proxy_facts.pop("clock")}}


def _here(db):
    """db as this host's monitors may use it: no pid, no datadir (its server runs on another host)."""
    return dataclasses.replace(db, handle=dataclasses.replace(db.handle, pid=0, datadir=None))
