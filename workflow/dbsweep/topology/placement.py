"""A topology placed on several hosts (issue 34): `topologies.<name>.hosts` names the host of the client and
of every node, and the cell becomes one Slurm job over those hosts.

    topologies: {semi: {replicas: 1, replication: semisync, hosts: {client: c1, primary: c2, replica1: c3}}}

Checked when the study loads (a placement names every node and the client, and only them); a run
without Slurm refuses it (every node would run on the one host, without a word); on Slurm, before any
job, `sbatch --test-only` asks Slurm whether it can give the cell its hosts (slurm.check_placements).
What a placed cell asks of Slurm: `--nodes=<distinct hosts> --nodelist=<them>` (sbatch_options).

The cell's run then starts each node on its host (placed.py, hosts.py, host_step.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from dbsweep.errors import ConfigError

CLIENT = "client"
# A Slurm node's name as slurm.conf's NodeName takes one (no host list syntax: one host each).
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


@dataclass(frozen=True)
class Placement:
    """Where each part of a placed topology runs: role (client, primary, replica1, node2 …) -> host."""

    topology: str
    hosts: dict[str, str]

    @property
    def nodelist(self) -> list[str]:
        """The distinct hosts, in the order the topology names them (client first)."""
        return list(dict.fromkeys(self.hosts.values()))

    def describe(self) -> str:
        """One line for the dry run: each part and its host, and what Slurm is asked for."""
        parts = ", ".join(f"{role} on {host}" for role, host in self.hosts.items())
        return f"topology {self.topology}: {parts} (one Slurm job: {' '.join(self.sbatch())})"

    def sbatch(self) -> list[str]:
        """The options that give a cell exactly its hosts: one job over them all."""
        return [f"--nodes={len(self.nodelist)}", f"--nodelist={','.join(self.nodelist)}"]


def check(where: str, hosts: dict, nodes: list[str]) -> None:
    """Refuse, naming key and value, a placement that does not place exactly the client and every node
    on a host of one name each (a part left out would run nowhere anyone declared), or that puts two parts
    on one host (the second would wait for ever for the measuring lock the first holds there)."""
    roles = [CLIENT, *nodes]
    for role, host in hosts.items():
        if role not in roles:
            raise ConfigError(f"{where}.hosts.{role}: {host!r}: no such node ({', '.join(roles)})")
        if not isinstance(host, str) or not HOST_NAME.fullmatch(host):
            raise ConfigError(f"{where}.hosts.{role}: {host!r}: not a host name (letters, digits, '_', '.', "
                              f"'-'; one host, not a list)")
    missing = [role for role in roles if role not in hosts]
    if hosts and missing:
        raise ConfigError(f"{where}.hosts: {hosts!r}: {', '.join(missing)} not placed; name the host of the "
                          f"client and of every node")
    shared = {host: [role for role in roles if hosts.get(role) == host] for host in hosts.values()}
    for host, parts in shared.items():
        if len(parts) > 1:
            raise ConfigError(f"{where}.hosts: {hosts!r}: {' and '.join(parts)} on {host}: each part needs a host "
                              f"of its own (each holds its host's measuring lock while the cell runs)")


def of(topology: dict | None) -> Placement | None:
    """The placement of a cell's recipe topology (None: every node on the job's host, in namespaces)."""
    if not topology or not topology.get("hosts"):
        return None
    order = [CLIENT, *topology["nodes"]]
    return Placement(topology["name"], {role: topology["hosts"][role] for role in order})


def refuse_local(placements: dict[str, Placement]) -> None:
    """A run whose jobs run here cannot honour a placement: refuse it, in one line, before any job."""
    for name, placement in placements.items():
        raise ConfigError(f"topologies.{name}.hosts: {placement.hosts!r}: placement across hosts runs on Slurm "
                          f"only (--workflow-profile workflow/profiles/slurm); this run's jobs run on this host, "
                          f"where every node would run")


def check_cell(path: str, recipe) -> None:
    """Refuse a placed cell (recipe: its Recipe) with what a placed topology does not run: an added link delay
    (which would otherwise be dropped without a word). Its proxy runs on the client's host (placed.py); its
    timed events' node actions on the node's host (the events concern refuses the others at load)."""
    topology = recipe.topology
    if of(topology) is None:
        return
    added = {key: value for key, value in (recipe.network or {}).items() if value}
    if added:
        raise ConfigError(f"{path}: network {added!r}: an added delay between hosts ({topology['name']} is placed "
                          f"on hosts) is not built yet (issue 34): their round trip is the network's own, measured "
                          f"and recorded (run.json topology.network.rtt_ms); exclude the combination")
