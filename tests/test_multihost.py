"""A topology placed on several hosts (issue 34), on the namespace Slurm cluster (tests/slurm/cluster.sh):
each node a host of its own (network, UTS and mount namespaces), Slurm's commands on ctl."""
import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from conftest import ROOT, Study, leftovers, slurm_turn, table_rows
from dbsweep import delivered, storage
from dbsweep.config import load
from test_multihost_placement import STUDY

pytestmark = pytest.mark.workflow
CLUSTER = ROOT / "tests/slurm/cluster.sh"
HOSTS = ("c1", "c2", "c3", "c4", "c5")
# each host on CPUs of its own, as far as this machine has them (cluster.sh's CLUSTER_CPUS): on 2 CPUs c1, c3
# and c5 on CPU 0, c2 and c4 on CPU 1, so that the client on c1 never shares a CPU with the server on c2
CPUS = {host: [i % os.cpu_count()] for i, host in enumerate(HOSTS)}
SLURM_PROFILE = ("--workflow-profile", str(ROOT / "workflow/profiles/slurm"))


@contextmanager
def beside_the_cluster(folder: Path):
    """A loop filesystem mounted while the cluster starts, as a run measuring beside it has one: its device
    (unmounted and detached on leaving, which the nodes' copies of the host's mounts must not prevent)."""
    image = folder / "fs.img"
    storage.sparse_file(image, "16M")
    dev = storage.sh(["losetup", "--find", "--show", str(image)]).stdout.strip()
    try:
        storage.sh(["mkfs.ext4", "-q", dev])
        (folder / "mnt").mkdir()
        storage.sh(["mount", dev, str(folder / "mnt")])
        try:
            yield dev
        finally:
            storage.sh(["umount", str(folder / "mnt")])
    finally:
        storage.detach(dev)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Five Slurm nodes c1..c5, for this module's tests; removed after them."""
    folder = tmp_path_factory.mktemp("cluster") / "cluster"
    env = os.environ | {"CLUSTER_DIR": str(folder), "CLUSTER_CPUS": " ".join(str(CPUS[h][0]) for h in HOSTS)}
    with slurm_turn():
        try:
            with beside_the_cluster(tmp_path_factory.mktemp("beside")) as dev:
                up = subprocess.run([CLUSTER, "up", str(len(HOSTS))], capture_output=True, text=True, timeout=120,
                                    env=env)
                assert up.returncode == 0, f"cluster.sh up failed: {up.stderr[-3000:]}"
            assert storage.mounted_in(dev) == [], "a node holds a copy of a loop mount of a run beside it"
            yield env
        finally:
            down = subprocess.run([CLUSTER, "down"], capture_output=True, text=True, timeout=120, env=env)
            assert down.returncode == 0, down.stderr


