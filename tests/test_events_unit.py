"""Timed events without a server: schedules checked at load, the timeline of events and undos, the wait
report's lines merged into the samples (real output of a paused server, and of a client that lost its
connection when a Galera member was killed), and the recovery figures of a real run."""
from pathlib import Path

import pytest

from conftest import table_rows
from dbsweep import events
from dbsweep.errors import ConfigError
from dbsweep.events.recovery import recovery_rows
from dbsweep.events.schedule import timeline
from dbsweep.workloads import sysbench_oltp

FIXTURES = Path(__file__).parent / "fixtures"


def test_the_timeline_puts_each_undo_at_its_end_in_time_order():
    schedule = [{"at": 2, "for": 5, "action": "cut", "target": "link a-b"},
                {"at": 3, "for": 1, "action": "pause", "target": "b"},
                {"at": 4, "action": "sql", "statement": "CHECKPOINT"}]
    steps = [(second, action) for second, _, action, _ in timeline(schedule)]
    assert steps == [(2, "cut"), (3, "pause"), (4, "resume"), (4, "sql"), (7, "heal")]


@pytest.mark.parametrize("event, message", [
    ({"at": 1, "action": "pause", "for": 50}, r"^events.e\[0\]: .* ends at 51 s, after the 20 s measured window$"),
    ({"at": 1, "action": "cut", "target": "link primary-replica9"}, r"^events.e\[0\].target: 'link primary-replica9'"),
    ({"at": 1, "action": "kill", "target": "node7"}, r"^events.e\[0\].target: 'node7': no such node"),
])
def test_a_schedule_the_cell_cannot_keep_is_refused(event, message):
    with pytest.raises(ConfigError, match=message):
        events.check_cell([event], 20, ["primary", "replica1"], "events.e")


def test_an_io_limit_is_not_applicable_on_tmpfs_which_has_no_device():
    throttle = [{"at": 1, "for": 2, "action": "io_throttle", "read_iops": 100}]
    assert events.not_applicable(throttle, 20, False, "tmpfs") == \
        "io_throttle limits a block device, and tmpfs has none"
    assert events.not_applicable(throttle, 20, False, "ext4") is None
    assert events.not_applicable([{"at": 1, "action": "kill"}], 20, False, "tmpfs") is None


def test_the_wait_report_gives_a_stalled_second_its_wait():
    """oltp_read_only, 2 threads; the server SIGSTOPped from 3 s to 5.5 s of the window."""
    raw = FIXTURES / "wait_report_pause"
    start = float((raw / "measure_start.txt").read_text())
    rows = {row["second"]: row for row in sysbench_oltp.samples(raw, start)}
    stalled = [k for k, row in rows.items() if row["tps"] == 0]
    assert stalled == [4, 5]
    assert [round(rows[k]["wait_ms"] / 1000) for k in stalled] == [1, 2]  # waited ~1 s, then ~2 s by their ends
    assert rows[6]["lat_max_ms"] > 2400  # the transactions held 2.5 s completed in second 6
    assert all(row["wait_ms"] < 100 for k, row in rows.items() if k in (1, 2, 8))


def test_a_lost_connection_the_wait_report_survived_is_an_error_and_a_reconnect_not_a_failure():
    """oltp_write_only through haproxy to a Galera cluster; node2 SIGKILLed at 4 s."""
    raw = FIXTURES / "wait_report_reconnect"
    start = float((raw / "measure_start.txt").read_text())
    assert "FATAL: mysql_stmt_execute() returned error 2013" in (raw / "stdout.txt").read_text()
    summary = sysbench_oltp.summary(raw)  # sysbench's FATAL line for the lost query is not the run's error
    assert summary["tps"] > 0
    rows = sysbench_oltp.samples(raw, start)
    assert sum(row["reconn_s"] for row in rows) == 1
    assert any(row["tps"] == 0 and row["wait_ms"] > 1000 for row in rows)


def test_the_fatal_line_of_a_lost_query_fails_a_run_that_did_not_reconnect(tmp_path):
    for name in ("stdout.txt",):
        (tmp_path / name).write_text((FIXTURES / "wait_report_reconnect" / name).read_text())
    (tmp_path / "stderr.txt").write_text("")  # no wait report: sysbench itself met the lost connection
    with pytest.raises(ValueError, match="sysbench reported an error: FATAL: mysql_stmt_execute"):
        sysbench_oltp.summary(tmp_path)


def test_recovery_figures_of_a_real_outage():
    """The semi-sync replica's link cut at 3 s for 4 s, timeout 1 s (tests/fixtures/topology_tables): the
    replica was still 6,600 transactions and 6 s behind at the window's end, and its lag still growing."""
    tables = FIXTURES / "topology_tables"

    def cell(path):
        return [row for row in table_rows(path) if row["topology"] == "semisync"]

    samples = [{"second": int(r["second"]), "tps": float(r["tps"]), "lat_pct_ms": float(r["lat_pct_ms"] or 0),
                "err_s": float(r["err_s"]), "reconn_s": float(r["reconn_s"])} for r in cell(tables / "samples.csv.gz")]
    counters = [{"second": int(r["second"]), "node": r["node"], "name": r["name"], "value": float(r["value"])}
                for r in cell(tables / "counters.csv.gz")]
    schedule = [{"at": 3, "for": 4, "action": "cut", "target": "link primary-replica1"}]
    (row,) = recovery_rows(schedule, samples, counters, replicated=True, behind_unit="transactions")
    recorded = cell(tables / "recovery.csv.gz")[0]
    for key in ("before_tps", "below95_s", "below50_s", "lost_tx", "sync_off_s", "lag_end_s", "behind_end"):
        assert row[key] == pytest.approx(float(recorded[key])), key
    assert row["below50_s"] >= 1 and row["sync_off_s"] >= 2
    assert row["catch_up_s"] is None and row["lag_peak_s"] is None  # not the window's end as an answer
    assert row["catch_up_why"] == "replicas not caught up by the window's end: 6,600 transactions behind"
    assert row["unacked_tx"] is None  # captured before unacked_tx was derived


def test_commits_no_replica_acknowledged_are_counted_from_the_event_on():
    samples = [{"second": s, "tps": 100.0} for s in range(1, 11)]
    unacked = {4: 30.0, 5: 95.0, 6: 90.0, 7: 12.0}  # the primary's per-second unacked_tx rows
    counters = [{"second": s, "node": "primary", "name": "unacked_tx", "value": unacked.get(s, 0.0)}
                for s in range(1, 11)]
    cut, later = recovery_rows([{"at": 3, "for": 4, "action": "cut", "target": "link primary-replica1"},
                                {"at": 6.5, "action": "command", "argv": ["/bin/true"]}], samples, counters)
    assert cut["unacked_tx"] == 227.0 and later["unacked_tx"] == 12.0  # seconds 4-10, and 7-10
