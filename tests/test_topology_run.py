"""Topology cells end to end, on real servers in real network namespaces: a semi-sync replica two
milliseconds away (the primary waits a round trip per commit, the link's round trip is measured, every
node's counters carry their node), the same replica cut off for longer than the semi-sync timeout (the
primary falls back to async and says so), and a Galera member killed behind haproxy and started again
(the client reconnects through the proxy; the member catches up by IST). Nothing is left: no server,
namespace or mount."""
import json
import subprocess
from pathlib import Path

import pytest

from conftest import leftovers, table_rows as rows
from dbsweep.engines import mariadb_cluster

pytestmark = pytest.mark.workflow

WINDOW_S = 8


@pytest.fixture
def workdir(server_workdir):
    return server_workdir


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def config() -> dict:
    return {
        "study": "topology",
        "axes": {"engine": ["innodb"], "memory": ["32M"], "filesystem": ["ext4"], "threads": [2],
                 "workload": ["write"], "topology": ["single", "semisync", "galera3"], "proxy": ["none", "rr"],
                 "events": ["none", "outage", "loss", "misc"]},
        "include": [],
        "exclude": [{"topology": "single", "events": ["outage", "loss"]},
                    {"topology": "semisync", "events": "loss"}, {"topology": "semisync", "proxy": "rr"},
                    {"topology": "single", "events": "misc"},
                    {"topology": "galera3", "events": ["none", "outage", "misc"]},
                    {"topology": "galera3", "proxy": "none"},
                    {"topology": "single", "proxy": "rr"}],
        "topologies": {"semisync": {"replicas": 1, "replication": "semisync", "semisync_timeout_ms": 500},
                       "galera3": {"nodes": 3, "replication": "galera"}},
        "network": {"node_latency_ms": 2},
        "proxies": {"rr": {"type": "haproxy", "balance": "roundrobin"}},
        "events": {"outage": [{"at": 2, "for": 3, "action": "cut", "target": "link primary-replica1"}],
                   "loss": [{"at": 3, "action": "kill", "target": "node2"},
                            {"at": 6, "action": "start", "target": "node2"}],
                   "misc": [{"at": 1, "for": 1, "action": "delay", "target": "link client-primary", "latency_ms": 20},
                            {"at": 2.5, "for": 1, "action": "loss", "target": "link primary-replica1", "percent": 50},
                            {"at": 4, "action": "stop", "target": "replica1"},
                            {"at": 5, "action": "start", "target": "replica1"},
                            {"at": 6, "action": "restart", "target": "replica1"}]},
        "filesystems": {"ext4": {"type": "ext4", "size": "600M"}},
        "workloads": {"write": {"tool": "sysbench", "options": {"script": "oltp_write_only", "tables": 1,
                                                                 "table_size": 1000, "time": WINDOW_S}}},
    }


