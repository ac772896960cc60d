"""PostgreSQL topologies with real servers on 127.0.0.1 (distinct ports): standbys from copies of the image
stream, a synchronous commit waits for its standby, a single node's own hba lets the benchmark user in through
the socket (and, in a network namespace of the test's own, its client over TCP). One datadir (pgbench -i,
scale 1) is loaded per module and copied per node."""
import io
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psutil
import psycopg
import pytest

from dbsweep import database
from dbsweep.engines import datadir_processes, postgresql
from dbsweep.engines import postgresql_cluster as cluster
from dbsweep.errors import ConfigError
from dbsweep.recipe import Recipe
from dbsweep.topology.nodes import NodeSpec

RECIPE = Recipe.preparing({"engine": "postgresql", "tool": "pgbench", "dataset": {"scale": 1, "fillfactor": 100},
                           "filesystem": {"type": "tmpfs"}})


def test_check_cluster_settings_refuses_in_one_line():
    cluster.check_cluster_settings("sync", {"replicas": 2, "sync_standbys": 2, "synchronous_commit": "remote_apply"})
    cluster.check_cluster_settings(None, {})
    bad = [("galera", {}, "topology.replication: 'galera' is not one PostgreSQL runs (async, sync)"),
           ("sync", {"replicas": 1, "sync_standbys": 2}, "topology.sync_standbys: 2 is not a whole number from 1 "
                                                          "to the replicas (1)"),
           ("async", {"replicas": 1, "sync_standbys": 1}, "topology.sync_standbys: 1 applies to replication: "
                                                           "sync only"),
           ("async", {"replicas": 0}, "topology.replicas: 0 is not a whole number of at least 1"),
           ("sync", {"synchronous_commit": "maybe"}, "topology.synchronous_commit: 'maybe' is not one of on, "
                                                     "remote_write, remote_apply, local, off"),
           (None, {"synchronous_commit": "on"}, "topology.synchronous_commit: 'on' applies to replication: "
                                                "async or sync only")]
    for kind, settings, said in bad:
        with pytest.raises(ConfigError) as error:
            cluster.check_cluster_settings(kind, settings)
        assert str(error.value) == said


def test_start_cluster_refuses_before_starting_anything(tmp_path):
    def start(node, options):
        raise AssertionError("started a node")
    nodes = [NodeSpec("primary", "primary", 0, "127.0.0.1", 1, tmp_path),
             NodeSpec("Replica-1", "replica", 1, "127.0.0.1", 2, tmp_path)]
    for kind, settings, given, said in [
            ("async", {"replicas": 1}, nodes, "topology: node name 'Replica-1' is not a replication slot name"),
            ("async", {"replicas": 1}, nodes[:1], "topology.replicas: replication async needs at least one standby"),
            (None, {}, nodes, "topology: a PostgreSQL node without replication is one node, not 2"),
            ("semisync", {}, nodes, "topology.replication: 'semisync' is not one PostgreSQL runs")]:
        with pytest.raises(ConfigError, match=re.escape(said)):
            cluster.start_cluster("postgresql", kind, settings, given, start, ["127.0.0.1"], io.StringIO())
    assert not list(tmp_path.iterdir())


def test_counter_kinds():
    for gauge in ("tables.n_dead_tup", "replication_lag_s", "replica1.replay_lag_s", "replica2.write_lag_s",
                  "replica1.flush_lag_s", "replica1.sent_replay_bytes", "replica1.sync", "replica1.streaming"):
        assert not postgresql.CUMULATIVE(gauge), gauge
    for total in ("replication_position", "wal_lsn_bytes", "wal.wal_bytes", "checkpointer.sync_time",
                  "db.xact_commit", "tables.autovacuum_count", "tables.analyze_count"):
        assert postgresql.CUMULATIVE(total), total


