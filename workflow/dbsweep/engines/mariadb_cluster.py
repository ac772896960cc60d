"""MariaDB topologies: one node the clients reach, a primary with GTID replicas (async or semi-synchronous),
and a Galera cluster (galera-4) whose members join from their image, never by SST.

Every node's root already holds its own copy of the cell's prepared image (the same datadir), so:

- a replica starts replicating at the image's GTID position (its gtid_slave_pos is set to its own
  @@gtid_binlog_pos, which is the image's and so the primary's): nothing is copied over the network;
- the first Galera member bootstraps a new cluster on its image; before each other member starts, it
  gets a grastate.dat with that cluster's uuid and its seqno at that moment (each join adds one), so it
  joins with "state transfer needed: no": no SST and no IST. The state transfer method (IST_ONLY,
  engines/wsrep_sst_ist_only.py) copies nothing: a member that is behind (one killed or stopped by a
  timed event and started again after writes) catches up by IST from a donor's gcache (galera's
  default gcache.size, 128M, holds the writesets it missed); one that would need a full copy (SST)
  stops with "dbsweep refuses", never copies. After a SIGKILL the member's grastate.dat says seqno
  -1; the server recovers its position from InnoDB at start, so it still asks for an IST.

Setup statements that every node runs for itself (accounts) run with sql_log_bin=0, so the image's GTID
position stays where it is and replication starts with nothing to apply. Passwords go on the client's
stdin (engines.run_client), never on a command line; the replication user's is fresh per start_cluster
and stored only by the replica itself (master.info in its datadir, mode 0660, owned by mysql).
"""
from __future__ import annotations

import ipaddress
import re
import secrets
import time
from pathlib import Path
from collections.abc import Callable

from dbsweep.engines import mariadb as family
from dbsweep.errors import ConfigError

REPLICATION_USER = "dbsweep_repl"
CLUSTER_NAME = "dbsweep"
GALERA_PROVIDER = Path("/usr/lib/galera/libgalera_smm.so")
WAIT_S = 120  # for replicas to replicate and members to be Synced
SEMISYNC_TIMEOUT_MS = 10000  # MariaDB's default rpl_semi_sync_master_timeout


def check(engine: str, kind: str | None, basedir: Path | None = None) -> None:
    """ConfigError (one line) when engine (on the build in basedir) cannot run kind."""
    family.check_replication(engine, kind, basedir)


def check_cluster_settings(kind: str | None, settings: dict, where: str = "topology") -> None:
    """MariaDB runs every setting the topology schema lets through (replicas, semi-sync timeout, nodes):
    nothing more to refuse."""


def node_options(kind: str | None, node, nodes: list, settings: dict, engine: str = "innodb",
                 bootstrap: bool | None = None) -> dict:
    """The server options dbsweep sets for node in a topology of kind (they win over a study's options).
    bootstrap (Galera): whether the node starts a new cluster; default: the first node does. A member
    restarted into a running cluster (a timed event) needs bootstrap=False."""
    if kind is None:
        return {}
    if kind in ("async", "semisync"):
        opts = {"server_id": node.index + 1, "log_bin": "mysql-bin", "binlog_format": "ROW",
                "log_slave_updates": True, "relay_log": "relay-bin", "gtid_domain_id": 0,
                "skip_slave_start": True, "read_only": node.role != "primary"}
        if kind == "semisync" and node.role == "primary":
            opts["rpl_semi_sync_master_enabled"] = True
            opts["rpl_semi_sync_master_timeout"] = int(settings.get("semisync_timeout_ms", SEMISYNC_TIMEOUT_MS))
        elif kind == "semisync":
            opts["rpl_semi_sync_slave_enabled"] = True
        return {name: ("ON" if value is True else value) for name, value in opts.items()}
    if kind == "galera":
        gcomm = ",".join(f"{n.address}:{n.port + 1}" for n in nodes)
        opts = {"wsrep_on": "ON", "wsrep_provider": str(GALERA_PROVIDER), "wsrep_cluster_name": CLUSTER_NAME,
                "wsrep_cluster_address": f"gcomm://{gcomm}", "wsrep_node_name": node.name,
                "wsrep_node_address": f"{node.address}:{node.port + 1}",
                "wsrep_node_incoming_address": f"{node.address}:{node.port}",
                "wsrep_sst_receive_address": f"{node.address}:{node.port + 3}",
                "wsrep_provider_options": f"gmcast.listen_addr=tcp://{node.address}:{node.port + 1};"
                                          f"ist.recv_addr={node.address}:{node.port + 2}",
                "wsrep_sst_method": family.IST_ONLY, "binlog_format": "ROW", "default_storage_engine": "InnoDB",
                "innodb_autoinc_lock_mode": 2, "server_id": node.index + 1}
        if node.index == 0 if bootstrap is None else bootstrap:
            opts["wsrep_new_cluster"] = True
        return opts
    raise ConfigError(f"replication: {kind!r} is not one of async, semisync, galera")


