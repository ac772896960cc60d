"""A started topology: what a repetition uses of it, whether its nodes run in namespaces on this host
(topology/cell.py) or on hosts of their own (topology/placed.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

from dbsweep import database
from dbsweep.topology.nodes import NodeSpec

CLIENT = "client"


@dataclass
class Topology:
    """What the run uses of a started topology."""

    target: database.Database  # where the client connects: the primary (or first member), or the proxy
    nodes: dict[str, database.Database]  # node name -> its server, in the topology's order
    specs: list[NodeSpec]
    network: object  # topology.network.Network
    proxy: object | None  # topology.proxies.ProxyHandle
    facts: dict = field(default_factory=dict)  # for run.json: nodes, links (measured round trips), proxy
    open: dict = field(default_factory=dict)  # node name -> () -> a context starting its server again
    devices: list = field(default_factory=list)  # every node's block devices (iostat watches them all)
    # what the measured window starts and stops beside its samplers on other hosts: each placed node's
    # host's monitors (topology.hosts.HostMonitors); none on one host, where the run's own monitors see all
    host_monitors: list = field(default_factory=list)
    # node name -> a counters Sampler's read() where a node's server is not this host's process (placed)
    readers: dict = field(default_factory=dict)
    # node name -> what asks a placed node's job step to act on its server there (events.targets.Node.on_host)
    on_host: dict = field(default_factory=dict)

    def client_argv(self, argv: list[str]) -> list[str]:
        """argv run on the client's host (its namespace)."""
        return self.network.enter(CLIENT) + argv
