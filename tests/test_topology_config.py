"""A study's topologies, networks and proxies: what a cell's recipe holds, and what is not applicable."""
import copy

import pytest

from dbsweep.config import load
from dbsweep.errors import ConfigError

STUDY = {
    "study": "topo",
    "axes": {"engine": ["innodb", "postgresql"], "topology": ["single", "semi", "galera3"],
             "proxy": ["none", "haproxy"], "workload": ["ro"]},
    "topologies": {"semi": {"replicas": 2, "replication": "semisync", "semisync_timeout_ms": 500},
                   "galera3": {"nodes": 3, "replication": "galera"}},
    "network": {"node_latency_ms": 2},
    "workloads": {"ro": {"tool": "sysbench", "options": {"script": "oltp_read_only", "time": 5, "tables": 1,
                                                         "table_size": 1000}}},
}


def cells(study):
    return {cell.path: study.recipe(cell) for cell in study.cells}


def test_a_study_without_topology_axes_has_no_topology_in_its_recipes():
    plain = copy.deepcopy(STUDY)
    for axis in ("topology", "proxy"):
        del plain["axes"][axis]
    study = load(plain)
    assert all(recipe.topology is None and "topology" not in recipe.as_dict() for recipe in cells(study).values())


def test_a_topology_cell_carries_its_nodes_links_and_proxy():
    recipes = cells(load(copy.deepcopy(STUDY)))
    semi = next(r for p, r in recipes.items() if "innodb" in p and "topology~semi/" in p and "proxy~haproxy" in p)
    assert semi.topology == {"name": "semi", "replication": "semisync",
                                "nodes": ["primary", "replica1", "replica2"], "settings": {"semisync_timeout_ms": 500}}
    assert semi.network == {"client_latency_ms": 0.0, "node_latency_ms": 2, "jitter_ms": 0.0}
    assert semi.proxy == {"name": "haproxy", "type": "haproxy", "balance": "roundrobin"}
    single = next(r for p, r in recipes.items() if "postgresql" in p and "topology~single" in p and "proxy~none" in p)
    assert single.topology["nodes"] == ["primary"] and single.proxy is None


def test_a_network_axis_chooses_the_links():
    config = copy.deepcopy(STUDY)
    del config["network"]
    config["axes"]["network"] = ["lan", "far"]
    config["networks"] = {"lan": {}, "far": {"node_latency_ms": 5, "client_latency_ms": 1}}
    recipes = cells(load(config))
    far = [r.network for p, r in recipes.items() if "network~far" in p]
    assert far and all(n == {"client_latency_ms": 1, "node_latency_ms": 5, "jitter_ms": 0.0} for n in far)


def test_a_query_timing_workload_is_not_applicable_on_a_topology():
    config = copy.deepcopy(STUDY)
    config["workloads"]["q"] = {"tool": "query", "options": {"setup": "config/studies/query/setup.sql",
                                                             "query": "config/studies/query/revenue.sql"}}
    config["axes"]["workload"] = ["ro", "q"]
    study = load(config)
    why = [w for p, w in study.not_applicable if "workload~q" in p]
    assert why and all("client runs inside dbsweep" in w for w in why)


def test_a_network_without_a_topology_axis_is_refused():
    config = copy.deepcopy(STUDY)
    del config["axes"]["topology"]
    config["axes"]["network"] = ["lan"]
    config["networks"] = {"lan": {}}
    del config["network"]
    with pytest.raises(ConfigError, match=r"^axes.network: \['lan'\]: links join the nodes of a topology"):
        load(config)


def test_a_topology_an_engine_cannot_run_is_listed_not_applicable():
    config = copy.deepcopy(STUDY)
    config["axes"]["engine"] = ["innodb", "myrocks", "postgresql"]
    study = load(config)
    why = dict(study.not_applicable)
    galera = {p: w for p, w in why.items() if "topology~galera3" in p}
    assert {p.split("/")[0] for p in galera} == {"engine~myrocks", "engine~postgresql"}
    assert all("galera replication does not apply" in w for w in galera.values())
    semi = [w for p, w in why.items() if "topology~semi/" in p]
    assert semi and all("postgresql replicates async, sync" in w for w in semi)
    ran = {cell.path.split("/")[0] for cell in study.cells if cell["topology"] == "galera3"}
    assert ran == {"engine~innodb"}


def test_postgresql_refuses_more_sync_standbys_than_replicas_at_load():
    config = copy.deepcopy(STUDY)
    config["axes"]["engine"] = ["postgresql"]
    config["axes"]["topology"] = ["single", "sync"]
    config["topologies"] = {"sync": {"replicas": 1, "replication": "sync", "sync_standbys": 1}}
    assert load(config)
    config["topologies"]["sync"]["replicas"] = 0
    with pytest.raises(ConfigError, match=r"^topologies.sync"):
        load(config)


# --- issue 32: a link delay below what this host's delay mechanism can deliver is refused at load ---------

@pytest.fixture
def floor_file(tmp_path):
    """link_floor with a file of its own and nothing known in this process: the floor is measured (real
    namespaces, the real delayer) and stored there."""
    from dbsweep.topology import link_floor
    saved = (link_floor.FILE, dict(link_floor._KNOWN))
    link_floor.FILE, link_floor._KNOWN = tmp_path / "resources" / "link-floor.json", {}
    yield link_floor
    link_floor.FILE, link_floor._KNOWN = saved[0], saved[1]


def test_the_link_floor_is_measured_once_per_host_and_kept(floor_file):
    import json
    found = floor_file.floor()
    stored = json.loads(floor_file.FILE.read_text())
    assert list(stored.values()) == [{"mechanism": found.mechanism, "floor_ms": found.floor_ms, "how": found.how}]
    assert found.how.startswith("measured on ") or found.mechanism == "netem"
    if found.mechanism == "delayer":  # BENCHMARKS.md link_delay: about 0.1 ms each way, more under load
        assert 0.02 < found.floor_ms < 1.0
    floor_file._KNOWN.clear()  # another process (a job) reads it back instead of measuring
    assert floor_file.floor() == found


def test_a_link_delay_below_the_floor_is_refused_and_one_above_it_loads(floor_file):
    found = floor_file.floor()
    if found.floor_ms == 0:
        pytest.skip("this kernel has netem: no floor to refuse below")
    config = copy.deepcopy(STUDY)
    config["network"] = {"client_latency_ms": round(found.floor_ms / 2, 4), "node_latency_ms": 2}
    with pytest.raises(ConfigError) as err:
        load(config)
    assert str(err.value).startswith(f"network.client_latency_ms: {found.floor_ms / 2:g} is below what a link "
                                     f"delay can deliver on this host: the delayer adds at least "
                                     f"{found.floor_ms} ms of round trip (measured on ")
    assert f"so the link would run at about {found.floor_ms} ms" in str(err.value)
    config["network"] = {"client_latency_ms": 0, "node_latency_ms": round(found.floor_ms + 0.05, 3)}
    load(config)
    # within FLOOR_SHARE of a floor that the host's load moves: loads, and the run reads the link back
    config["network"] = {"client_latency_ms": round(found.floor_ms * 0.8, 4), "node_latency_ms": 2}
    load(config)
    del config["network"]
    config["axes"]["network"] = ["lan", "near"]
    config["networks"] = {"lan": {}, "near": {"node_latency_ms": round(found.floor_ms / 2, 4)}}
    with pytest.raises(ConfigError, match=r"^networks\.near\.node_latency_ms: "):
        load(config)
