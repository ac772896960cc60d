"""A topology placed on several hosts (issue 34): `topologies.<name>.hosts` names the host of the client and
of every node, or, for a node, a Slurm constraint (a feature of slurm.conf's nodes) its host must have, and the
cell becomes one Slurm job over those hosts.

    topologies: {semi: {replicas: 1, replication: semisync, hosts: {client: c1, primary: c2, replica1: c3}}}
    topologies: {semi: {replicas: 1, replication: semisync,
                        hosts: {client: c1, primary: c2, replica1: {constraint: ssd}}}}

Checked when the study loads (a placement names every node and the client, and only them); a run
without Slurm refuses it (every node would run on the one host, without a word); on Slurm, before any
job, `sbatch --test-only` asks Slurm whether it can give the cell its hosts (slurm.check_placements).
What a placed cell asks of Slurm: `--nodes=<distinct hosts> --nodelist=<them>` (sbatch_options).

A node placed by constraint: Slurm (22.05) does not combine a job's --nodelist with per-feature node counts
(`--constraint=ssd*1` beside `--nodelist=c1,c2` is "Requested node configuration is not available"), so Slurm
chooses its host when the cell is planned, as it would start a one-node job with that constraint beside the
other parts' hosts (`sbatch --test-only --constraint=F --exclude=<them>`: `planned`), and the cell's job asks
for that host in its node list. A constraint Slurm does not know is refused before any job in Slurm's words
("Invalid feature specification": the job's options then carry the constraint itself). In the job, each such
node runs on a node of the job's that no other part names and that has the feature (`landed`: the job's
nodes and their features as Slurm lists them); the run's record has where it landed and that host's
features (run.json topology.nodes[].host, features; declared_constraint).

The client is always named: it runs where Slurm runs the job's batch script, the job's first host.

The proxy (a cell of the `proxy` axis) runs beside the client, or on a host of its own named as `proxy`
(hosts.proxy_on_host; named, not by constraint); a cell without a proxy leaves that host out of its job
(settings.recipe).

The cell's run then starts each node on its host (placed.py, hosts.py, host_step.py).
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
from dataclasses import dataclass

from dbsweep import slurm
from dbsweep.errors import ConfigError

CLIENT, PROXY = "client", "proxy"
# A Slurm node's name as slurm.conf's NodeName takes one (no host list syntax: one host each).
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


CONSTRAINT = "constraint"
# A Slurm feature as slurm.conf's Features lists one (one feature, not an expression of several).
FEATURE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


@dataclass(frozen=True)
class Placement:
    """Where each part of a placed topology runs: role (client, primary, replica1, node2 …) -> its host, or
    {constraint: feature} (as declared)."""

    topology: str
    hosts: dict[str, str | dict]

    @property
    def named(self) -> dict[str, str]:
        """The parts placed on a host of their name: role -> host."""
        return {role: host for role, host in self.hosts.items() if isinstance(host, str)}

    @property
    def constraints(self) -> dict[str, str]:
        """The parts placed by constraint: role -> the feature their host must have."""
        return {role: host[CONSTRAINT] for role, host in self.hosts.items() if isinstance(host, dict)}

    def planned(self) -> dict[str, str | None]:
        """role -> its host: the named one, or the one Slurm would give a part placed by constraint now
        (chosen), None where Slurm does not say (it refuses the feature, or is not here)."""
        out: dict[str, str | None] = dict(self.named)
        for role, feature in self.constraints.items():
            out[role] = chosen(feature, tuple(host for host in out.values() if host))
        return {role: out[role] for role in self.hosts}

    @property
    def nodelist(self) -> list[str]:
        """The distinct hosts, in the order the topology names them (client first); a part placed by a
        constraint Slurm did not resolve, by its constraint."""
        return list(dict.fromkeys(host or f"{CONSTRAINT}={self.constraints[role]}"
                                  for role, host in self.planned().items()))

    def describe(self) -> str:
        """One line for the dry run: each part and its host, and what Slurm is asked for."""
        constraints, planned = self.constraints, self.planned()
        parts = ", ".join(f"{role} on {planned[role] or 'a host'}"
                          + (f" (constraint {constraints[role]})" if role in constraints else "")
                          for role in self.hosts)
        return f"topology {self.topology}: {parts} (one Slurm job: {' '.join(self.sbatch())})"

    def sbatch(self) -> list[str]:
        """The options that give a cell exactly its hosts: one job over them all; where Slurm did not resolve
        a constraint, the named hosts and the constraints (which Slurm then refuses in its words:
        slurm.check_placements)."""
        planned = self.planned()
        hosts = list(dict.fromkeys(host for host in planned.values() if host))
        unresolved = sorted({self.constraints[role] for role, host in planned.items() if host is None})
        count = len(hosts) + sum(1 for host in planned.values() if host is None)
        return [f"--nodes={count}", f"--nodelist={','.join(hosts)}"] \
            + ([f"--{CONSTRAINT}={'&'.join(unresolved)}"] if unresolved else [])


@functools.cache
def chosen(feature: str, beside: tuple[str, ...]) -> str | None:
    """The node Slurm would start a one-node job with constraint feature on, excluding the hosts beside
    (`sbatch --test-only`, which queues nothing); None where it would not (an unknown feature) or cannot
    be asked. Asked once per planning."""
    try:
        refused, nodes = slurm.test_only(["--nodes=1", f"--{CONSTRAINT}={feature}",
                                          f"--exclude={','.join(beside)}"])
    except OSError:
        return None
    hosts = slurm.hostnames(nodes) if refused is None and nodes else []
    return hosts[0] if hosts else None


def landed(placed: Placement) -> dict[str, str]:
    """role -> the host each part runs on in this Slurm job: a named part on its host; a part placed by
    constraint on a node of the job's (SLURM_JOB_NODELIST, in Slurm's order) that no other part runs on and
    whose features (features) have its constraint. Raises where the job has none such."""
    hosts = dict(placed.named)
    if not placed.constraints:
        return hosts
    free = [host for host in slurm.hostnames(os.environ.get("SLURM_JOB_NODELIST", "")) if host not in hosts.values()]
    for role, feature in placed.constraints.items():
        host = next((host for host in free if feature in features(host)), None)
        if host is None:
            raise RuntimeError(f"topology {placed.topology}: {role} (constraint {feature}): none of this job's "
                               f"other nodes ({', '.join(free) or 'none'}) has that feature")
        hosts[role] = host
        free.remove(host)
    return {role: hosts[role] for role in placed.hosts}


def features(host: str) -> list[str]:
    """host's Slurm features, as Slurm lists them (`scontrol show node`: ActiveFeatures); none when it does
    not say."""
    done = subprocess.run(["scontrol", "show", "node", "--oneliner", host], capture_output=True, text=True)
    found = re.search(r"\bActiveFeatures=(\S+)", done.stdout) if done.returncode == 0 else None
    return [] if found is None or found.group(1) == "(null)" else found.group(1).split(",")


def declared(placed: Placement, role: str) -> dict:
    """What the run's record says was declared of role's host: declared_host, or declared_constraint."""
    if role in placed.constraints:
        return {"declared_constraint": placed.constraints[role]}
    return {"declared_host": placed.hosts[role]}


def check(where: str, hosts: dict, nodes: list[str]) -> None:
    """Refuse, naming key and value, a placement that does not place exactly the client and every node
    (and the proxy, or not) on a host of one name each (a part left out would run nowhere anyone declared),
    or that puts two parts on one host (the second would wait for ever for the measuring lock the first
    holds there)."""
    roles = [CLIENT, *([PROXY] if PROXY in hosts else []), *nodes]
    for role, host in hosts.items():
        if role not in roles:
            raise ConfigError(f"{where}.hosts.{role}: {host!r}: no such node ({', '.join(roles)})")
        if isinstance(host, dict):
            _check_constraint(f"{where}.hosts.{role}", role, host)
        elif not isinstance(host, str) or not HOST_NAME.fullmatch(host):
            raise ConfigError(f"{where}.hosts.{role}: {host!r}: not a host name (letters, digits, '_', '.', "
                              f"'-'; one host, not a list) nor {{{CONSTRAINT}: <a Slurm feature>}}")
    missing = [role for role in roles if role not in hosts]
    if hosts and missing:
        raise ConfigError(f"{where}.hosts: {hosts!r}: {', '.join(missing)} not placed; name the host of the "
                          f"client and of every node")
    shared = {host: [role for role in roles if hosts.get(role) == host] for host in hosts.values()
              if isinstance(host, str)}
    for host, parts in shared.items():
        if len(parts) > 1:
            raise ConfigError(f"{where}.hosts: {hosts!r}: {' and '.join(parts)} on {host}: each part needs a host "
                              f"of its own (each holds its host's measuring lock while the cell runs)")


def _check_constraint(where: str, role: str, host: dict) -> None:
    """A part placed by constraint: a node's, of one Slurm feature."""
    if role == CLIENT:
        raise ConfigError(f"{where}: {host!r}: the client's host is named (the job's first host, where Slurm runs "
                          f"its batch script and so the client)")
    if role == PROXY:
        raise ConfigError(f"{where}: {host!r}: the proxy's host is named (a constraint places a node)")
    if set(host) != {CONSTRAINT}:
        raise ConfigError(f"{where}: {host!r}: a host by constraint is {{{CONSTRAINT}: <a Slurm feature>}}")
    feature = host[CONSTRAINT]
    if not isinstance(feature, str) or not FEATURE.fullmatch(feature):
        raise ConfigError(f"{where}.{CONSTRAINT}: {feature!r}: not a Slurm feature's name (letters, digits, '_', "
                          f"'.', '-'; one feature, not an expression)")


def of(topology: dict | None) -> Placement | None:
    """The placement of a cell's recipe topology (None: every node on the job's host, in namespaces)."""
    if not topology or not topology.get("hosts"):
        return None
    order = [CLIENT, *([PROXY] if PROXY in topology["hosts"] else []), *topology["nodes"]]
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
