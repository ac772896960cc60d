"""PostgreSQL topologies: one node that others reach over its network, or a primary with streaming standbys.

Every node's root holds its own copy of the cell's prepared image (a cleanly shut down datadir). A standby
starts from that copy as it is: standby.signal, primary_conninfo and a physical replication slot, so it
streams from the image's checkpoint on; nothing is copied over the network (no pg_basebackup).

Logins of a topology node (its own hba file, in its datadir; a plain single server keeps initdb's):
    local  all          postgres        peer             dbsweep's admin SQL and pg_isready
    local  all          <benchmark>     scram-sha-256    this process samples a node in a namespace
    local  all          all             peer
    host   all          <benchmark>     <client>/32      scram-sha-256   each of `clients` (client, proxy)
    host   replication  <replication>   <node>/32        scram-sha-256   each node's address (standbys)
Without a namespace this process reaches the node over loopback, so 127.0.0.1 is a client too.

Replication settings (the topology's entry, besides replicas and replication):
    sync_standbys       "sync" only: how many standbys confirm each commit, ANY n of them (quorum,
                        synchronous_standby_names = 'ANY n (replica1, replica2, ...)'); default 1
    synchronous_commit  the primary's: on (default), remote_write, remote_apply, local or off
Everything else is PostgreSQL's default (e.g. hot_standby_feedback off: a long query on a standby may be
cancelled by a conflict with the primary's vacuum); a study's server_options may set it for every node.
The standbys' passfile and standby.signal stay in their copies of the image, which the repetition drops.
"""
from __future__ import annotations

import ipaddress
import json
import os
import re
import secrets
import time
from pathlib import Path
from collections.abc import Callable

from dbsweep.database import CREDENTIALS, DATADIR
from dbsweep.engines import as_user, write_private
from dbsweep.engines import postgresql as pg
from dbsweep.errors import ConfigError
from dbsweep.topology.nodes import NodeSpec

REPLICATION_USER = "dbsweep_replication"
HBA_NAME = "dbsweep_hba.conf"  # in the node's datadir
PASSFILE_NAME = "dbsweep_replication.pgpass"  # in a standby's datadir, 0600, owned by postgres
SYNCHRONOUS_COMMIT = ("on", "remote_write", "remote_apply", "local", "off")
STREAMING_TIMEOUT_S = 120
SLOT_NAME = re.compile(r"^[a-z0-9_]{1,63}$")


def check_cluster_settings(kind: str | None, settings: dict, where: str = "topology") -> None:
    """Refuse a topology entry PostgreSQL cannot run, in one line naming the key and value (at load)."""
    if kind is not None and kind not in pg.REPLICATION["postgresql"]:
        raise ConfigError(f"{where}.replication: {kind!r} is not one PostgreSQL runs "
                          f"({', '.join(pg.REPLICATION['postgresql'])})")
    replicas = _replicas(settings, where) if kind is not None else 0
    if "sync_standbys" in settings:
        value = settings["sync_standbys"]
        if kind != "sync":
            raise ConfigError(f"{where}.sync_standbys: {value!r} applies to replication: sync only")
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= replicas:
            raise ConfigError(f"{where}.sync_standbys: {value!r} is not a whole number from 1 to the "
                              f"replicas ({replicas})")
    if "synchronous_commit" in settings:
        value = settings["synchronous_commit"]
        if kind is None:
            raise ConfigError(f"{where}.synchronous_commit: {value!r} applies to replication: async or sync only")
        if str(value).lower() not in SYNCHRONOUS_COMMIT:
            raise ConfigError(f"{where}.synchronous_commit: {value!r} is not one of {', '.join(SYNCHRONOUS_COMMIT)}")


def _replicas(settings: dict, where: str) -> int:
    value = settings.get("replicas", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}.replicas: {value!r} is not a whole number of at least 1")
    return value


def _network(address: str, what: str) -> str:
    """An address (or network) as hba wants it: 10.0.0.2 -> 10.0.0.2/32."""
    try:
        return ipaddress.ip_network(str(address), strict=False).with_prefixlen
    except ValueError:
        raise ConfigError(f"{what}: {address!r} is not an IP address") from None