# The galera3 cell's three members, proxy and client on 2 cores: under the suite's load the user-space delayer
# delivered 2.8-3.9 ms for a declared 2 (CI), which delivered.csv rightly calls deviated; every other check holds.
@pytest.mark.deviates("link")
def test_replicas_a_cluster_a_proxy_and_their_faults(study_factory):
    study = study_factory(config())
    # and aggregate: not the rest of the analysis
    study.run("results/tables/topology.md", "results/plots/replication.png")
    summary = {(r["topology"], r["events"]): r for r in rows(study.path("results/tables/summary.csv.gz"))}
    assert set(summary) == {("single", "none"), ("semisync", "none"), ("semisync", "outage"), ("galera3", "loss"),
                            ("semisync", "misc")}

    # a commit waits a round trip to the replica: about 2 ms more per transaction than alone (0.58 ms more in a
    # CI run where both cells ran CPU-bound beside the suite's other worker; an asynchronous commit adds none)
    single, semi = summary[("single", "none")], summary[("semisync", "none")]
    assert float(semi["lat_mean_ms"]) > float(single["lat_mean_ms"]) + 0.4
    assert 1.5 < float(semi["rtt_node_ms"]) < 6 and float(semi["rtt_client_ms"]) < 1.5
    runs = {path.parent.parent.relative_to(study.path("results/runs")).as_posix(): json.loads(path.read_text())
            for path in study.path("results/runs").rglob("rep~1/run.json")}
    run = next(r for r in runs.values() if r["cell"]["topology"] == "semisync" and r["cell"]["events"] == "none")
    nodes = {node["name"]: node for node in run["topology"]["nodes"]}
    assert set(nodes) == {"primary", "replica1"} and nodes["replica1"]["provision_s"] > 0
    # each node's SHOW ENGINE INNODB STATUS before and after the window: the primary's, then the replica's
    assert run["engine_status"] == {moment: {"primary": f"engine_status.{moment}.txt",
                                             "replica1": f"engine_status-replica1.{moment}.txt"}
                                    for moment in ("start", "end")}
    cell = next(key for key, r in runs.items() if r is run)
    raw = study.path("results/runs", cell, "rep~1", run["attempt"], "raw")
    for name in ("engine_status.end.txt", "engine_status-replica1.end.txt"):
        assert "\nBUFFER POOL AND MEMORY\n" in (raw / name).read_text(), name
    counters = rows(study.path("results/tables/counters.csv.gz"))
    semi_rows = [r for r in counters if r["topology"] == "semisync" and r["events"] == "none"]
    assert {r["node"] for r in semi_rows} == {"primary", "replica1"}
    assert any(r["name"] == "replication_behind" and r["node"] == "replica1" for r in semi_rows)
    assert all(r["value"] == "1.0" for r in semi_rows if r["name"] == "sync_on")
    assert float(semi["unacked_tx"]) == 0  # every commit waited for the replica's acknowledgement

    # the replica cut off for longer than the timeout: the primary stops waiting, then catches up
    outage = summary[("semisync", "outage")]
    assert float(outage["sync_off_s"]) >= 2
    recovery = {(r["topology"], r["action"]): r for r in rows(study.path("results/tables/recovery.csv.gz"))}
    assert float(recovery[("semisync", "cut")]["sync_off_s"]) >= 2
    # meanwhile it committed on alone: commits that would have been lost with it
    assert float(outage["unacked_tx"]) > 10 and float(recovery[("semisync", "cut")]["unacked_tx"]) > 10

    # a member killed behind haproxy: the client reconnected, the run completed; started again, the member
    # recovered its position from InnoDB and caught up by IST (a full copy would have been refused)
    samples = [r for r in rows(study.path("results/tables/samples.csv.gz")) if r["topology"] == "galera3"]
    assert sum(float(r["reconn_s"] or 0) for r in samples) >= 1
    events = [r for r in rows(study.path("results/tables/events.csv.gz")) if r["topology"] == "galera3"]
    assert [(r["action"], r["target"]) for r in events] == [("kill", "node2"), ("start", "node2")]
    assert not any(r["error"] for r in events) and "started, ready after" in events[1]["outcome"]
    logs = list(study.root.glob("results/runs/**/topology~galera3/**/raw/node2/server*-error.log"))
    assert "ist" in [mariadb_cluster.state_transfer(log) for log in logs], logs  # its first start: "none"
    galera = next(r for r in runs.values() if r["cell"]["topology"] == "galera3")
    members = {node["name"] for node in galera["topology"]["nodes"]}
    # each member's engine status before the window; after it, not node2's: a server an event started is
    # stopped with the window's events, before the window's end snapshot
    assert set(galera["engine_status"]["start"]) == members
    assert set(galera["engine_status"]["end"]) == members - {"node2"}

    # every other action at its time: a slower link, lossy link, a replica stopped, started, restarted
    misc = [r for r in rows(study.path("results/tables/events.csv.gz")) if r["events"] == "misc"]
    assert [r["action"] for r in misc] == ["delay", "undelay", "loss", "unloss", "stop", "start", "restart"]
    assert not any(r["error"] for r in misc), misc
    # each at its second, or at once when the one before it (a replica's stop or start, seconds on a busy
    # host) ended after that second: one thread runs them in turn (raw/events.jsonl: each one's end)
    raw = next(study.root.glob("results/runs/**/events~misc/**/raw/events.jsonl")).read_text()
    free = 0.0
    for record in map(json.loads, raw.splitlines()):
        assert abs(record["actual"] - max(record["planned"], free)) < 0.1, record
        free = record["done"]
    assert "started, ready after" in next(r["outcome"] for r in misc if r["action"] == "start")
    slow = [r for r in rows(study.path("results/tables/samples.csv.gz")) if r["events"] == "misc"]
    assert max(float(r["lat_pct_ms"] or 0) for r in slow if r["second"] == "2") > 20  # +20 ms round trip

    used = {ns for r in runs.values() for ns in r["topology"]["network"]["namespaces"].values()}
    assert len(used) == 2 + 3 * 3 + 4  # client and nodes of every repetition, each a namespace of its own
    assert not used & namespaces()  # every one deleted (other runs on this host may hold their own)
    assert leftovers(study.root) == []
    assert Path(study.path("results/plots/replication.png")).stat().st_size > 10_000
    assert "lag_max_s" in Path(study.path("results/tables/topology.md")).read_text()