def on_ctl(env: dict, argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    """argv on the cluster's login node (ctl), where Slurm's commands reach its controller."""
    return subprocess.run([CLUSTER, "exec", "ctl", *argv], capture_output=True, text=True, timeout=timeout,
                          env=env | {"LC_ALL": "C.UTF-8"})


def placed(hosts: dict | str) -> dict:
    config = copy.deepcopy(STUDY)
    config["topologies"]["semisync"]["hosts"] = hosts
    return config


# where `hosts: spread` puts a Galera cluster's parts on the idle cluster: Slurm's first nodes, in its order, the
# first (where the job's batch script runs) the client's
GALERA_HOSTS = {"client": "c1", "node1": "c2", "node2": "c3", "node3": "c4"}


def galera_behind_haproxy() -> dict:
    """A three-member Galera cluster, each member and the client on a host of its own that Slurm chooses
    (`hosts: spread`: c1 for the client, c2, c3, c4 for the members), and haproxy (round robin over the members)
    beside the client."""
    config = copy.deepcopy(STUDY)
    config["axes"] |= {"topology": ["galera"], "proxy": ["haproxy"]}
    config["topologies"] = {"galera": {"nodes": 3, "replication": "galera", "hosts": "spread"}}
    return config


@pytest.mark.parametrize("cpus, message", [
    ("0", "CLUSTER_CPUS: '0': 1 CPU lists for 2 nodes (one per node, c1's first)"),
    ("0 4096", "CLUSTER_CPUS: '4096': not a list of this machine's CPUs"),
    ("0 1;reboot", "CLUSTER_CPUS: '1;reboot': not a list of this machine's CPUs")])
def test_cpus_the_cluster_cannot_give_its_nodes_are_refused_before_anything_starts(tmp_path, cpus, message):
    folder = tmp_path / "cluster"
    done = subprocess.run([CLUSTER, "up", "2"], capture_output=True, text=True, timeout=60,
                          env=os.environ | {"CLUSTER_DIR": str(folder), "CLUSTER_CPUS": cpus})
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(f"cluster.sh: {message}"), done.stderr
    assert not folder.exists()  # nothing made (and no cluster of another's taken down: that comes later)


def refused_before_any_job(cluster, study: Study) -> list[str]:
    """The run's one-line refusals of its topology, after checking that it failed without a traceback and
    before any job: no Slurm log, nothing queued."""
    done = on_ctl(cluster, study.argv(*SLURM_PROFILE))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert not Path(study.path("results/logs/slurm")).exists()  # no job was submitted
    assert on_ctl(cluster, ["squeue", "-h"]).stdout.strip() == ""
    return [line for line in done.stderr.splitlines() if line.startswith("dbsweep: topologies.")]


def test_a_placement_slurm_cannot_give_is_refused_in_slurms_words_before_any_job(cluster, tmp_path):
    study = Study(tmp_path / "unknown", placed({"client": "c1", "primary": "c2", "replica1": "c9"}))
    dry = on_ctl(cluster, study.argv("-n", *SLURM_PROFILE))
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert ("dbsweep: placement: topology semisync: client on c1, primary on c2, replica1 on c9 "
            "(one Slurm job: --nodes=3 --nodelist=c1,c2,c9)") in dry.stderr
    assert refused_before_any_job(cluster, study) == [
        "dbsweep: topologies.semisync.hosts: {'client': 'c1', 'primary': 'c2', 'replica1': 'c9'}: "
        "Slurm cannot place it: allocation failure: Invalid node name specified"]
    # the client on c3: Slurm orders the job's nodes c1, c3 and runs its batch script, the client, on c1
    study = Study(tmp_path / "client-last", placed({"client": "c3", "primary": "c1", "replica1": "c2"}))
    assert refused_before_any_job(cluster, study) == [
        "dbsweep: topologies.semisync.hosts: {'client': 'c3', 'primary': 'c1', 'replica1': 'c2'}: "
        "the client's host c3 would not be the job's first host: Slurm would give the job nodes "
        "c[1-3] and run its client on c1; place the client on c1, or its host first in slurm.conf"]
    # a node placed by a constraint no node has: the dry run shows what Slurm is asked; the run is refused in
    # Slurm's words before any job
    hosts = {"client": "c1", "primary": "c2", "replica1": {"constraint": "nvme"}}
    study = Study(tmp_path / "unknown-constraint", placed(hosts))
    dry = on_ctl(cluster, study.argv("-n", *SLURM_PROFILE))
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert ("dbsweep: placement: topology semisync: client on c1, primary on c2, replica1 on a host (constraint "
            "nvme) (one Slurm job: --nodes=3 --nodelist=c1,c2 --constraint=nvme)") in dry.stderr
    assert refused_before_any_job(cluster, study) == [
        f"dbsweep: topologies.semisync.hosts: {hosts!r}: Slurm cannot place it: allocation failure: "
        "Invalid feature specification"]
    # one Slurm knows (cluster.sh: c1, c3 and c5 have ssd): Slurm chooses c3 beside the other parts' hosts
    dry = on_ctl(cluster, Study(tmp_path / "ssd", placed(BY_CONSTRAINT)).argv("-n", *SLURM_PROFILE))
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert ("dbsweep: placement: topology semisync: client on c1, primary on c2, replica1 on c3 (constraint ssd) "
            "(one Slurm job: --nodes=3 --nodelist=c1,c2,c3)") in dry.stderr
    # every part on a host of its own that Slurm chooses (hosts: spread): the dry run shows where each would run,
    # the client on the job's first host
    dry = on_ctl(cluster, Study(tmp_path / "spread", galera_behind_haproxy()).argv("-n", *SLURM_PROFILE))
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert ("dbsweep: placement: topology galera (spread: each part on a host of its own): client on c1, node1 on "
            "c2, node2 on c3, node3 on c4 (one Slurm job: --nodes=4 --nodelist=c1,c2,c3,c4)") in dry.stderr
    # more parts than Slurm has nodes (a client, a primary and a replica on each other node): refused in its
    # words before any job
    config = placed("spread")
    config["topologies"]["semisync"]["replicas"] = len(HOSTS) - 1
    assert refused_before_any_job(cluster, Study(tmp_path / "spread-beyond", config)) == [
        "dbsweep: topologies.semisync.hosts: 'spread': Slurm cannot place it: allocation failure: Requested node "
        "configuration is not available"]


# the replica on a host Slurm chooses by its feature: c3 (c1, the other with ssd, is the client's)
BY_CONSTRAINT = {"client": "c1", "primary": "c2", "replica1": {"constraint": "ssd"}}
# what a replica outage does, on its own host: killed at 2 s, started again at 4 s (its replication resumed at
# 5 s: a MariaDB replica here starts with skip_slave_start), in an 8 s window
OUTAGE = [{"at": 2, "action": "kill", "target": "replica1"}, {"at": 4, "action": "start", "target": "replica1"},
          {"at": 5, "action": "sql", "target": "replica1", "statement": "START SLAVE"}]
# the added round trips (ms) of the kill tests' links: large beside the delayer's own trip (a few tenths of a ms on
# a quiet host, 1.6 ms seen at a load of 7 on 2 CPUs), so delivered.py's tolerance (0.1 ms + 10 %) holds
LINK_DELAY = {"client_latency_ms": 20, "node_latency_ms": 30}
HIDDEN = ("c2", "c3", "c5")  # the hosts that do not share the submitting results tree (c4 does)


def test_placed_cells_run_through_slurm_with_each_node_on_its_host(cluster, server_workdir):
    """The study through the Slurm profile, as a user submits it on the login node, each cell one job: sysbench
    on c1 against the primary on c2, whose semi-sync replica on c3 is killed and started again on its host at
    its events' times, through haproxy on c5; and through haproxy beside it on c1 against a three-member Galera
    cluster each of whose members, and the client, Slurm gave a host of its own (c2, c3 and c4)."""
    config = placed(BY_CONSTRAINT | {"proxy": "c5"})  # haproxy in front of the primary, on a host of its own
    config["topologies"]["semisync"]["semisync_timeout_ms"] = 500  # the primary gives up on its replica soon
    config["axes"]["topology"].append("galera")
    config["topologies"]["galera"] = galera_behind_haproxy()["topologies"]["galera"]
    config["axes"]["proxy"] = ["haproxy"]
    config["axes"]["threads"] = [2, 3]  # 3 for the Galera cell: one connection to each member
    config["axes"]["events"] = ["none", "outage"]
    config["events"] = {"outage": OUTAGE}
    config["workloads"]["write"]["options"]["time"] = 8
    # the Galera cell's links delayed (its proxy beside the client: the semi-sync cell's, on a host of its own, is
    # refused with a delay)
    config["axes"]["network"] = ["lan", "far"]
    config["networks"] = {"lan": {}, "far": LINK_DELAY}
    config["exclude"] = [{"topology": "semisync", "threads": 3}, {"topology": "galera", "threads": 2},
                         {"topology": "semisync", "events": "none"}, {"topology": "galera", "events": "outage"},
                         {"topology": "semisync", "network": "far"}, {"topology": "galera", "network": "lan"}]
    study = Study(server_workdir / "placed", config)
    # the results tree is not shared with c2's and c3's: on each an empty filesystem of its own hides it (the
    # image, in resources/, still is); their nodes' and proxy's results come back through their job steps; c4
    # shares it
    results = study.path("results")
    results.mkdir(parents=True)
    for host in HIDDEN:
        mounted = subprocess.run([CLUSTER, "exec", host, "mount", "-t", "tmpfs", "-o", "size=64m", "hidden",
                                  str(results)], capture_output=True, text=True, env=cluster)
        assert mounted.returncode == 0, mounted.stderr
    try:
        done = on_ctl(cluster, study.argv(*SLURM_PROFILE))
        seen = {host: Path(f"/proc/{holder(cluster, host)}/root", str(results).lstrip("/")) for host in HIDDEN}
        hidden = {host: sorted(str(p.relative_to(there)) for p in there.rglob("*")) for host, there in seen.items()}
    finally:
        for host in HIDDEN:
            subprocess.run([CLUSTER, "exec", host, "umount", str(results)], capture_output=True, env=cluster)
    logs = "".join(p.read_text()[-3000:] for p in study.path("results/logs").rglob("*.log"))
    assert done.returncode == 0, f"{done.stderr[-3000:]}\n{logs}"
    assert not any(name.endswith(("vmstat.txt", ".log", ".cnf")) for files in hidden.values() for name in files), \
        hidden  # what each node's host wrote stayed in its own folder, outside the results tree it saw
    cell = next(study.path("results/runs").rglob("topology~semisync"))
    run = json.loads(next(cell.rglob("rep~1/run.json")).read_text())
    assert run["status"] == "ok" and run["host"]["node"] == "c1" and run["exit_status"] == 0
    # each part on its host's own CPUs: the client's run here, each node's server there
    assert run["host"]["cpus_allowed"] == CPUS["c1"]
    assert run["topology"]["network"]["cpus"] == {"client": CPUS["c1"], "primary": CPUS["c2"],
                                                  "replica1": CPUS["c3"]}
    nodes = {node["name"]: node for node in run["topology"]["nodes"]}
    assert (nodes["primary"]["host"], nodes["primary"]["declared_host"]) == ("c2", "c2")
    # the replica, placed by constraint, landed on c3, which has the feature; read back from Slurm in the job
    assert (nodes["replica1"]["host"], nodes["replica1"]["declared_constraint"], nodes["replica1"]["features"]) \
        == ("c3", "ssd", ["ssd"])
    assert "declared_host" not in nodes["replica1"]
    assert run["topology"]["network"]["hosts"] == {"client": "c1", "primary": "c2", "replica1": "c3"}
    assert nodes["replica1"]["source"] == "primary" and nodes["primary"]["replication"] == "semisync"
    assert set(run["topology"]["network"]["rtt_ms"]) == {"client-primary", "client-replica1", "primary-replica1"}
    delivered = [r for r in table_rows(next(cell.rglob("rep~1/delivered.csv")))
                 if r["kind"] == "host"]
    assert sorted((r["key"], r["declared"], r["delivered"], r["verdict"]) for r in delivered) \
        == [("primary", "c2", "c2", "equal"), ("proxy", "c5", "c5", "equal"),
            ("replica1", "constraint ssd", "c3 (ssd)", "equal")]
    # every node's counters, sampled each second from the client's host over the bridge; the primary
    # counts its replica as a semi-sync client
    counters = table_rows(next(cell.rglob("rep~1/counters.csv")))
    assert {r["node"] for r in counters} == {"primary", "replica1", "proxy"}
    # haproxy on c5, a host of its own, in front of the primary on c2: the client's two connections through it;
    # its numbers asked of its job step each second
    proxy = run["topology"]["proxy"]
    assert (proxy["kind"], proxy["host"], proxy["declared_host"]) == ("haproxy", "c5", "c5")
    assert proxy["backends"] == [f"primary={nodes['primary']['address']}:{nodes['primary']['port']}"]
    assert {r["node_host"] for r in counters if r["node"] == "proxy"} == {"c5"}
    assert max(float(r["value"]) for r in counters if r["name"] == "server.primary.sessions_current") == 2.0
    # the replica killed on c3 at 2 s and started again there at 4 s, each by its job step at its time on the
    # client's clock: the event log says where
    events = table_rows(next(cell.rglob("rep~1/events.csv")))
    assert [(r["action"], r["target"], r["error"]) for r in events] == [("kill", "replica1", ""),
                                                                       ("start", "replica1", ""),
                                                                       ("sql", "replica1", "")]
    assert events[0]["outcome"] == "SIGKILL to replica1's 1 processes on c3"
    assert events[1]["outcome"].startswith("replica1 started, ready after ") and events[1]["outcome"].endswith(" on c3")
    assert all(float(r["late_ms"]) < 500 for r in events), events
    # its outage in the primary's per-second rows: its semi-sync client gone, then back (the statement reached
    # the replica's new server through the relay); commits meanwhile that no replica acknowledged (the primary
    # gave up waiting after 500 ms)
    clients = {int(r["second"]): float(r["value"]) for r in counters
               if r["node"] == "primary" and r["name"] == "Rpl_semi_sync_master_clients"}
    assert {v for s, v in clients.items() if s <= 2} == {1.0}, clients
    assert 0.0 in {v for s, v in clients.items() if 3 <= s <= 4}, clients
    # (back within the window: the server the events started stops with them, before the samplers' last second)
    assert 1.0 in {v for s, v in clients.items() if 5 <= s <= 8}, clients
    sync = {int(r["second"]): float(r["value"]) for r in counters if r["node"] == "primary" and r["name"] == "sync_on"}
    # off within the two seconds after the kill (the kill at 2 s may be up to 0.5 s late, then 500 ms of waiting)
    assert sync[2] == 1.0 and 0.0 in {sync.get(3), sync.get(4)}, sync
    # no row of the replica while it was down (its sampler skips it), rows again once it was back
    down = {int(r["second"]) for r in counters if r["node"] == "replica1"}
    assert 3 not in down and max(down) > 4, sorted(down)
    recovery = table_rows(next(cell.rglob("rep~1/recovery.csv")))
    assert float(recovery[0]["sync_off_s"]) >= 1 and float(recovery[0]["unacked_tx"]) > 0, recovery[0]
    assert {r["node_host"] for r in counters if r["node"] == "primary"} == {"c2"}
    assert {r["node_host"] for r in counters if r["node"] == "replica1"} == {"c3"}
    summary = json.loads(next(cell.rglob("rep~1/summary.json")).read_text())
    assert float(summary["tps"]) > 0
    # each server's CPU time, read on its own host each second (its pid means nothing on c1)
    for name in ("primary", "replica1"):
        assert sum(float(r["value"]) for r in counters if r["node"] == name and r["name"] == "server_cpu_s") > 0
    assert summary["server_cpu_us_per_txn"] > 0
    assert study.path("results/tables/summary.csv.gz").exists()  # aggregated in the submitting tree
    # each node's results came back whole through its job step (no shared filesystem there), byte for byte:
    # the sha256 its host computed is the one the run's record has of the file in the submitting tree
    raw = next(cell.rglob("rep~1/attempt~*/raw"))
    for name in ("primary", "replica1"):
        came = nodes[name]["results"]
        assert came["path"] == "copy-back", came
        assert {"vmstat.txt", "iostat.json"} <= set(came["files"]) and any(f.endswith(".log") for f in came["files"])
        if name == "replica1":  # its second server's logs too: the one its start event started on c3
            assert any(f.startswith("server2-") for f in came["files"]), sorted(came["files"])
        for file, sha256 in came["files"].items():
            assert run["checksums"][f"{name}/{file}"] == sha256
            assert hashlib.sha256((raw / name / file).read_bytes()).hexdigest() == sha256
    # every host's monitors wrote rows: the client's host's (node empty), each node's on its own host, over
    # the measured window's seconds, on the client's clock (the offset recorded for each host)
    system = table_rows(next(cell.rglob("rep~1/system.csv")))
    seconds = {}
    for r in system:
        if r["us"] != "":
            seconds.setdefault((r["node"], r["node_host"]), set()).add(int(r["second"]))
    # haproxy's host, c5, a host of its own, has its vmstat rows too
    assert set(seconds) == {("", "c1"), ("primary", "c2"), ("replica1", "c3"), ("proxy", "c5")}
    client = seconds[("", "c1")]
    assert all(len(s) >= 2 and min(client) - 1 <= min(s) and max(s) <= max(client) + 1 for s in seconds.values()), \
        seconds
    assert {r["device"] for r in system if r["node"] == "primary" and r["device"]} \
        == {Path(nodes["primary"]["filesystem"]["loop"]).name}  # iostat on c2 watched the primary's own device
    assert set(run["topology"]["network"]["clocks"]) == {"primary", "replica1", "proxy"}
    assert "clock" not in proxy
    # the proxy's host does not share the results tree either: its monitors' files came back through its job
    # step, byte for byte, and its record says so, as a node's does
    came = proxy["results"]
    assert came["path"] == "copy-back" and "vmstat.txt" in came["files"], came
    for file, sha256 in came["files"].items():
        assert run["checksums"][f"proxy/{file}"] == sha256
        assert hashlib.sha256((raw / "proxy" / file).read_bytes()).hexdigest() == sha256
    # a three-member Galera cluster, each member on a host of its own that Slurm chose (hosts: spread), as the
    # client is: its family's own start (a joiner's grastate.dat staged on the client's host and written into the
    # member's filesystem on its host); the client through haproxy beside it
    cell = next(study.path("results/runs").rglob("topology~galera"))
    assert "proxy~haproxy" in str(cell)
    run = json.loads(next(cell.rglob("rep~1/run.json")).read_text())
    assert run["status"] == "ok" and run["exit_status"] == 0, run.get("error")
    members = {node["name"]: node for node in run["topology"]["nodes"]}
    # the client on the job's first host, where its batch script ran; each member on the next of the job's
    assert run["host"]["node"] == "c1" and run["topology"]["declared_client_spread"] is True
    assert {name: (node["host"], node["declared_spread"]) for name, node in members.items()} \
        == {"node1": ("c2", True), "node2": ("c3", True), "node3": ("c4", True)}
    assert not any("declared_host" in node for node in members.values())
    assert run["topology"]["network"]["hosts"] == GALERA_HOSTS
    assert {node["replication"] for node in members.values()} == {"galera"}
    assert len({node["cluster_uuid"] for node in members.values()}) == 1
    # how each joiner got its state, from its error log on its own host: never "unknown", never a full copy
    assert members["node1"]["state_transfer"] == "bootstrap"
    assert {members[name]["state_transfer"] for name in ("node2", "node3")} <= {"none", "ist"}
    proxy = run["topology"]["proxy"]
    assert (proxy["kind"], proxy["host"], proxy["declared_host"], proxy["netns"]) == ("haproxy", "c1", "c1", None)
    assert proxy["backends"] == [f"{name}={node['address']}:{node['port']}" for name, node in members.items()]
    # each link's delay added at both of its ends, on their hosts: its round trip, at the window's start and end,
    # at least the declared one and within delivered.py's tolerance of it
    links = [r for r in table_rows(next(cell.rglob("rep~1/delivered.csv"))) if r["kind"] == "link"]
    declared_rtt = {f"client-{name}": 20 for name in members} | {"node1-node2": 30, "node1-node3": 30,
                                                                 "node2-node3": 30}
    assert {r["key"].split()[0] for r in links} == set(declared_rtt) and len(links) == 2 * len(declared_rtt), links
    assert all(float(r["declared"]) == declared_rtt[r["key"].split()[0]] <= float(r["delivered"]) for r in links)
    assert {r["verdict"] for r in links} == {"equal"}, links
    assert {link: rtt >= declared_rtt[link] for link, rtt in run["topology"]["network"]["rtt_ms"].items()} \
        == dict.fromkeys(declared_rtt, True), run["topology"]["network"]["rtt_ms"]
    print(f"Galera cell, declared vs measured round trip (ms): "
          f"{[(r['key'], r['declared'], r['delivered']) for r in links]}")
    # each part on a host no other part ran on, read back from the record; the proxy beside the client
    delivered = [r for r in table_rows(next(cell.rglob("rep~1/delivered.csv"))) if r["kind"] == "host"]
    own = "a host of its own"
    assert sorted((r["key"], r["declared"], r["delivered"], r["verdict"]) for r in delivered) \
        == [("client", own, "c1", "equal"), ("node1", own, "c2", "equal"), ("node2", own, "c3", "equal"),
            ("node3", own, "c4", "equal"), ("proxy", "c1", "c1", "equal")]
    # node1 and node2 on hosts without the results tree: theirs came back through their job steps; node3's host
    # shares it: its step wrote them straight into it, and the run's record has them, byte for byte
    assert {name: node["results"]["path"] for name, node in members.items()} \
        == {"node1": "copy-back", "node2": "copy-back", "node3": "shared"}
    raw = next(cell.rglob("rep~1/attempt~*/raw"))
    shared = {str(p.relative_to(raw)) for p in (raw / "node3").rglob("*") if p.is_file()}
    assert {"node3/vmstat.txt", "node3/iostat.json"} <= shared and any(f.endswith(".log") for f in shared), shared
    for file in shared:
        assert run["checksums"][file] == hashlib.sha256((raw / file).read_bytes()).hexdigest(), file
    counters = table_rows(next(cell.rglob("rep~1/counters.csv")))
    assert {(r["node"], r["node_host"]) for r in counters if r["name"] == "wsrep_flow_control_paused_ns"} \
        == {("node1", "c2"), ("node2", "c3"), ("node3", "c4")}
    # the client's three connections went through haproxy, round robin, one to each member on its host
    held = {name: max([float(r["value"]) for r in counters if r["node"] == "proxy"
                       and r["name"] == f"server.{name}.sessions_current"], default=0) for name in members}
    assert held == dict.fromkeys(members, 1.0), (held, sorted({r["name"] for r in counters if r["node"] == "proxy"}))
    assert {r["node_host"] for r in counters if r["node"] == "proxy"} == {"c1"}
    system = table_rows(next(cell.rglob("rep~1/system.csv")))
    assert {(r["node"], r["node_host"]) for r in system if r["us"] != ""} \
        == {("", "c1"), ("node1", "c2"), ("node2", "c3"), ("node3", "c4")}
    assert float(json.loads(next(cell.rglob("rep~1/summary.json")).read_text())["tps"]) > 0
    aggregated = table_rows(study.path("results/tables/system.csv.gz"))
    assert {(r["host"], r["node_host"]) for r in aggregated} == {("c1", host) for host in HOSTS}
    # nothing left on any node after the job
    assert in_hosts(cluster, HOSTS) == []
    for host in HOSTS:
        assert [m for m in mounts_on(cluster, host) if "dbsweep-hosts" in m] == [], host
    assert "dbsweep-hosts" not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def image():
    """The cell's prepared image, made by a local run of its prepare rule (the image does not depend on
    where the nodes run), in a folder the servers' user can reach."""
    folder = Path(tempfile.mkdtemp(prefix="dbsweep-test-multihost-", dir="/var/tmp"))
    folder.chmod(0o755)
    config = copy.deepcopy(STUDY)
    del config["topologies"]["semisync"]["hosts"]
    study = Study(folder / "prepare", config)
    path = load(copy.deepcopy(config)).image(load(copy.deepcopy(config)).cells[0])
    study.run(path)
    yield folder, study.path(path)
    if not leftovers(folder):
        shutil.rmtree(folder, ignore_errors=True)


def holder(env: dict, host: str) -> int:
    return int((Path(env["CLUSTER_DIR"]) / f"hosts/{host}/holder.pid").read_text())


def mounts_on(env: dict, host: str) -> list[str]:
    """The mount points of host's own mount namespace (its holder's view)."""
    return [line.split()[1] for line in Path(f"/proc/{holder(env, host)}/mounts").read_text().splitlines()]


def net_of(env: dict, host: str) -> str:
    return os.readlink(f"/proc/{holder(env, host)}/ns/net")


def net_ns(pid: int) -> str | None:
    """A process's network namespace; None once it has exited (another test's monitor may end at any moment)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def in_hosts(env: dict, names: tuple[str, ...]) -> list[str]:
    """Live processes, in any of these hosts' network namespaces, that a node's step (or the client's host:
    haproxy) would start."""
    spaces = {net_of(env, host): host for host in HOSTS if host in names}
    found = []
    for proc in psutil.process_iter(["pid", "name", "cmdline", "status"]):
        space = net_ns(proc.pid)
        if proc.info["status"] == psutil.STATUS_ZOMBIE or space not in spaces:
            continue
        cmd = " ".join(proc.info["cmdline"] or [])
        if proc.info["name"] in ("mariadbd", "mysqld", "vmstat", "iostat", "haproxy") or "dbsweep" in cmd:
            found.append(f"{spaces[space]}: {cmd}")
    return found


def wait_for(path: Path, job_log: Path, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"no {path} after {seconds} s; job log:\n{job_log.read_text()[-3000:]}"
        time.sleep(0.5)


def kill_node_and_guardian(server: psutil.Process) -> None:
    """SIGKILL a node's step process and its guardian at once (as a kill of the step's whole process tree
    would): nothing on the host releases its mount and loop device but the node's Epilog."""
    step = next(p for p in server.parents() if "dbsweep.topology.host_step" in " ".join(p.cmdline()))
    guardian = [p for p in step.children() if "dbsweep.runtime.guardian" in " ".join(p.cmdline())]
    assert len(guardian) == 1
    for proc in (step, *guardian):
        proc.kill()


