"""MariaDB topologies with real servers on 127.0.0.1 (distinct ports, no namespaces): GTID replication,
async and semi-synchronous, and a Galera cluster whose members join from the same image with no state
transfer (neither SST nor IST); a member killed and started again catches up by IST.

One datadir (the "image": a benchmark user and a small table) is initialized per module; every node
gets its own copy of it, as a topology cell's nodes get the prepared image.
"""
import dataclasses
import io
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from dbsweep import database
from dbsweep.engines import family, mariadb_cluster
from dbsweep.errors import ConfigError
from dbsweep.recipe import Recipe
from dbsweep.topology.nodes import NodeSpec

mariadb = family("innodb")


def server(engine: str) -> Recipe:
    """What database.running needs to start an engine's server on a datadir."""
    return Recipe.preparing({"engine": engine, "tool": "sysbench", "filesystem": {"type": "tmpfs"}, "dataset": {}})


def free_ports(count: int) -> int:
    """A port p with p .. p+count-1 free on 127.0.0.1 (a Galera member uses four)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + count > 65535:
            continue
        try:
            holders = [socket.socket() for _ in range(count)]
            for offset, sock in enumerate(holders):
                sock.bind(("127.0.0.1", base + offset))
        except OSError:
            continue
        finally:
            for sock in holders:
                sock.close()
        return base
    raise RuntimeError("no free port range")


@pytest.fixture(scope="module")
def workdir():
    """A 0755 folder under /tmp: the servers run as mysql, who cannot enter pytest's 0700 tmp_path."""
    path = Path(tempfile.mkdtemp(prefix="dbsweep-cluster-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    if os.environ.get("KEEP_CLUSTER_TEST") is None:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def tmp(workdir, request):
    path = Path(tempfile.mkdtemp(prefix=request.node.name[:30] + "-", dir=workdir))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def images(workdir):
    """engine -> a datadir with the benchmark user and a table of 100 rows, shut down cleanly (made once)."""
    made = {}

    def image(engine: str) -> Path:
        if engine not in made:
            root = made[engine] = workdir / f"image-{engine}"
            root.mkdir()
            log = io.StringIO()
            mariadb.initialize(root / database.DATADIR, log)
            creds = database.new_credentials(root)
            with database.running(server(engine), root, log) as db:
                mariadb.create_user(db.handle, creds["user"], creds["password"], creds["database"])
                mariadb.user_sql(db.handle, db.conn, "CREATE TABLE t (id INT PRIMARY KEY, v INT);\n"
                                 "INSERT INTO t SELECT seq, seq FROM seq_1_to_100;\n")
        return made[engine]
    return image


@pytest.fixture
def image(images):
    return images("innodb")


def nodes_for(image: Path, tmp: Path, names_roles: list[tuple[str, str]], ports: int) -> list[NodeSpec]:
    nodes = []
    for index, (name, role) in enumerate(names_roles):
        root = tmp / name
        root.mkdir()
        root.chmod(0o755)
        subprocess.run(["cp", "-a", str(image / database.DATADIR), str(root / database.DATADIR)], check=True)
        subprocess.run(["cp", "-a", str(image / database.CREDENTIALS), str(root)], check=True)
        nodes.append(NodeSpec(name, role, index, "127.0.0.1", free_ports(ports), root))
    return nodes


@contextmanager
def cluster(image, tmp, engine, kind, settings, names_roles, clients=("127.0.0.1",)):
    log = io.StringIO()
    nodes = nodes_for(image, tmp, names_roles, mariadb.NODE_PORTS[kind])
    with ExitStack() as stack:
        def start(node, options):
            return stack.enter_context(database.running(server(engine), node.root, log, keep=node.root, node=node,
                                                        node_options=options))
        dbs = mariadb_cluster.start_cluster(engine, kind, settings, nodes, start, list(clients), log)
        yield nodes, dbs, log


def query(db, sql: str) -> list[tuple]:
    session = mariadb.connect(db.conn)
    try:
        with session.cursor() as cursor:
            cursor.execute(sql)
            return list(cursor.fetchall())
    finally:
        session.close()


def wait_for(check, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


REPLICA = [("primary", "primary"), ("replica1", "replica")]
REPLICAS = [("primary", "primary"), ("replica1", "replica"), ("replica2", "replica")]


@pytest.mark.workflow
@pytest.mark.parametrize("engine", ["innodb", "myrocks"])
def test_async_replica_applies_a_write_and_reports_the_primarys_position(images, tmp, engine):
    with cluster(images(engine), tmp, engine, "async", {"replicas": 2}, REPLICAS) as (nodes, dbs, log):
        primary, replica = dbs["primary"], dbs["replica1"]
        stored_as = {"innodb": "innodb", "myrocks": "rocksdb"}[engine]
        assert query(replica, "SELECT count(*), (SELECT lower(engine) FROM information_schema.tables "
                              "WHERE table_name = 't') FROM t") == [(100, stored_as)]
        before = mariadb.counters(primary.local)
        query(primary, "INSERT INTO t VALUES (1000, 1)")
        for name in ("replica1", "replica2"):
            assert wait_for(lambda name=name: query(dbs[name], "SELECT v FROM t WHERE id = 1000") == [(1,)]), name
        assert [n.facts["gtid_start"] for n in nodes] == ["", "", ""]  # the image's position: no binary log yet
        after = mariadb.counters(primary.local)
        assert after["replication_position"] == before.get("replication_position", 0) + 1
        seen = wait_for(lambda: mariadb.counters(replica.local).get("replication_position")
                        == after["replication_position"] and mariadb.counters(replica.local))
        assert seen and seen["replication_lag_s"] == 0
        assert "replication_lag_s" not in after  # a primary has no lag
        assert query(replica, "SELECT @@read_only") == [(1,)]
        assert nodes[1].facts["source"] == "primary" and nodes[1].facts["provision_s"] > 0
        # the replication password went through stdin only: not in any log nor config
        password = mariadb.admin_sql(replica.handle, "SELECT 1;\n") and _master_password(replica)
        assert password and password not in log.getvalue()
        for path in (primary.handle.rundir, replica.handle.rundir):
            for file in path.glob("*"):
                if file.is_file() and file.suffix in (".log", ".cnf"):
                    assert password not in file.read_text(errors="replace"), file
        # a stopped replica reports lag -1, and stays a replica for counters()
        mariadb.admin_sql(replica.handle, "STOP SLAVE;\n")
        assert mariadb.counters(replica.local)["replication_lag_s"] == -1


def _master_password(db) -> str:
    """The password the replica stored for its source (master.info, in its datadir)."""
    lines = (db.handle.datadir / "master.info").read_text().splitlines()
    return lines[5]


@pytest.mark.workflow
def test_semisync_commits_wait_for_the_replica_and_fall_back_when_it_is_gone(image, tmp):
    settings = {"replicas": 1, "replication": "semisync", "semisync_timeout_ms": 500}
    with cluster(image, tmp, "innodb", "semisync", settings, REPLICA) as (nodes, dbs, log):
        primary, replica = dbs["primary"], dbs["replica1"]
        first = mariadb.counters(primary.local)
        assert first["Rpl_semi_sync_master_status"] == 1 and first["Rpl_semi_sync_master_clients"] == 1
        query(primary, "INSERT INTO t VALUES (2000, 1)")
        second = mariadb.counters(primary.local)
        assert second["Rpl_semi_sync_master_yes_tx"] == first["Rpl_semi_sync_master_yes_tx"] + 1
        assert second["Rpl_semi_sync_master_no_tx"] == first["Rpl_semi_sync_master_no_tx"]
        assert mariadb.counters(replica.local)["Rpl_semi_sync_slave_status"] == 1
        assert query(primary, "SELECT @@rpl_semi_sync_master_timeout") == [(500,)]
        assert nodes[0].facts["semisync_timeout_ms"] == 500
        mariadb.admin_sql(replica.handle, "STOP SLAVE;\n")  # the replica is gone for the primary
        began = time.monotonic()
        query(primary, "INSERT INTO t VALUES (2001, 1)")
        waited = time.monotonic() - began
        third = mariadb.counters(primary.local)
        assert third["Rpl_semi_sync_master_status"] == 0
        assert third["Rpl_semi_sync_master_no_tx"] == second["Rpl_semi_sync_master_no_tx"] + 1
        assert 0.4 < waited < 5, waited  # it waited for the timeout, then committed without the replica


@pytest.mark.workflow
def test_galera3_forms_a_synced_cluster_without_state_transfer_and_replicates_a_write(image, tmp):
    members = [("node1", "member"), ("node2", "member"), ("node3", "member")]
    with cluster(image, tmp, "innodb", "galera", {"nodes": 3}, members) as (nodes, dbs, log):
        for name, db in dbs.items():
            sample = mariadb.counters(db.local)
            assert sample["wsrep_cluster_size"] == 3, name
            assert sample["wsrep_local_state"] == 4, name  # Synced
        assert nodes[0].facts["state_transfer"] == "bootstrap"
        for node, db in zip(nodes[1:], list(dbs.values())[1:], strict=False):
            assert node.facts["state_transfer"] == "none", node.facts  # it held the cluster's state already
            text = (db.handle.rundir / mariadb.ERROR_LOG).read_text(errors="replace")
            assert "wsrep_sst_" not in text and "SST" not in text.replace("SST method", ""), node.name
            assert node.facts["cluster_uuid"] == nodes[0].facts["cluster_uuid"]
        query(dbs["node1"], "INSERT INTO t VALUES (3000, 7)")
        assert wait_for(lambda: query(dbs["node3"], "SELECT v FROM t WHERE id = 3000") == [(7,)])
        assert query(dbs["node3"], "SELECT count(*) FROM t") == [(101,)]  # the image's rows, plus one
        after = [mariadb.counters(db.local)["replication_position"] for db in dbs.values()]
        assert len(set(after)) == 1 and after[0] >= 1


@pytest.mark.workflow
def test_a_killed_galera_member_rejoins_by_ist_and_one_without_the_clusters_state_is_refused(image, tmp):
    """A member SIGKILLed while the cluster writes on gets the writes it missed by IST from the donor's
    gcache when it starts again; a joiner whose state is unknown would need a full copy (SST): the transfer
    method refuses it, the server stops with the reason, and nothing is copied."""
    members = [("node1", "member"), ("node2", "member"), ("node3", "member")]  # two keep the quorum
    with cluster(image, tmp, "innodb", "galera", {"nodes": 3}, members) as (nodes, dbs, log):
        query(dbs["node1"], "INSERT INTO t VALUES (3999, 0)")  # applied on node3: its InnoDB holds the position
        assert wait_for(lambda: query(dbs["node3"], "SELECT v FROM t WHERE id = 3999") == [(0,)])
        killed = dbs["node3"]
        killed.handle.stopped_by_event = True  # its exit is this test's doing
        os.kill(killed.handle.pid, signal.SIGKILL)
        assert wait_for(lambda: mariadb.counters(dbs["node1"].local)["wsrep_cluster_size"] == 2)
        query(dbs["node1"], "INSERT INTO t VALUES (4000, 1)")  # node3 misses these
        query(dbs["node2"], "INSERT INTO t VALUES (4001, 2)")
        again = mariadb_cluster.node_options("galera", nodes[2], nodes, {}, bootstrap=False)
        with database.running(server("innodb"), nodes[2].root, log, node=nodes[2], node_options=again) as db:
            mariadb_cluster._wait_synced(db, "node3", 3)
            assert query(db, "SELECT v FROM t WHERE id >= 3999 ORDER BY id") == [(0,), (1,), (2,)]
            assert mariadb_cluster.state_transfer(db.handle.rundir / mariadb.ERROR_LOG) == "ist"

        unknown = nodes_for(image, tmp, [("node4", "member")], 4)[0]
        unknown.index = 3
        options = mariadb_cluster.node_options("galera", unknown, [nodes[0], unknown], {})
        options["wsrep_cluster_address"] = f"gcomm://127.0.0.1:{nodes[0].port + 1}"
        with pytest.raises(RuntimeError, match="dbsweep refuses"):
            with database.running(server("innodb"), unknown.root, log, node=unknown, node_options=options):
                pass  # no grastate.dat: its position is not the cluster's
        assert query(dbs["node1"], "SELECT count(*) FROM t") == [(103,)]


def test_galera_with_myrocks_is_refused_before_any_server_starts(tmp_path):
    started = []
    node = NodeSpec("node1", "member", 0, "127.0.0.1", 1, tmp_path)
    with pytest.raises(ConfigError, match="'galera' is not applicable to engine myrocks"):
        mariadb_cluster.start_cluster("myrocks", "galera", {"nodes": 3}, [node], lambda n, o: started.append(n),
                              [], io.StringIO())
    assert started == [] and mariadb.REPLICATION["myrocks"] == ("async", "semisync")
    mariadb.check_replication("innodb", "galera")  # Debian's MariaDB has galera-4
    mariadb.check_replication("myrocks", None)  # one node: anything
    assert "galera" in mariadb.REPLICATION["innodb"]


@pytest.mark.workflow
def test_single_node_lets_the_clients_addresses_log_in(image, tmp):
    with cluster(image, tmp, "innodb", None, {}, [("primary", "primary")],
                 clients=("127.0.0.1", "10.91.0.2")) as (nodes, dbs, log):
        hosts = mariadb.admin_sql(dbs["primary"].handle,
                                  "SELECT host FROM mysql.user WHERE user = 'dbsweep' ORDER BY host;\n").split()
        assert hosts == ["10.91.0.2", "127.0.0.1", "localhost"]
        grants = mariadb.admin_sql(dbs["primary"].handle, "SHOW GRANTS FOR 'dbsweep'@'10.91.0.2';\n")
        assert "GRANT ALL PRIVILEGES ON `dbsweep`.*" in grants
        assert "replication_position" not in mariadb.counters(dbs["primary"].local)  # no binary log
        # the optimizer's statistics of every table of the benchmark's database, as database.load takes them
        handle = dbs["primary"].handle
        mariadb.user_sql(handle, dbs["primary"].conn, "CREATE TABLE `odd``name` (id INT PRIMARY KEY);\n")
        mariadb.admin_sql(handle, "DELETE FROM mysql.innodb_table_stats WHERE database_name = 'dbsweep';\n")
        assert mariadb.analyze(handle, "dbsweep") == ["mariadb", "--database=dbsweep",
                                                      "--execute=ANALYZE TABLE `odd``name`, `t`"]
        stats = mariadb.admin_sql(handle, "SELECT table_name, n_rows FROM mysql.innodb_table_stats "
                                          "WHERE database_name = 'dbsweep' ORDER BY table_name;\n")
        assert stats.splitlines() == ["odd`name\t0", "t\t100"]
    with pytest.raises(ConfigError, match="client address: 'host; DROP' is not an IP address"):
        mariadb_cluster.start_cluster("innodb", None, {}, nodes, lambda n, o: None, ["host; DROP"], io.StringIO())


def test_counters_kinds_of_the_replication_numbers():
    """Running totals get per-second deltas; levels are drawn as they are."""
    for name in ("wsrep_flow_control_paused_ns", "wsrep_flow_control_sent", "wsrep_flow_control_recv",
                 "wsrep_local_cert_failures", "wsrep_replicated", "wsrep_replicated_bytes", "wsrep_received",
                 "wsrep_last_committed", "replication_position", "Rpl_semi_sync_master_no_tx",
                 "Rpl_semi_sync_master_yes_tx"):
        assert mariadb.CUMULATIVE(name), name
    for name in ("wsrep_flow_control_paused", "wsrep_local_recv_queue", "wsrep_local_recv_queue_avg",
                 "wsrep_cluster_size", "wsrep_local_state", "replication_lag_s", "Rpl_semi_sync_master_status",
                 "Rpl_semi_sync_master_clients"):
        assert not mariadb.CUMULATIVE(name), name
    assert mariadb.gtid_seq_no("1-2-7,0-1-42") == 42
    assert mariadb.gtid_seq_no("") is None and mariadb.gtid_seq_no("1-2-7") is None


def test_node_options_of_each_kind():
    nodes = [NodeSpec("primary", "primary", 0, "10.0.0.1", 3306, Path("/x")),
             NodeSpec("replica1", "replica", 1, "10.0.0.2", 3306, Path("/y"))]
    settings = {"semisync_timeout_ms": 2000}
    primary = mariadb_cluster.node_options("semisync", nodes[0], nodes, settings)
    replica = mariadb_cluster.node_options("semisync", nodes[1], nodes, settings)
    assert primary["server_id"] == 1 and replica["server_id"] == 2
    assert primary["rpl_semi_sync_master_timeout"] == 2000 and primary["rpl_semi_sync_master_enabled"] == "ON"
    assert replica["rpl_semi_sync_slave_enabled"] == "ON" and replica["read_only"] == "ON"
    assert primary["read_only"] is False and "rpl_semi_sync_master_enabled" not in replica
    assert "rpl_semi_sync_master_enabled" not in mariadb_cluster.node_options("async", nodes[0], nodes, {})
    members = [NodeSpec(f"node{i + 1}", "member", i, "127.0.0.1", 5000 + 10 * i, Path("/z")) for i in range(3)]
    first = mariadb_cluster.node_options("galera", members[0], members, {})
    second = mariadb_cluster.node_options("galera", members[1], members, {})
    assert first["wsrep_cluster_address"] == "gcomm://127.0.0.1:5001,127.0.0.1:5011,127.0.0.1:5021"
    assert first["wsrep_new_cluster"] is True and "wsrep_new_cluster" not in second
    assert "wsrep_new_cluster" not in mariadb_cluster.node_options("galera", members[0], members, {}, bootstrap=False)
    assert second["wsrep_provider_options"] == "gmcast.listen_addr=tcp://127.0.0.1:5011;ist.recv_addr=127.0.0.1:5012"
    assert second["wsrep_sst_method"] == mariadb.IST_ONLY and mariadb.NODE_PORTS["galera"] == 4
    # the my.cnf a node gets: dbsweep's node options win over a study's
    text = mariadb.config_text("innodb", None, {"binlog_format": "MIXED"}, Path("/d"), Path("/r"), 5000,
                               node_options=second)
    assert "binlog_format=ROW" in text and "binlog_format=MIXED" not in text
    assert 'wsrep_provider_options=gmcast.listen_addr=tcp://127.0.0.1:5011;ist.recv_addr=127.0.0.1:5012' in text


@pytest.mark.workflow
def test_sessions_through_sockets_are_per_server_when_nodes_share_a_port(image, tmp):
    """Nodes in namespaces may all listen on one port, and this process reaches them through their sockets:
    the cached sessions of counters() and variables() are the socket's, not the port's."""
    port = free_ports(1)
    log = io.StringIO()
    nodes = nodes_for(image, tmp, [("a", "primary"), ("b", "primary")], 1)
    with ExitStack() as stack:
        ids = {}
        for n, node in enumerate(nodes):
            node.address, node.port = f"127.0.0.{n + 2}", port
            db = stack.enter_context(database.running(server("innodb"), node.root, log, node=node,
                                                      node_options={"server_id": 11 + n}))
            ids[node.name] = dataclasses.replace(db.conn, host=None)
        assert [dict(mariadb.variables(ids[name]))["server_id"] for name in ("a", "b")] == ["11", "12"]