def hba_text(user: str, clients: list[str], nodes: list[str]) -> str:
    """The hba file of a topology node (see the module's docstring): user = the benchmark user, clients =
    the addresses it may log in from over TCP, nodes = the addresses standbys stream from."""
    pg.check_identifier("user", user)
    lines = ["# dbsweep: logins of a topology node; written for one run, no passwords here",
             "local  all  postgres  peer",
             f"local  all  {user}  scram-sha-256",
             "local  all  all  peer"]
    for address in dict.fromkeys(_network(a, "clients") for a in clients):
        lines.append(f"host  all  {user}  {address}  scram-sha-256")
    for address in dict.fromkeys(_network(a, "node address") for a in nodes):
        lines.append(f"host  replication  {REPLICATION_USER}  {address}  scram-sha-256")
    return "\n".join(lines) + "\n"


def _benchmark_user(node: NodeSpec) -> str:
    return json.loads((Path(node.root) / CREDENTIALS).read_text())["user"]


def _datadir(node: NodeSpec) -> Path:
    return Path(node.root) / DATADIR


def _write_postgres_file(path: Path, text: str) -> None:
    """A 0600 file owned by postgres (the server reads it; nobody else may)."""
    write_private(path, text)
    ids = as_user(pg.SERVICE_USER)
    os.chown(path, ids["user"], ids["group"])


def write_hba(node: NodeSpec, clients: list[str], nodes: list[NodeSpec]) -> Path:
    """The node's hba file in its datadir; its path is the node_options' hba_file."""
    allowed = list(clients) + (["127.0.0.1"] if node.netns is None else [])
    path = _datadir(node) / HBA_NAME
    _write_postgres_file(path, hba_text(_benchmark_user(node), allowed, [n.address for n in nodes]))
    return path


def _passfile_line(*fields) -> str:
    return ":".join(str(v).replace("\\", "\\\\").replace(":", "\\:") for v in fields) + "\n"


def _conninfo_value(value) -> str:
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def node_options(kind: str | None, settings: dict, node: NodeSpec, primary: NodeSpec, standbys: list[NodeSpec],
                 hba: Path) -> dict:
    """What dbsweep sets on a node: its hba file; with replication the same WAL sender limits on every node
    (a hot standby needs at least its primary's), the primary's synchronous_standby_names and
    synchronous_commit, a standby's primary_conninfo (password in its passfile) and slot."""
    options: dict = {"hba_file": str(hba)}
    if kind is None:
        return options
    senders = max(10, len(standbys) + 2)
    options |= {"wal_level": "replica", "max_wal_senders": senders, "max_replication_slots": senders,
                "hot_standby": True}
    if node.name == primary.name:
        options["synchronous_commit"] = str(settings.get("synchronous_commit", "on")).lower()
        if kind == "sync":
            names = ", ".join(f'"{s.name}"' for s in standbys)
            options["synchronous_standby_names"] = f"ANY {int(settings.get('sync_standbys', 1))} ({names})"
        return options
    conninfo = {"host": primary.address, "port": primary.port, "user": REPLICATION_USER,
                "application_name": node.name, "passfile": _datadir(node) / PASSFILE_NAME, "sslmode": "disable"}
    options["primary_conninfo"] = " ".join(f"{k}={_conninfo_value(v)}" for k, v in conninfo.items())
    options["primary_slot_name"] = node.name
    return options


