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

Every part on a host of its own that Slurm chooses, none named (`hosts: spread`):

    topologies: {galera3: {nodes: 3, replication: galera, hosts: spread}}

Each part (the client, then each node) is planned as a part placed by constraint is, with no feature: the
node Slurm would start a one-node job on beside the parts planned before it (`sbatch --test-only --nodes=1
--exclude=<them>`: chosen); the hosts found are then given out in the order Slurm gives a job its nodes
(in_job_order), the first, where Slurm runs the batch script, to the client. A cell with more parts than
Slurm has nodes is refused before any job in Slurm's words (the job then asks for one node more than its
node list names). In the job the client is its first host (landed; hosts.placed_nodes checks that it runs
there) and each node lands on the next node of the job's; the run's record says `declared_spread` of each
node and of the client, and delivered.py checks that each one's host is no other part's.

Otherwise the client is named: it runs where Slurm runs the job's batch script, the job's first host.

The proxy (a cell of the `proxy` axis) runs beside the client, or on a host of its own named as `proxy`
(hosts.proxy_on_host; named, not by constraint; with `hosts: spread`, beside the client); a cell without a
proxy leaves that host out of its job (settings.recipe).

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
from dbsweep.topology.link_floor import DELAYER_FLOOR_MS

CLIENT, PROXY = "client", "proxy"
# A Slurm node's name as slurm.conf's NodeName takes one (no host list syntax: one host each).
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


CONSTRAINT = "constraint"
# `hosts: spread`: the client and every node each on a host of its own, all chosen by Slurm.
SPREAD = "spread"
# the study's Slurm partition (cluster.partition; None: Slurm's default), set by the workflow (rules/common.smk):
# the hosts Slurm would choose are asked of the partition the job goes to
PARTITION: str | None = None
# A Slurm feature as slurm.conf's Features lists one (one feature, not an expression of several).
FEATURE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


@dataclass(frozen=True)
class Placement:
    """Where each part of a placed topology runs: role (client, primary, replica1, node2 …) -> its host, or
    {constraint: feature} (as declared), or {} (a host of its own that Slurm chooses: every part's, when
    spread, as `hosts: spread` declares)."""

    topology: str
    hosts: dict[str, str | dict]
    spread: bool = False

    @property
    def declared(self) -> str | dict:
        """The placement as the study declares it (for messages): spread, or role -> host."""
        return SPREAD if self.spread else self.hosts

    @property
    def named(self) -> dict[str, str]:
        """The parts placed on a host of their name: role -> host."""
        return {role: host for role, host in self.hosts.items() if isinstance(host, str)}

    @property
    def constraints(self) -> dict[str, str]:
        """The parts placed by constraint: role -> the feature their host must have."""
        return {role: host[CONSTRAINT] for role, host in self.hosts.items() if isinstance(host, dict) and host}

    @property
    def by_slurm(self) -> dict[str, str | None]:
        """The parts whose host Slurm chooses: role -> the feature it must have, None for any (spread)."""
        return {role: host.get(CONSTRAINT) for role, host in self.hosts.items() if isinstance(host, dict)}

    def planned(self) -> dict[str, str | None]:
        """role -> its host: the named one, or the one Slurm would give a part it chooses the host of now
        (chosen), None where Slurm does not say (it refuses the feature, has no node left, or is not here).
        Spread, the hosts in the order Slurm gives them to the job, the client's first (in_job_order)."""
        out: dict[str, str | None] = dict(self.named)
        for role, feature in self.by_slurm.items():
            out[role] = chosen(feature, tuple(host for host in out.values() if host), PARTITION)
        if self.spread and all(out.values()):
            out = dict(zip(self.hosts, in_job_order(tuple(out[role] for role in self.hosts), PARTITION),
                           strict=True))
        return {role: out[role] for role in self.hosts}

    @property
    def nodelist(self) -> list[str]:
        """The distinct hosts, in the order the topology names them (client first); a part Slurm did not find
        a host for, by its constraint, or by its name (spread)."""
        return list(dict.fromkeys(host or (f"{CONSTRAINT}={self.constraints[role]}" if role in self.constraints
                                           else f"{SPREAD}-{role}")
                                  for role, host in self.planned().items()))

    def describe(self) -> str:
        """One line for the dry run: each part and its host, and what Slurm is asked for."""
        constraints, planned = self.constraints, self.planned()
        parts = ", ".join(f"{role} on {planned[role] or 'a host'}"
                          + (f" (constraint {constraints[role]})" if role in constraints else "")
                          for role in self.hosts)
        spread = f" ({SPREAD}: each part on a host of its own)" if self.spread else ""
        return f"topology {self.topology}{spread}: {parts} (one Slurm job: {' '.join(self.sbatch())})"

    def sbatch(self) -> list[str]:
        """The options that give a cell exactly its hosts: one job over them all; where Slurm did not find a
        part's host, the hosts found and the constraints, or (spread) one node more than they are, which Slurm
        then refuses in its words (slurm.check_placements)."""
        planned = self.planned()
        hosts = list(dict.fromkeys(host for host in planned.values() if host))
        unresolved = sorted({self.constraints[role] for role, host in planned.items()
                             if host is None and role in self.constraints})
        count = len(hosts) + sum(1 for host in planned.values() if host is None)
        return [f"--nodes={count}"] + ([f"--nodelist={','.join(hosts)}"] if hosts else []) \
            + ([f"--{CONSTRAINT}={'&'.join(unresolved)}"] if unresolved else [])