def test_hba_text_and_node_options(tmp_path):
    text = cluster.hba_text("dbsweep", ["10.9.0.2", "10.9.0.2", "10.9.0.9"], ["10.9.0.3", "10.9.0.4"])
    assert text.splitlines()[1:] == [
        "local  all  postgres  peer", "local  all  dbsweep  scram-sha-256", "local  all  all  peer",
        "host  all  dbsweep  10.9.0.2/32  scram-sha-256", "host  all  dbsweep  10.9.0.9/32  scram-sha-256",
        "host  replication  dbsweep_replication  10.9.0.3/32  scram-sha-256",
        "host  replication  dbsweep_replication  10.9.0.4/32  scram-sha-256"]
    with pytest.raises(ConfigError, match="clients: 'nowhere' is not an IP address"):
        cluster.hba_text("dbsweep", ["nowhere"], [])
    assert "host  all  dbsweep  10.9.1.0/24  scram-sha-256" in cluster.hba_text("dbsweep", ["10.9.1.7/24"], [])
    nodes = [NodeSpec("primary", "primary", 0, "10.9.0.3", 5432, tmp_path / "p"),
             NodeSpec("replica1", "replica", 1, "10.9.0.4", 5432, tmp_path / "r1"),
             NodeSpec("replica2", "replica", 2, "10.9.0.5", 5432, tmp_path / "r2")]
    hba = tmp_path / "hba"
    primary = cluster.node_options("sync", {"replicas": 2}, nodes[0], nodes[0], nodes[1:], hba)
    assert primary["synchronous_standby_names"] == 'ANY 1 ("replica1", "replica2")'
    assert primary["synchronous_commit"] == "on" and primary["hba_file"] == str(hba)
    standby = cluster.node_options("sync", {"replicas": 2}, nodes[2], nodes[0], nodes[1:], hba)
    assert "synchronous_standby_names" not in standby and standby["primary_slot_name"] == "replica2"
    assert standby["primary_conninfo"].startswith("host='10.9.0.3' port='5432' user='dbsweep_replication' "
                                                  "application_name='replica2' passfile=")
    assert standby["max_wal_senders"] == primary["max_wal_senders"]
    conf = postgresql.config_text("postgresql", None, {}, tmp_path / "d", tmp_path / "r", 5432, listen="10.9.0.4",
                                  node_options=standby)
    assert f"hba_file = '{hba}'" in conf and "pg_hba.conf" not in conf
    assert "primary_conninfo = 'host=''10.9.0.3'' port=''5432''" in conf


# --- real servers ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def image():
    """A loaded root (data/, credentials.json) to copy per node; pgbench's tables at scale 1."""
    root = Path(tempfile.mkdtemp(prefix="dbsweep-pgcluster-", dir="/var/tmp"))
    root.chmod(0o755)
    (root / "image").mkdir(mode=0o755)
    with open(root / "load.log", "w") as log:
        database.load(RECIPE, root / "image", log)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@contextmanager
def topology(image_root: Path, kind, settings: dict, clients=("127.0.0.1",)):
    """start_cluster's nodes, started by a `start` that enters database.running into one ExitStack; after the
    block nothing of them runs."""
    base = Path(tempfile.mkdtemp(prefix="topo-", dir=image_root))
    base.chmod(0o755)
    nodes = node_copies(image_root / "image", base, settings.get("replicas", 0) if kind else 0)
    log = io.StringIO()
    try:
        with ExitStack() as stack:
            def start(node, options):
                return stack.enter_context(database.running(RECIPE, node.root, log, node=node, node_options=options))
            dbs = cluster.start_cluster("postgresql", kind, settings, nodes, start, list(clients), log)
            yield dbs, nodes, log
        for node in nodes:
            assert datadir_processes(node.root / "data", "postgres") == {}, node.name
    finally:
        for node in nodes:
            for proc in datadir_processes(node.root / "data", "postgres").values():
                proc.kill()
        shutil.rmtree(base, ignore_errors=True)


def node_copies(image: Path, base: Path, replicas: int) -> list[NodeSpec]:
    """Node roots holding their own copies of the image, on 127.0.0.1 with distinct ports."""
    out = []
    for index in range(replicas + 1):
        name = "primary" if index == 0 else f"replica{index}"
        root = base / name
        subprocess.run(["cp", "-a", str(image), str(root)], check=True)
        out.append(NodeSpec(name, "primary" if index == 0 else "replica", index, "127.0.0.1",
                            database.free_port(), root))
    return out


def sql(db, text: str, local: bool = True) -> list[tuple]:
    with postgresql.connect(db.local if local else db.conn) as session:
        cursor = session.execute(text)
        return cursor.fetchall() if cursor.description else []


def wait_for(check, timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.1)


