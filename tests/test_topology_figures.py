"""Oracle tests of a topology repetition's figures (topology/figures.py): synthetic counter rows with known
answers through the real function: a replica still behind at the window's end, MariaDB's unknown lag (-1),
several replicas, no replica, a missing lag input."""
from dbsweep.topology import figures

TOPOLOGY = {"nodes": [{"name": "primary"}, {"name": "replica1"}, {"name": "replica2"}], "replication": "semisync"}


def rows(name: str, node: str, values: list[float]) -> list[dict]:
    return [{"second": s, "node": node, "name": name, "value": v} for s, v in enumerate(values, 1)]


def test_a_replica_still_behind_at_the_end_has_its_end_figures_beside_the_largest():
    counters = (rows("replication_lag_s", "replica1", [0, 0, 4, 9, 14])
                + rows("replication_lag_s", "replica2", [0, 1, 2, 1, 0])
                + rows("replication_behind", "replica1", [0, 0, 3000, 6000, 9000])
                + rows("replication_behind", "replica2", [0, 50, 90, 10, 0]))
    got = figures.figures(counters, {"topology": TOPOLOGY}, 5)
    assert (got["lag_max_s"], got["lag_end_s"]) == (14, 14)  # the largest was the last: still rising
    assert (got["behind_max"], got["behind_end"]) == (9000, 9000)


def test_a_replica_that_came_back_ends_at_zero_behind():
    counters = rows("replication_lag_s", "replica1", [0, 6, 3, 0, 0]) + rows("replication_behind", "replica1",
                                                                             [0, 900, 20, 0, 0])
    got = figures.figures(counters, {"topology": TOPOLOGY}, 5)
    assert (got["lag_max_s"], got["lag_end_s"], got["behind_max"], got["behind_end"]) == (6, 0, 900, 0)


def test_an_unknown_lag_is_no_figure():
    """MariaDB reports -1 while a replica's threads do not run: not a lag of -1 s."""
    got = figures.figures(rows("replication_lag_s", "replica1", [-1, -1, -1]), {"topology": TOPOLOGY}, 3)
    assert got["lag_max_s"] is None and got["lag_end_s"] is None
    mixed = figures.figures(rows("replication_lag_s", "replica1", [2, -1, -1]), {"topology": TOPOLOGY}, 3)
    assert (mixed["lag_max_s"], mixed["lag_end_s"]) == (2, 2)  # the last second it was known


def test_the_seconds_outside_the_window_are_left_out():
    counters = rows("replication_lag_s", "replica1", [0, 1, 2, 50])  # second 4: after a 3 s window
    got = figures.figures(counters, {"topology": TOPOLOGY}, 3)
    assert (got["lag_max_s"], got["lag_end_s"]) == (2, 2)


def test_no_topology_or_no_lag_input_gives_no_figures():
    assert set(figures.figures([], {}, 10).values()) == {None}
    got = figures.figures([], {"topology": TOPOLOGY}, 10)
    assert got["lag_max_s"] is None and got["behind_end"] is None and got["sync_off_s"] is None


def test_replicas_are_those_of_a_primary_not_a_galera_cluster_s_members():
    assert figures.has_replicas({"topology": TOPOLOGY})
    assert not figures.has_replicas({"topology": TOPOLOGY | {"replication": "galera"}})
    assert not figures.has_replicas({"topology": TOPOLOGY | {"replication": None}})
    assert not figures.has_replicas({})
