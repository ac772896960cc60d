"""What a study declares about topologies: named topologies, link settings and proxies, checked when the
study loads, and the part of a cell's recipe they shape.

    axes:   topology: [single, replica-semisync, galera3]   proxy: [none, haproxy]   network: [lan, az]
    topologies: {replica-semisync: {replicas: 1, replication: semisync, semisync_timeout_ms: 2000},
                 galera3: {nodes: 3, replication: galera}}
    network: {client_latency_ms: 0.5, node_latency_ms: 1}     # or networks: {lan: {…}, az: {…}} + the axis
    proxies: {haproxy-first: {type: haproxy, balance: first}}

Only a cell with one of these axes has a topology in its recipe: a study without them runs (and
caches) exactly as before.
"""
from __future__ import annotations

import functools
from pathlib import Path

from dbsweep import engines, servers, versions
from dbsweep.concern import Concern, Draft
from dbsweep.matrix import Cell
from dbsweep.topology import link_floor, placement
from dbsweep.topology import proxies as proxy_kinds
from dbsweep.errors import ConfigError, shown

AXES = ("topology", "proxy", "network")
KEYS = ("topologies", "network", "networks", "proxies")  # the study's top-level keys this concern reads
SINGLE = "single"
NO_PROXY = "none"
BUILTIN_PROXIES = {"haproxy": {"type": "haproxy", "balance": "roundrobin"}}
LINK_DEFAULTS = {"client_latency_ms": 0.0, "node_latency_ms": 0.0, "jitter_ms": 0.0}
# What a replication kind is counted in: primary + replicas, or members of a cluster.
COUNTED_IN = {"async": "replicas", "semisync": "replicas", "sync": "replicas", "galera": "nodes"}
ONLY_WITH = {"semisync_timeout_ms": "semisync", "sync_standbys": "sync"}


def check(config: dict, axes: dict) -> None:
    """Refuse, naming key and value, what the schema cannot: axis values that name nothing, a
    topology's counts for another kind of replication, settings of another kind, an unknown proxy."""
    topologies = config.get("topologies", {})
    for name, spec in topologies.items():
        where = f"topologies.{name}"
        if name == SINGLE:
            raise ConfigError(f"{where}: {shown(spec)}: single is built in (one server); choose another name")
        kind = spec["replication"]
        counted = COUNTED_IN[kind]
        other = "nodes" if counted == "replicas" else "replicas"
        if other in spec:
            raise ConfigError(f"{where}.{other}: {spec[other]!r}: {kind} replication counts {counted}, not {other}")
        if counted not in spec:
            raise ConfigError(f"{where}.{counted}: missing ({kind} replication needs it)")
        for key, needs in ONLY_WITH.items():
            if key in spec and kind != needs:
                raise ConfigError(f"{where}.{key}: {spec[key]!r} applies to {needs} replication, not {kind}")
        if kind == "sync" and spec.get("sync_standbys", 1) > spec["replicas"]:
            raise ConfigError(f"{where}.sync_standbys: {spec['sync_standbys']!r} is more than its "
                              f"{spec['replicas']} replicas")
        placement.check(where, spec.get("hosts", {}), node_names(spec))
    proxies = _proxies(config)
    for name, spec in proxies.items():
        proxy_kinds.check_settings(spec["type"], {k: v for k, v in spec.items() if k != "type"},
                                   f"proxies.{name}")
    for axis in AXES:
        for value in axes.get(axis, []):
            check_value(config, axis, value, f"axes.{axis}")
    check_floor(config)
    if "network" in axes and "network" in config:
        raise ConfigError(f"network: {config['network']!r}: the network axis chooses from networks:; "
                          f"move these settings there")
    if "network" in axes and "topology" not in axes:
        raise ConfigError(f"axes.network: {axes['network']!r}: links join the nodes of a topology; "
                          f"add the topology axis (e.g. topology: [single])")


FLOOR_SHARE = 0.75  # a declared delay refused below this share of the host's measured floor