def proxy_on_c4() -> dict:
    """The semi-sync pair on c2 and c3, haproxy in front of the primary on c4, a host of its own."""
    config = placed({"client": "c1", "primary": "c2", "replica1": "c3", "proxy": "c4"})
    config["axes"]["proxy"] = ["haproxy"]
    return config


@pytest.mark.parametrize("kill, cell", [(["scancel"], proxy_on_c4), (["scancel", "--signal=KILL", "--full"],
                                                                     galera_behind_haproxy),
                                        (["guardian"], lambda: placed({"client": "c1", "primary": "c2",
                                                                       "replica1": "c3"}))],
                         ids=["scancel-proxy-host", "sigkill-galera-haproxy", "guardian-too"])
def test_each_node_runs_on_its_host_from_its_own_copy_and_killing_the_job_leaves_nothing(cluster, image, kill,
                                                                                         cell):
    """Each node's server in its host's namespaces, on its own copy of the image, and nothing left on any host
    once the job is killed: a semi-sync pair (c2, c3), with haproxy on c4, a host of its own, in front of the
    primary, or a Galera cluster whose members and client Slurm gave a host of its own each (hosts: spread: c2,
    c3, c4 and c1) with haproxy beside the client, in front of the members on their hosts."""
    folder, img = image
    config = cell()
    placed_on = config["topologies"][config["axes"]["topology"][0]]["hosts"]
    delayed = not (isinstance(placed_on, dict) and "proxy" in placed_on)
    if delayed:  # a delay on each link, added at both of its ends, each on its own host (no proxy of its own)
        config["network"] = LINK_DELAY
    study = load(config)
    galera = cell is galera_behind_haproxy
    topology = study.recipe(study.cells[0]).topology
    # where each part runs: on the host named, or (spread) where the job of the hosts its planning gives, the
    # idle cluster's first, puts it: the client on its first node, where the batch script runs, each node on the
    # next
    spread = topology["hosts"] == "spread"
    declared = dict(zip(["client", *topology["nodes"]], HOSTS, strict=False)) if spread else topology["hosts"]
    used = tuple(sorted(set(declared.values())))
    raw, job_log = folder / kill[-1] / "raw", folder / f"job-{kill[-1]}.log"
    spec = {"recipe": study.recipe(study.cells[0]).as_dict(), "image": str(img), "raw": str(raw),
            "hold_s": 600}
    (folder / "spec.json").write_text(json.dumps(spec))  # read by the job at its start
    submitted = on_ctl(cluster, ["env", f"PYTHONPATH={ROOT / 'workflow'}", "sbatch", "--parsable", "--exclusive",
                                 f"--nodes={len(used)}", f"--nodelist={','.join(used)}", f"--output={job_log}",
                                 f"--wrap={sys.executable} -m dbsweep.topology.hosts {folder / 'spec.json'}"])
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    cgroups = []
    try:
        wait_for(raw / "hosts.json", job_log)
        shown = json.loads((raw / "hosts.json").read_text())
        assert shown["client"] == "c1"  # the job's batch step, where the client runs
        names = [name for name in declared if name not in ("client", "proxy")]
        if galera:  # one cluster of three, each member joined from its image, not by a full copy
            assert {node["topology"]["replication"] for node in shown["nodes"].values()} == {"galera"}
            assert len({node["topology"]["cluster_uuid"] for node in shown["nodes"].values()}) == 1
            # how each joiner got its state, read in its error log on its own host (was "unknown")
            transfers = [shown["nodes"][name]["topology"]["state_transfer"] for name in names]
            assert transfers[0] == "bootstrap" and set(transfers[1:]) <= {"none", "ist"}, transfers
        else:
            # semi-synchronous replication across hosts: the primary on c2 counts the replica on c3 as a semi-sync
            # client, and the replica replicates from the primary's address on the bridge
            assert shown["counters"]["primary"]["Rpl_semi_sync_master_clients"] == 1, shown["counters"]["primary"]
            assert shown["nodes"]["replica1"]["topology"]["source"] == "primary"
            assert shown["nodes"]["primary"]["topology"]["replication"] == "semisync"
        # each link's round trip, over the bridge (and the delay declared); each host's clock against the client's:
        # one machine's clock here, so the true offset is 0, and the estimate must hold it within its bound
        assert set(shown["rtt_ms"]) == {f"client-{a}" for a in names} | {f"{a}-{b}" for i, a in enumerate(names)
                                                                         for b in names[i + 1:]}
        limit = 20 + (max(LINK_DELAY.values()) if delayed else 0)
        assert all(0 < rtt < limit for rtt in shown["rtt_ms"].values()), shown["rtt_ms"]
        print(f"round trips (ms): {shown['rtt_ms']}")
        if delayed:  # each link's round trip at least the declared one, and within delivered.py's tolerance
            declared_rtt = {f"{link['a']}-{link['b']}": link["latency_ms"] for link in shown["links"]}
            assert set(declared_rtt) == set(shown["rtt_ms"])
            assert all(shown["rtt_ms"][link] >= rtt for link, rtt in declared_rtt.items()), shown["rtt_ms"]
            checks = delivered.topology(study.recipe(study.cells[0]),
                                        {"network": {"links": shown["links"], "rtt_ms": shown["rtt_ms"]}}, {})
            said = {link: (rtt, shown["rtt_ms"][link]) for link, rtt in declared_rtt.items()}
            print(f"declared vs measured round trip (ms): {said}")
            assert len(checks) == len(declared_rtt) and {c.verdict for c in checks} == {"equal"}, said
            # on each host one rule per peer, named by the repetition, handing what the peer sends to the delayer
            for host in used:
                rules = delay_rules(cluster, host)
                assert len(rules) == len(used) - 1 and all("--queue-bypass" in r for r in rules), (host, rules)
        for node in shown["nodes"].values():
            assert abs(node["clock"]["offset_ms"]) <= node["clock"]["within_ms"] + 0.5, node["clock"]
        if spread:  # every server in a network and UTS namespace of its own, none the client's host's
            servers = [psutil.Process(shown["nodes"][name]["pid"]) for name in names]
            for kind in ("net", "uts"):
                spaces = {os.readlink(f"/proc/{server.pid}/ns/{kind}") for server in servers}
                assert len(spaces) == len(names) and os.readlink(f"/proc/{holder(cluster, 'c1')}/ns/{kind}") \
                    not in spaces, kind
        for name in names:
            host, node = declared[name], shown["nodes"][name]
            # the server, asked from the client's host over the bridge, says it runs on its declared host
            assert node["host"] == node["delivered"]["hostname"] == host
            assert node["address"] == f"198.19.34.{host[1:]}"
            assert node["delivered"]["datadir"].rstrip("/") == node["datadir"]
            # its datadir is a mount of its host's own mount namespace, on a loop device of its own copy
            mount = str(Path(node["datadir"]).parent)
            assert mount in mounts_on(cluster, host)
            assert all(mount not in mounts_on(cluster, other) for other in used if other != host)
            assert mount not in [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
            assert node["filesystem"]["restored_from"] == str(img)
            assert node["cpus"] == CPUS[host]  # its server on its host's own CPUs
            assert node["results"] == {"path": "shared"}  # the hosts share the submitting tree here
            # the host's monitors, in its namespaces, writing into the shared tree
            monitors = [p for p in psutil.process_iter(["name"]) if p.info["name"] in ("vmstat", "iostat")
                        and net_ns(p.pid) == net_of(cluster, host)]
            assert sorted(p.info["name"] for p in monitors) == ["iostat", "vmstat"]
            wait_for(raw / name / "vmstat.txt", job_log)
            # the server's process: in its host's namespaces, under the step's slurmstepd, in a repetition cgroup
            server = psutil.Process(node["pid"])
            in_namespaces_of(cluster, host, server)
            assert "slurmstepd" in [p.name() for p in server.parents()]
            cgroups += repetition_cgroups(server)
            # each host holds its own measuring lock
            said = subprocess.run([CLUSTER, "exec", host, "cat", os.environ["DBSWEEP_MEASURE_LOCK"]],
                                  capture_output=True, text=True, env=cluster).stdout
            assert said.startswith("pid ") and f" on {host} " in said and f"node {name}" in said, said
        if shown["proxy"] is not None:
            # haproxy beside the client (in c1's namespaces, in the repetition's cgroup there), or on c4 (in c4's,
            # in its step's cgroup there, under c4's measuring lock), its backends the nodes that take writes (the
            # members, or the primary) at their hosts' addresses; its health checks see every one up
            proxy, where, writers = shown["proxy"], declared.get("proxy", "c1"), names if galera else names[:1]
            assert proxy["kind"] == "haproxy" and proxy["netns"] is None and proxy["host"] == where
            assert proxy["backends"] == [f"{name}={shown['nodes'][name]['address']}:{shown['nodes'][name]['port']}"
                                         for name in writers]
            assert {name: proxy["stats"][f"server.{name}.up"] for name in writers} == dict.fromkeys(writers, 1.0)
            haproxy = psutil.Process(proxy["pid"])
            assert haproxy.name() == "haproxy"
            in_namespaces_of(cluster, where, haproxy)
            cgroups += repetition_cgroups(haproxy)
            if where != "c1":
                assert "slurmstepd" in [p.name() for p in haproxy.parents()]
                said = subprocess.run([CLUSTER, "exec", where, "cat", os.environ["DBSWEEP_MEASURE_LOCK"]],
                                      capture_output=True, text=True, env=cluster).stdout
                assert f" on {where} " in said and "proxy of" in said, said
                assert proxy["results"] == {"path": "shared"}  # how its results come back, as a node's record says
        assert in_hosts(cluster, used)

    except BaseException:  # a check failed while the job held its nodes: end it, so that each node's
        on_ctl(cluster, ["scancel", "--signal=KILL", "--full", job])  # guardian releases what it held
        raise
    if kill == ["guardian"]:  # the first node's host is left to its Epilog; the job ends with its step
        kill_node_and_guardian(psutil.Process(shown["nodes"][names[0]]["pid"]))
    else:  # TERM, then KILL after KillWait; or KILL at once (each node's guardian releases what it held)
        cancelled = on_ctl(cluster, [*kill, job])
        assert cancelled.returncode == 0, cancelled.stderr
    deadline = time.monotonic() + 60
    while on_ctl(cluster, ["squeue", "-h", "-j", job]).stdout.strip() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert in_hosts(cluster, used) == []
    for host in used:
        assert [m for m in mounts_on(cluster, host) if "dbsweep-hosts" in m] == [], host
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert "dbsweep-hosts" not in loops, job_log.read_text()[-4000:]
    assert {host: delay_rules(cluster, host) for host in used} == {host: [] for host in used}
    assert [cgroup for cgroup in cgroups if cgroup.exists()] == []
    # the nodes' server logs came back into the submitting tree (one filesystem shared by the hosts), but
    # from a node killed with its guardian, which had no moment to copy them
    for name in names[1:]:
        assert list((raw / name).glob("*.log")), name
    assert bool(list((raw / names[0]).glob("*.log"))) == (kill != ["guardian"])


def delay_rules(env: dict, host: str) -> list[str]:
    """The link delays' iptables rules in host's network namespace (their comment names the repetition)."""
    said = subprocess.run([CLUSTER, "exec", host, "iptables", "-w", "-S", "INPUT"], capture_output=True, text=True,
                          env=env)
    assert said.returncode == 0, said.stderr
    return [line for line in said.stdout.splitlines() if "dbsweep" in line]


def in_namespaces_of(env: dict, host: str, proc: psutil.Process) -> None:
    """proc runs in host's network and UTS namespaces (its hostname is the host's)."""
    assert os.readlink(f"/proc/{proc.pid}/ns/net") == net_of(env, host), (host, proc.cmdline())
    assert os.readlink(f"/proc/{proc.pid}/ns/uts") == os.readlink(f"/proc/{holder(env, host)}/ns/uts"), host


def repetition_cgroups(proc: psutil.Process) -> list[Path]:
    """The dbsweep cgroups proc is in (a repetition's, on its host); at least one."""
    found = [Path("/sys/fs/cgroup", controllers or "unified", path.lstrip("/"))
             for _, controllers, path in (line.split(":", 2) for line in
                                          Path(f"/proc/{proc.pid}/cgroup").read_text().splitlines())
             if "dbsweep" in path]
    assert found and found[-1].is_dir(), proc.cmdline()
    return found