@pytest.mark.workflow
def test_async_standbys_stream_from_the_image_copy(image):
    with topology(image, "async", {"replicas": 2, "replication": "async"}) as (dbs, nodes, log):
        assert list(dbs) == ["primary", "replica1", "replica2"]
        primary, standby = dbs["primary"], dbs["replica1"]
        assert sql(standby, "SELECT pg_is_in_recovery()") == [(True,)]
        assert sql(primary, "SELECT application_name, state FROM pg_stat_replication ORDER BY 1") == [
            ("replica1", "streaming"), ("replica2", "streaming")]
        sql(primary, "CREATE TABLE written_on_primary AS SELECT 42 AS answer")
        for name in ("replica1", "replica2"):
            wait_for(lambda name=name: sql(dbs[name], "SELECT to_regclass('written_on_primary') IS NOT NULL")
                     == [(True,)],
                     what=f"the primary's table on {name}")
            assert sql(dbs[name], "SELECT answer FROM written_on_primary") == [(42,)]
            assert sql(dbs[name], "SELECT count(*) FROM pgbench_accounts") == [(100000,)]  # the image's rows
        # A standby refuses writes; replication_position equal once it caught up.
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            sql(standby, "CREATE TABLE nope (a int)")

        def same_position():
            return (postgresql.counters(primary.local)["replication_position"]
                    == postgresql.counters(standby.local)["replication_position"])
        wait_for(same_position, what="the standby's replay position reaching the primary's")
        on_primary, on_standby = postgresql.counters(primary.local), postgresql.counters(standby.local)
        assert on_primary["replication_position"] == on_primary["wal_lsn_bytes"] > 0
        assert "wal_lsn_bytes" not in on_standby and on_standby["replication_lag_s"] == 0.0
        assert "replication_lag_s" not in on_primary
        for name in ("replica1", "replica2"):
            assert on_primary[f"{name}.streaming"] == 1.0 and on_primary[f"{name}.sync"] == 0.0
            assert on_primary[f"{name}.sent_replay_bytes"] >= 0
            assert {f"{name}.replay_lag_s", f"{name}.write_lag_s", f"{name}.flush_lag_s"} <= set(on_primary) or \
                on_primary[f"{name}.sent_replay_bytes"] > 0
        # Replay held (the standby's startup process stopped; its WAL receiver goes on): the lag shows on both.
        startup = [proc for proc in datadir_processes(nodes[1].root / "data", "postgres").values()
                   if "startup" in " ".join(proc.cmdline())]
        assert len(startup) == 1
        startup[0].send_signal(signal.SIGSTOP)
        try:
            sql(primary, "INSERT INTO written_on_primary VALUES (43)")
            wait_for(lambda: postgresql.counters(standby.local).get("replication_lag_s", 0) > 0,
                     what="replication_lag_s on the standby while its replay is stopped")
            assert postgresql.counters(primary.local)["replica1.sent_replay_bytes"] > 0
        finally:
            startup[0].send_signal(signal.SIGCONT)
        wait_for(same_position, what="the standby catching up again")
        assert postgresql.counters(standby.local)["replication_lag_s"] == 0.0
        # The replication password: only in the standby's 0600 passfile, never in a config, log or command line.
        passfile = nodes[1].root / "data" / cluster.PASSFILE_NAME
        assert passfile.stat().st_mode & 0o777 == 0o600
        password = passfile.read_text().strip().rsplit(":", 1)[1]
        assert len(password) >= 24
        cmdlines = [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])]
        assert not any(password in line for line in cmdlines)
        for db in dbs.values():
            for path in db.handle.rundir.glob("*"):
                if path.is_file() and path.suffix in (".conf", ".log"):
                    assert password not in path.read_text(errors="replace"), path
        assert password not in log.getvalue()
        assert "streaming after" in log.getvalue()


@pytest.mark.workflow
def test_sync_commit_waits_for_its_standby(image):
    with topology(image, "sync", {"replicas": 1, "replication": "sync"}) as (dbs, nodes, log):
        primary = dbs["primary"]
        assert sql(primary, "SELECT application_name, sync_state FROM pg_stat_replication") == [
            ("replica1", "quorum")]
        assert postgresql.counters(primary.local)["replica1.sync"] == 1.0
        sql(primary, "CREATE TABLE waits (a int)")  # returns: the standby confirms
        standby = datadir_processes(nodes[1].root / "data", "postgres")
        assert standby
        done = threading.Event()

        def commit():
            sql(primary, "INSERT INTO waits VALUES (1)")
            done.set()
        worker = threading.Thread(target=commit, daemon=True)
        for proc in standby.values():
            proc.send_signal(signal.SIGSTOP)
        try:
            worker.start()
            assert not done.wait(1.5), "a synchronous commit returned while its only standby was stopped"
        finally:
            for proc in standby.values():
                proc.send_signal(signal.SIGCONT)
        assert done.wait(30), "the commit did not return once the standby was back"
        worker.join()
        wait_for(lambda: sql(dbs["replica1"], "SELECT count(*) FROM waits") == [(1,)], what="the row on replica1")