def check_floor(config: dict) -> None:
    """Refuse a link delay below the least this host's delay mechanism adds (link_floor: measured once per
    host): the link would run at the floor, not at what the study says. 0 (no delay) is always delivered.
    A delay within FLOOR_SHARE of the floor loads: the floor is one measurement of a host whose load moves it
    (0.36-0.44 ms quiet, more under a test suite), and what each link delivered is read back at run time
    (delivered.py's link check) and a deviation there keeps its cells out of comparisons."""
    declared = [(f"network.{key}", value) for key, value in config.get("network", {}).items()]
    declared += [(f"networks.{name}.{key}", value) for name, links in config.get("networks", {}).items()
                 for key, value in (links or {}).items()]
    for where, value in declared:
        if not where.endswith(("client_latency_ms", "node_latency_ms")) or not 0 < value < link_floor.MEASURE_BELOW_MS:
            continue
        floor = link_floor.floor()
        if value < FLOOR_SHARE * floor.floor_ms:
            raise ConfigError(f"{where}: {value!r} is below what a link delay can deliver on this host: the "
                              f"{floor.mechanism} adds at least {floor.floor_ms} ms of round trip ({floor.how}), "
                              f"so the link would run at about {floor.floor_ms} ms; declare 0 or at least "
                              f"{floor.floor_ms}")


def check_value(config: dict, axis: str, value, where: str) -> None:
    """A value of the topology, proxy or network axis names something the study or dbsweep defines (an axis
    value or an include rule's: the same check)."""
    known = {"topology": [SINGLE, *config.get("topologies", {})], "proxy": [NO_PROXY, *_proxies(config)],
             "network": list(config.get("networks", {}))}[axis]
    if str(value) not in known:
        defined = {"topology": "topologies", "proxy": "proxies", "network": "networks"}[axis]
        raise ConfigError(f"{where}: {value!r} is not defined (define it under {defined}:"
                          f"{'' if not known else ' or use ' + ', '.join(known)})")


def _proxies(config: dict) -> dict[str, dict]:
    out = {name: dict(spec) for name, spec in BUILTIN_PROXIES.items()}
    for name, spec in config.get("proxies", {}).items():
        if name == NO_PROXY:
            raise ConfigError(f"proxies.{name}: {shown(spec)}: none means no proxy; choose another name")
        out[name] = {"type": spec.get("type", name)} | spec
        if out[name]["type"] not in proxy_kinds.KINDS:
            raise ConfigError(f"proxies.{name}.type: missing (the name {name!r} is not a proxy program)")
        if out[name]["type"] == "haproxy":
            out[name] = {"balance": "roundrobin"} | out[name]
    return out


def has_topology(cell: dict) -> bool:
    return any(axis in cell for axis in AXES)


def node_names(spec: dict | None) -> list[str]:
    """The nodes of a topology entry (None: single): primary, replica1 … or node1 …"""
    if spec is None:
        return ["primary"]
    if COUNTED_IN[spec["replication"]] == "nodes":
        return [f"node{i + 1}" for i in range(spec["nodes"])]
    return ["primary"] + [f"replica{i + 1}" for i in range(spec["replicas"])]


def recipe(config: dict, cell: dict) -> dict:
    """The recipe keys of a topology cell: topology (name, replication, nodes, settings), network (the
    links' round-trip times), proxy (None or its settings). Empty for a cell without topology axes."""
    if not has_topology(cell):
        return {}
    name = str(cell.get("topology", SINGLE))
    spec = None if name == SINGLE else config.get("topologies", {})[name]
    settings = {k: v for k, v in (spec or {}).items() if k not in ("replication", "replicas", "nodes", "hosts")}
    links = config.get("networks", {})[cell["network"]] if "network" in cell else config.get("network", {})
    proxy = str(cell.get("proxy", NO_PROXY))
    # A placement (topology/placement.py): the hosts of the client and of every node, one Slurm job over them;
    # the run's record (topology/cell.py's declared_host) is checked against where each node ran.
    # A proxy's host is the cell's only where it has a proxy; `hosts: spread` (every part on a host of its own,
    # the proxy beside the client) is kept as it is.
    hosts = (spec or {}).get("hosts")
    if hosts and hosts != placement.SPREAD:
        hosts = {role: host for role, host in hosts.items() if role != placement.PROXY or proxy != NO_PROXY}
    placed = {"hosts": hosts} if hosts else {}
    return {
        "topology": {"name": name, "replication": spec["replication"] if spec else None,
                     "nodes": node_names(spec), "settings": settings} | placed,
        "network": LINK_DEFAULTS | links,
        "proxy": None if proxy == NO_PROXY else {"name": proxy} | _proxies(config)[proxy],
    }