def start_cluster(engine: str, kind: str | None, settings: dict, nodes: list[NodeSpec],
                  start: Callable[[NodeSpec, dict], object], clients: list[str], log) -> dict:
    """Start a topology's PostgreSQL nodes and return node name -> Database, the primary first.

    kind None: the one node, with an hba file that lets the benchmark user in from `clients` (TCP, SCRAM)
    and through the socket (SCRAM). "async"/"sync": nodes[0] (role primary) starts first; on it dbsweep
    creates the replication role (a fresh password's SCRAM verifier on psql's stdin), grants the benchmark
    user pg_read_all_stats (pg_stat_replication's lags in counters()) and a physical slot per standby
    (so the primary keeps the WAL from the image's checkpoint on); then each standby starts from its own
    copy of the image, streaming. Returns once pg_stat_replication on the primary shows every standby
    streaming, replayed up to the primary's position when they connected, and, for "sync", with sync_state
    sync or quorum; raises RuntimeError after STREAMING_TIMEOUT_S otherwise."""
    if engine not in pg.ENGINE_NAMES:
        raise ConfigError(f"engine: {engine!r} is not a PostgreSQL engine")
    check_cluster_settings(kind, settings)
    if kind is None and len(nodes) != 1:
        raise ConfigError(f"topology: a PostgreSQL node without replication is one node, not {len(nodes)}")
    if kind is not None and len(nodes) < 2:
        raise ConfigError(f"topology.replicas: replication {kind} needs at least one standby")
    primary, standbys = nodes[0], nodes[1:]
    for node in standbys:  # its slot's and application_name
        if not SLOT_NAME.match(node.name):
            raise ConfigError(f"topology: node name {node.name!r} is not a replication slot name (a-z, 0-9, _)")
    hbas = {node.name: write_hba(node, clients, nodes) for node in nodes}
    log.write(f"postgresql topology: {kind or 'single'}, nodes {', '.join(n.name for n in nodes)}; "
              f"clients {', '.join(clients) or '(none)'}\n")
    log.flush()
    started = {primary.name: start(primary, node_options(kind, settings, primary, primary, standbys,
                                                         hbas[primary.name]))}
    if kind is None:
        return started
    password = secrets.token_urlsafe(24)
    _prepare_primary(started[primary.name].handle, _benchmark_user(primary), password, standbys)
    for node in standbys:
        datadir = _datadir(node)
        _write_postgres_file(datadir / PASSFILE_NAME, _passfile_line("*", "*", "*", REPLICATION_USER, password))
        _write_postgres_file(datadir / "standby.signal", "")
        started[node.name] = start(node, node_options(kind, settings, node, primary, standbys, hbas[node.name]))
    wait_streaming(started[primary.name].handle, [n.name for n in standbys], kind == "sync", log)
    return started


def _prepare_primary(handle, user: str, password: str, standbys: list[NodeSpec]) -> None:
    """The replication role, the benchmark user's right to read pg_stat_replication, one slot per standby.
    synchronous_commit local: no standby streams yet to confirm these commits."""
    role = REPLICATION_USER
    sql = [
        "SET synchronous_commit = local;",
        f"SELECT 'CREATE ROLE \"{role}\" REPLICATION LOGIN' "
        f"WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') \\gexec",
        f"ALTER ROLE \"{role}\" REPLICATION LOGIN PASSWORD '{pg._scram_verifier(password)}';",
        f"GRANT pg_read_all_stats TO \"{user}\";",
    ]
    for node in standbys:
        sql.append(f"SELECT pg_drop_replication_slot('{node.name}') "
                   f"FROM pg_replication_slots WHERE slot_name = '{node.name}';")
        sql.append(f"SELECT pg_create_physical_replication_slot('{node.name}', true);")
    pg.admin_sql(handle, "\n".join(sql) + "\n")


def replication_state(handle) -> dict[str, tuple[str, str, bool]]:
    """application_name -> (state, sync_state, replayed up to the primary's current WAL position) from the
    primary's pg_stat_replication."""
    out = pg.admin_sql(handle, "SELECT application_name, state, sync_state, "
                               "coalesce(replay_lsn >= pg_current_wal_flush_lsn(), false) FROM pg_stat_replication;\n")
    rows = [line.split("\t") for line in out.splitlines() if line.strip()]
    return {name: (state, sync, caught == "t") for name, state, sync, caught in rows}


def wait_streaming(handle, names: list[str], sync: bool, log, timeout: float = STREAMING_TIMEOUT_S) -> None:
    """Until every standby in names streams from the primary and has replayed what the primary had written
    (and is sync or quorum when sync); RuntimeError naming the ones that do not, after timeout."""
    started = time.monotonic()
    while True:
        state = replication_state(handle)
        missing = [name for name in names
                   if name not in state or state[name][0] != "streaming" or not state[name][2]
                   or (sync and state[name][1] not in ("sync", "quorum"))]
        if not missing:
            log.write(f"postgresql standbys streaming after {time.monotonic() - started:.2f} s: "
                      + ", ".join(f"{name} {state[name][1]}" for name in names) + "\n")
            log.flush()
            return
        if time.monotonic() - started > timeout:
            seen = ", ".join(f"{name}: {state[name][0]}/{state[name][1]}" for name in missing if name in state)
            raise RuntimeError(f"standbys {', '.join(missing)} not streaming from the primary within {timeout:.0f} s"
                               f" ({seen or 'not connected'}); see their server.log")
        time.sleep(0.1)