@functools.cache
def chosen(feature: str | None, beside: tuple[str, ...], partition: str | None = None) -> str | None:
    """The node Slurm would start a one-node job on in partition (None: Slurm's default), with constraint
    feature (None: any node), excluding the hosts beside (`sbatch --test-only`, which queues nothing); None
    where it would not (an unknown feature, no node left) or cannot be asked. Asked once per planning."""
    try:
        refused, nodes = slurm.test_only(["--nodes=1", *([f"--{CONSTRAINT}={feature}"] if feature else []),
                                          *([f"--exclude={','.join(beside)}"] if beside else [])], partition)
    except OSError:
        return None
    hosts = slurm.hostnames(nodes) if refused is None and nodes else []
    return hosts[0] if hosts else None


@functools.cache
def in_job_order(hosts: tuple[str, ...], partition: str | None = None) -> tuple[str, ...]:
    """hosts in the order Slurm would give a job over them its nodes (slurm.conf's, not the node list's; the
    first runs the batch script) in partition, as `sbatch --test-only` says; as they are where it does not."""
    try:
        refused, nodes = slurm.test_only([f"--nodes={len(hosts)}", f"--nodelist={','.join(hosts)}"], partition)
    except OSError:
        return hosts
    ordered = tuple(slurm.hostnames(nodes)) if refused is None and nodes else ()
    return ordered if sorted(ordered) == sorted(hosts) else hosts


def landed(placed: Placement) -> dict[str, str]:
    """role -> the host each part runs on in this Slurm job (SLURM_JOB_NODELIST, in Slurm's order): a named part
    on its host; a client Slurm chose (spread) on the job's first host, where Slurm runs the batch script; a
    node Slurm chose on a node of the job's that no other part runs on and, placed by constraint, whose
    features (features) have it. Raises where the job has none such."""
    hosts = dict(placed.named)
    if not placed.by_slurm:
        return hosts
    job = slurm.hostnames(os.environ.get("SLURM_JOB_NODELIST", ""))
    if CLIENT in placed.by_slurm:
        if not job:
            raise RuntimeError(f"topology {placed.topology}: the client runs on the job's first host, and this "
                               f"is no Slurm job's (SLURM_JOB_NODELIST {os.environ.get('SLURM_JOB_NODELIST')!r})")
        hosts[CLIENT] = job[0]
    free = [host for host in job if host not in hosts.values()]
    for role, feature in placed.by_slurm.items():
        if role == CLIENT:
            continue
        host = next((host for host in free if feature is None or feature in features(host)), None)
        if host is None:
            why = (f"constraint {feature}): none of this job's other nodes ({', '.join(free) or 'none'}) has that "
                   f"feature" if feature else f"a host of its own): this job has no node left ({', '.join(job)})")
            raise RuntimeError(f"topology {placed.topology}: {role} ({why}")
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
    """What the run's record says was declared of role's host: declared_host, declared_constraint, or
    declared_spread (a host of its own, no other part's)."""
    if role in placed.constraints:
        return {"declared_constraint": placed.constraints[role]}
    if placed.spread:
        return {"declared_spread": True}
    return {"declared_host": placed.hosts[role]}


def check(where: str, hosts: dict | str, nodes: list[str]) -> None:
    """Refuse, naming key and value, a placement that is not `spread` and does not place exactly the client
    and every node (and the proxy, or not) on a host of one name each (a part left out would run nowhere
    anyone declared), or that puts two parts on one host (the second would wait for ever for the measuring
    lock the first holds there). The schema lets any string through: only spread means something."""
    if not isinstance(hosts, dict):
        if hosts != SPREAD:
            raise ConfigError(f"{where}.hosts: {hosts!r}: neither {SPREAD} (the client and every node each on a "
                              f"host of its own, chosen by Slurm) nor a map of each part to its host")
        return
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
    if topology["hosts"] == SPREAD:
        return Placement(topology["name"], {role: {} for role in [CLIENT, *topology["nodes"]]}, spread=True)
    order = [CLIENT, *([PROXY] if PROXY in topology["hosts"] else []), *topology["nodes"]]
    return Placement(topology["name"], {role: topology["hosts"][role] for role in order})


def refuse_local(placements: dict[str, Placement]) -> None:
    """A run whose jobs run here cannot honour a placement: refuse it, in one line, before any job."""
    for name, placement in placements.items():
        raise ConfigError(f"topologies.{name}.hosts: {placement.declared!r}: placement across hosts runs on Slurm "
                          f"only (--workflow-profile workflow/profiles/slurm); this run's jobs run on this host, "
                          f"where every node would run")


def check_cell(path: str, recipe) -> None:
    """Refuse a placed cell (recipe: its Recipe) with what a placed topology does not run: an added link delay
    with its proxy on a host of its own (that host's links would run without it, without a word). Its timed
    events' node actions run on the node's host (the events concern refuses the others at load)."""
    topology = recipe.topology
    placed = of(topology)
    if placed is None:
        return
    added = {key: value for key, value in (recipe.network or {}).items() if value}
    # a placed link's delay is always the user-space delayer's (network.host_delays), whatever this planning
    # host's kernel has: below its round trip the link would run at the floor, not at what the study says
    for key, value in added.items():
        if key.endswith("latency_ms") and value < DELAYER_FLOOR_MS:
            raise ConfigError(f"{path}: network.{key}: {value!r} is below what a placed link's delay can deliver: "
                              f"the user-space delayer on each host adds about {DELAYER_FLOOR_MS} ms of round trip "
                              f"(BENCHMARKS.md, link_delay); declare 0 or at least {DELAYER_FLOOR_MS}")
    if added and PROXY in placed.hosts:
        raise ConfigError(f"{path}: network {added!r}: an added delay to a proxy on a host of its own "
                          f"({topology['name']}'s proxy on {placed.hosts[PROXY]}) is not built yet (issue 34); "
                          f"exclude the combination, or run the proxy beside the client")