def start_cluster(engine: str, kind: str | None, settings: dict, nodes: list, start: Callable,
                  clients: list[str], log) -> dict:
    """Start the nodes of a topology (start(node, node_options) -> Database), set replication up, let the
    benchmark user log in from the clients' addresses, and return node name -> Database once every
    replica's IO and SQL threads run and it has caught up (semisync: the primary counts every replica as
    a semi-sync client), or every Galera member is Synced in a cluster of all of them."""
    check(engine, kind)
    for address in clients:
        _address(address)
    if kind is None:
        if len(nodes) != 1:
            raise ConfigError(f"topology: one node without replication, got {len(nodes)}")
        db = start(nodes[0], {})
        allow_clients(db, clients, replicated=True)
        nodes[0].facts.update({"role": nodes[0].role})
        return {nodes[0].name: db}
    if kind == "galera":
        return _galera(engine, settings, nodes, start, clients, log)
    return _replication(engine, kind, settings, nodes, start, clients, log)


def _address(text: str) -> str:
    """An IP address (for an account's host part); anything else is refused."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ConfigError(f"client address: {text!r} is not an IP address") from None


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def allow_clients(db, clients: list[str], replicated: bool, monitor: bool = False) -> None:
    """The benchmark user (as in db.conn) may log in from each client address, with the same rights on its
    database as its 127.0.0.1 and localhost accounts from the image: one account per address (each exact,
    nothing wider). monitor: it may also read SHOW SLAVE STATUS, for the per-second lag.
    replicated=False: the statements stay out of the binary log (every node runs them itself)."""
    conn = db.conn
    hosts = tuple(dict.fromkeys(["127.0.0.1", "localhost"] + [_address(a) for a in clients]))
    family.create_user(db.handle, conn.user, conn.password, conn.database, hosts=hosts, binlog=replicated)
    if monitor:
        privilege = family.monitor_privilege(db.handle.basedir)
        family.admin_sql(db.handle, "SET SESSION sql_log_bin = 0;\n" + "".join(
            f"GRANT {privilege} ON *.* TO '{conn.user}'@{_quote(host)};\n" for host in hosts))


def _status(db, like: str) -> dict[str, str]:
    out = family.admin_sql(db.handle, f"SHOW GLOBAL STATUS LIKE {_quote(like)};\n")
    return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)


def _value(db, expression: str) -> str:
    return family.admin_sql(db.handle, f"SELECT {expression};\n").strip()


def _replication(engine, kind, settings, nodes, start, clients, log) -> dict:
    primary = [n for n in nodes if n.role == "primary"]
    replicas = [n for n in nodes if n.role == "replica"]
    if len(primary) != 1 or len(primary) + len(replicas) != len(nodes):
        raise ConfigError(f"topology: replication needs one primary and replicas, got roles "
                          f"{', '.join(n.role for n in nodes)}")
    primary = primary[0]
    dbs = {primary.name: start(primary, node_options(kind, primary, nodes, settings, engine))}
    source = dbs[primary.name]
    check(engine, kind, source.handle.basedir)  # a build that cannot replicate: said before any SQL fails
    password = secrets.token_urlsafe(24)
    secret = family._native_hash(password)
    sql = ["SET SESSION sql_log_bin = 0;"]
    for host in dict.fromkeys(_address(r.address) for r in replicas):
        account = f"'{REPLICATION_USER}'@{_quote(host)}"
        sql += [f"CREATE USER IF NOT EXISTS {account} IDENTIFIED BY PASSWORD '{secret}';",
                f"ALTER USER {account} IDENTIFIED BY PASSWORD '{secret}';",
                f"GRANT REPLICATION SLAVE ON *.* TO {account};"]
    family.admin_sql(source.handle, "\n".join(sql) + "\n")
    allow_clients(source, clients, replicated=False, monitor=True)
    start_pos = _value(source, "@@global.gtid_binlog_pos")
    primary.facts.update({"role": "primary", "replication": kind, "gtid_start": start_pos})
    if kind == "semisync":
        primary.facts["semisync_timeout_ms"] = int(settings.get("semisync_timeout_ms", SEMISYNC_TIMEOUT_MS))
    for replica in replicas:
        began = time.monotonic()
        db = dbs[replica.name] = start(replica, node_options(kind, replica, nodes, settings, engine))
        allow_clients(db, clients, replicated=False, monitor=True)
        # The replica starts at its own (the image's) position; the password travels on stdin only.
        family.admin_sql(db.handle, "\n".join([
            "SET SESSION sql_log_bin = 0;",
            "SET GLOBAL gtid_slave_pos = @@global.gtid_binlog_pos;",
            f"CHANGE MASTER TO master_host={_quote(primary.address)}, master_port={int(primary.port)}, "
            f"master_user='{REPLICATION_USER}', master_password={_quote(password)}, "
            f"master_use_gtid=slave_pos, master_connect_retry=1;",
            "START SLAVE;"]) + "\n")
        replica.facts.update({"role": "replica", "replication": kind, "source": primary.name,
                              "gtid_start": _value(db, "@@global.gtid_slave_pos")})
        _wait_replicating(db, source, replica.name)
        replica.facts["provision_s"] = round(time.monotonic() - began, 3)
    if kind == "semisync":
        _wait(lambda: int(_status(source, "Rpl_semi_sync_master_clients").get(
            "Rpl_semi_sync_master_clients", 0)) >= len(replicas),
            f"{primary.name}: {len(replicas)} semi-sync replica(s) connected", source)
    return dbs


def slave_status(db) -> dict[str, str]:
    """SHOW SLAVE STATUS of the default connection, by column name ({} when the node is no replica)."""
    out = family.admin_sql_rows(db.handle, "SHOW SLAVE STATUS;\n")
    return out[0] if out else {}


def _gtids(text: str) -> set[str]:
    return {part.strip() for part in text.split(",") if part.strip()}


def _wait_replicating(db, source, name: str) -> None:
    """Until the replica's IO and SQL threads run and it has applied everything the primary has."""
    said = {}

    def replicating() -> bool:
        said.update(slave_status(db))
        if said.get("Slave_IO_Running") != "Yes" or said.get("Slave_SQL_Running") != "Yes":
            return False
        return _gtids(_value(source, "@@global.gtid_binlog_pos")) <= _gtids(_value(db, "@@global.gtid_slave_pos"))

    def why() -> str:
        return (f"IO {said.get('Slave_IO_Running')}, SQL {said.get('Slave_SQL_Running')}, "
                f"{said.get('Last_IO_Error') or said.get('Last_SQL_Error') or 'no error reported'}")

    _wait(replicating, f"replica {name} replicating", db, why)


