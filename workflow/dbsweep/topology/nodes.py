"""One server of a topology, as the repetition starts it."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dbsweep.topology.network import enter_argv


@dataclass
class NodeSpec:
    """A node: a server on a filesystem of its own (a copy of the cell's prepared image), listening on
    its address (its namespace's, or 127.0.0.1 without a network) and port."""

    name: str  # "primary", "replica1", "node2": the node column of every per-node table
    role: str  # "primary", "replica" or "member" (a Galera node)
    index: int  # 0-based position in the topology; MariaDB's server_id is index + 1
    address: str
    port: int
    root: Path  # its filesystem's root: datadir root/data, credentials.json
    netns: str | None = None  # the network namespace it runs in; None: the host's (loopback)
    facts: dict = field(default_factory=dict)  # what the manifest records of it
    # a file of its server's run folder, by name, copied here from the host it runs on (a placed node's:
    # hosts.placed_nodes); None: the run folder is on this host
    fetch: Callable[[str], Path] | None = field(default=None, repr=False)

    def run_file(self, rundir: Path, name: str) -> Path:
        """Where this host reads a file of the node's server's run folder (its error log, which says how a
        Galera joiner got its state): rundir's own, or a copy fetched now from the node's host."""
        return self.fetch(name) if self.fetch is not None else rundir / name

    def enter(self, user: str | None = None) -> list[str]:
        """The argv prefix that runs a program in this node's namespace (as user, when given)."""
        return enter_argv(self.netns, user)


def role(kind: str | None, index: int) -> str:
    if kind == "galera":
        return "member"
    return "primary" if index == 0 else "replica"