@pytest.mark.workflow
def test_single_node_lets_the_benchmark_user_in_through_the_socket(image):
    with topology(image, None, {}, clients=["127.0.0.1"]) as (dbs, nodes, log):
        assert list(dbs) == ["primary"]
        db = dbs["primary"]
        socket_side = type(db.local)(host=None, port=db.conn.port, socket=db.conn.socket, user=db.conn.user,
                                     password=db.conn.password, database=db.conn.database)
        with postgresql.connect(socket_side) as session:  # peer auth would refuse: no OS user dbsweep
            assert session.execute("SELECT count(*) FROM pgbench_branches").fetchall() == [(1,)]
            assert session.info.host.startswith("/")
        assert sql(db, "SELECT current_user", local=False) == [(db.conn.user,)]  # TCP from the clients
        with pytest.raises(psycopg.OperationalError, match="no pg_hba.conf entry"):
            psycopg.connect(host="127.0.0.1", port=db.conn.port, user="postgres", dbname="postgres",
                            connect_timeout=5)  # the superuser never over TCP
        counters = postgresql.counters(socket_side)
        assert counters["replication_position"] == counters["wal_lsn_bytes"]
        assert not [name for name in counters if name.endswith("_lag_s")]
        conf = next(db.handle.rundir.glob("postgresql.conf")).read_text()
        assert f"hba_file = '{nodes[0].root / 'data' / cluster.HBA_NAME}'" in conf
        # a freshly loaded table has no statistics and no visibility map until analyze (database.load runs it)
        state = ("SELECT c.reltuples, c.relallvisible > 0, (SELECT count(*) FROM pg_stats s WHERE s.tablename = "
                 "'fresh') FROM pg_class c WHERE c.relname = 'fresh'")
        with postgresql.connect(socket_side) as session:
            session.execute("CREATE TABLE fresh (id int PRIMARY KEY, k int)")
            session.execute("INSERT INTO fresh SELECT g, g % 97 FROM generate_series(1, 5000) g")
            session.commit()
            assert session.execute(state).fetchall() == [(-1.0, False, 0)]
        assert postgresql.analyze(db.handle, db.conn.database) == ["psql", "--dbname=dbsweep",
                                                                    "--command=VACUUM ANALYZE"]
        with postgresql.connect(socket_side) as session:
            assert session.execute(state).fetchall() == [(5000.0, True, 2)]
            postgresql.flush_statistics(session)
        # the maintenance is counted (pgbench -i vacuumed its four tables in the image)
        before, after = counters, postgresql.counters(socket_side)
        assert after["tables.vacuum_count"] == before["tables.vacuum_count"] + 5
        assert after["tables.analyze_count"] == before["tables.analyze_count"] + 5
        assert after["tables.autovacuum_count"] == 0 and after["tables.n_dead_tup"] == 0


@contextmanager
def namespace():
    """A network namespace of this test's own with its loopback up; deleted afterwards."""
    name = f"dbsweep-pgtest-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=True)


@pytest.mark.workflow
def test_single_node_in_a_namespace_takes_its_client_by_tcp_and_this_process_by_the_socket(image):
    with namespace() as netns:
        base = Path(tempfile.mkdtemp(prefix="topo-", dir=image))
        base.chmod(0o755)
        node = node_copies(image / "image", base, 0)[0]
        node.netns = netns
        log = io.StringIO()
        try:
            with ExitStack() as stack:
                def start(node, options):
                    return stack.enter_context(database.running(RECIPE, node.root, log, node=node,
                                                                node_options=options))
                db = cluster.start_cluster("postgresql", None, {}, [node], start, ["127.0.0.1"], log)["primary"]
                assert db.local.host is None  # the node's address is inside its namespace
                assert postgresql.counters(db.local)["replication_position"] > 0
                # The client, in the namespace, over TCP with SCRAM (psql with the password in a 0600 file).
                program, env = postgresql.client("psql", None)
                with postgresql.client_env(db.conn, db.handle.rundir) as connection:
                    done = subprocess.run([*node.enter(), program, "-w", "-X", "-A", "-t", "-c",
                                           "SELECT count(*) FROM pgbench_branches"],
                                          capture_output=True, text=True, env=env | connection)
                assert (done.returncode, done.stdout.strip()) == (0, "1"), done.stderr
            assert datadir_processes(node.root / "data", "postgres") == {}
        finally:
            shutil.rmtree(base, ignore_errors=True)


def test_plain_server_keeps_initdbs_hba(tmp_path):
    text = postgresql.config_text("postgresql", None, {}, tmp_path / "d", tmp_path / "r", 5432)
    assert f"hba_file = '{tmp_path / 'd' / 'pg_hba.conf'}'" in text