def _wait(ready: Callable[[], bool], what: str, db, why: Callable[[], str] | None = None) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {WAIT_S} s" + (f" ({why()})" if why else ""))
        time.sleep(0.2)


def state_transfer(error_log: Path) -> str:
    """What a joiner's error log says it received: "sst" (a full state transfer), "ist" (incremental),
    or "none" (its state was the cluster's)."""
    text = error_log.read_text(errors="replace") if error_log.is_file() else ""
    # The server says "SST received" after any transfer; only another method than IST_ONLY can copy.
    if re.search(rf"Running: 'wsrep_sst_(?!{family.IST_ONLY}\b)", text):
        return "sst"
    if "IST received" in text or "Receiving IST" in text or "Prepared IST receiver" in text:
        return "ist"
    if "state transfer needed: no" in text:
        return "none"
    return "unknown"


def _galera(engine, settings, nodes, start, clients, log) -> dict:
    if any(n.role != "member" for n in nodes):
        raise ConfigError(f"topology: a Galera cluster's nodes are members, got roles "
                          f"{', '.join(n.role for n in nodes)}")
    if not GALERA_PROVIDER.is_file():
        raise ConfigError(f"replication: galera needs {GALERA_PROVIDER} (Debian's galera-4)")
    first, others = nodes[0], nodes[1:]
    (first.root / "data" / "grastate.dat").unlink(missing_ok=True)  # the image's data, a new cluster
    dbs = {first.name: start(first, node_options("galera", first, nodes, settings, engine))}
    boot = dbs[first.name]
    check(engine, "galera", boot.handle.basedir)
    _wait_synced(boot, first.name, 1)
    state = _status(boot, "wsrep_local_state_uuid")["wsrep_local_state_uuid"]
    first.facts.update({"role": "member", "replication": "galera", "cluster_uuid": state, "bootstrap": True,
                        "state_transfer": "bootstrap"})
    for node in others:
        began = time.monotonic()
        # The cluster's seqno now (each member's joining is one more): a joiner at it needs no state transfer.
        seqno = int(_status(boot, "wsrep_last_committed")["wsrep_last_committed"])
        family.write_grastate(node.root / "data", state, seqno)
        db = dbs[node.name] = start(node, node_options("galera", node, nodes, settings, engine))
        _wait_synced(db, node.name, node.index + 1)
        how = state_transfer(node.run_file(db.handle.rundir, family.ERROR_LOG))
        if how == "sst":
            raise RuntimeError(f"{node.name}: joined by SST (a full state transfer), not from its image")
        node.facts.update({"role": "member", "replication": "galera", "cluster_uuid": state,
                           "seqno_start": seqno, "state_transfer": how,
                           "provision_s": round(time.monotonic() - began, 3)})
    for node in nodes:
        _wait_synced(dbs[node.name], node.name, len(nodes))
    # Account statements replicate to every member (total order isolation).
    allow_clients(boot, clients, replicated=True)
    return dbs


def _wait_synced(db, name: str, size: int) -> None:
    said = {}

    def synced() -> bool:
        said.update(_status(db, "wsrep_%"))
        return (said.get("wsrep_local_state_comment") == "Synced"
                and int(said.get("wsrep_cluster_size") or 0) >= size)

    _wait(synced, f"Galera member {name} Synced in a cluster of {size}", db,
          lambda: f"state {said.get('wsrep_local_state_comment')}, cluster size {said.get('wsrep_cluster_size')}")