def not_applicable(engine: str, recipe_part: dict, in_process: bool, cold_start: bool,
                   basedir: str | None = None) -> str | None:
    """Why a topology cell cannot run on engine (on the build in basedir), or None."""
    if not recipe_part:
        return None
    topology = recipe_part["topology"]
    kind = topology["replication"]
    if in_process:
        return "its client runs inside dbsweep on the host, not on the topology's client host"
    if cold_start:
        return "server.cold_start restarts one server; restarting a topology is not built"
    if kind is None:
        return None
    family = engines.family(engine)
    kinds = family.REPLICATION.get(engine, ())
    if kind not in kinds:
        can = f"{engine} replicates {', '.join(kinds)}" if kinds else f"{engine} has no replication in dbsweep"
        return f"{topology['name']}: {kind} replication does not apply ({can})"
    try:  # what the build itself cannot run
        family.check_replication(engine, kind, Path(basedir) if basedir else None)
    except ConfigError as e:
        return f"{topology['name']}: {e}"
    return None


def check_cell(engine: str, recipe_part: dict) -> None:
    """Refuse (ConfigError) a topology's settings the cell's server family would refuse."""
    if not recipe_part or recipe_part["topology"]["replication"] is None:
        return
    topology = recipe_part["topology"]
    spec = topology["settings"] | {"replicas": len(topology["nodes"]) - 1}
    engines.cluster(engine).check_cluster_settings(topology["replication"], spec, f"topologies.{topology['name']}")


def _not_applicable(draft: Draft, cell: Cell) -> str | None:
    """Why the cell's topology cannot run its engine or workload (not_applicable), or None."""
    values = cell.as_dict()
    workload = draft.workload(cell)
    if workload is None or "engine" not in values or not has_topology(values):
        return None
    family = engines.ENGINES[values["engine"]]
    basedir = versions.basedir(draft, family, str(values.get(versions.AXIS, servers.DEBIAN)))
    return not_applicable(values["engine"], recipe(draft.config, values), workload.measure is not None,
                          draft.server.get("cold_start", False), basedir)


def _check_cells(draft: Draft, cells: list[Cell]) -> None:
    """Each database cell's topology settings as its server family takes them (check_cell)."""
    for cell in cells:
        if draft.database(cell):
            check_cell(cell["engine"], recipe(draft.config, cell.as_dict()))


def placed_cells(cells: list[Cell], recipe) -> dict[str, placement.Placement]:
    """The cells whose topology is placed on hosts (placement.of), by path, for their Slurm jobs (common.smk);
    a placed cell with what a placed topology does not run yet (placement.check_cell) is refused, in one line,
    before any job. recipe(cell): the cell's Recipe (Study.recipe)."""
    out = {}
    for cell in cells:
        if cell.get(AXES[0]) is None:
            continue
        cell_recipe = recipe(cell)
        placed = placement.of(cell_recipe.topology)
        if placed is not None:
            placement.check_cell(cell.path, cell_recipe)
            out[cell.path] = placed
    return out


def _files(config: dict, absolute) -> None:
    """A proxy's program (proxies.<name>.path), relative to the study file's folder."""
    for name, spec in config.get("proxies", {}).items():
        if "path" in spec:
            spec["path"] = absolute(f"proxies.{name}.path", spec["path"])


CONCERN = Concern(
    name="topology", keys=KEYS, sections=("topologies", "networks", "proxies"), axes=AXES, files=_files,
    check=lambda draft: check(draft.config, draft.axes),
    values={axis: functools.partial(lambda axis, draft, value, where: check_value(draft.config, axis, value, where),
                                    axis) for axis in AXES},
    not_applicable=_not_applicable, check_cells=_check_cells,
    recipe=lambda study, values, database: recipe(study.topologies, values) if database else {})
