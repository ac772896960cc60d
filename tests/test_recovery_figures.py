"""Oracle tests of the recovery figures (events/recovery.py) and of the answer line that states them
(answer.recovery): synthetic per-second series with known answers, through the real functions, on the
edge shapes: a series that never recovers, recovers at the last second, is constant; a replica that
never catches up; a lag still rising at the window's end; an event at the window's start and end;
the lag input missing. A figure the window did not show is None with words beside it, never a number."""
import csv
from pathlib import Path

import pytest

from dbsweep import answer
from dbsweep.events.recovery import RECOVERY_COLUMNS, recovery_rows

KILL = {"at": 5, "action": "kill", "target": "replica1"}
CUT = {"at": 5, "for": 5, "action": "cut", "target": "link primary-replica1"}


def series(values: list[float], **extra) -> list[dict]:
    """Samples of seconds 1.. with these throughputs (and any per-second columns given as lists)."""
    return [{"second": s, "tps": v} | {k: col[s - 1] for k, col in extra.items()} for s, v in enumerate(values, 1)]


def counters(name: str, values: list[float], node: str = "replica1") -> list[dict]:
    return [{"second": s, "node": node, "name": name, "value": v} for s, v in enumerate(values, 1)]


def one(schedule_event, samples, rows=(), **kw) -> dict:
    (row,) = recovery_rows([schedule_event], samples, list(rows), **kw)
    assert set(row) <= set(RECOVERY_COLUMNS)
    return row


def test_a_dip_that_recovers_has_its_seconds_below_its_recovery_time_and_its_loss():
    row = one(KILL, series([100] * 5 + [40, 90, 100, 100, 100, 100]))
    assert row["before_tps"] == 100 and row["after_s"] == 6
    assert (row["below95_s"], row["below50_s"]) == (2, 1)
    assert row["recovered_s"] == 2  # back from second 8, which starts 7 s into the window
    assert row["lost_tx"] == 70 and row["recovered_why"] is None


def test_a_series_that_never_recovers_has_no_recovery_time_and_says_so():
    row = one(KILL, series([100] * 5 + [0] * 5))
    assert row["recovered_s"] is None
    assert row["recovered_why"] == "not back within 95% by the window's end: 0 tps in its last second"
    assert row["below95_s"] == 5 and row["lost_tx"] == 500  # counted to the window's end


def test_a_series_back_only_in_its_last_second_has_not_recovered():
    row = one(KILL, series([100] * 5 + [0] * 4 + [100]))
    assert row["recovered_s"] is None
    assert "back only for its last 1 s (3 s in a row needed)" in row["recovered_why"]


def test_a_constant_series_never_left_and_lost_nothing():
    row = one({"at": 4.5, "action": "sql", "statement": "SELECT 1"}, series([100] * 10))
    assert (row["below95_s"], row["below50_s"], row["lost_tx"]) == (0, 0, 0)
    assert row["recovered_s"] == 0  # never negative for an event inside a second
    assert row["recovered_why"] is None


def test_an_event_at_the_window_s_start_has_nothing_to_compare_with():
    row = one({"at": 0, "action": "kill", "target": "replica1"}, series([100] * 10))
    assert row["before_tps"] is None and row["recovered_s"] is None and row["below95_s"] is None
    assert row["before_why"] == "no second was measured wholly before the event"


def test_an_event_at_the_window_s_end_has_no_second_after_it():
    row = one({"at": 10, "action": "kill", "target": "replica1"}, series([100] * 10),
              counters("replication_behind", [0] * 10), replicated=True)
    assert row["after_s"] == 0 and row["below95_s"] is None and row["recovered_s"] is None
    assert row["recovered_why"] == "no second was measured after the event"
    assert row["catch_up_s"] is None  # not 0: nothing after the event was seen
    assert row["catch_up_why"] == "no replica position was sampled after the event"


def test_a_replica_that_never_catches_up_has_no_catch_up_time():
    behind = [0] * 5 + [10_000 * k for k in range(1, 6)]  # the 87,000 behind, in small
    row = one(CUT, series([100] * 10), counters("replication_behind", behind),
              replicated=True, behind_unit="transactions")
    assert row["catch_up_s"] is None  # old code: 5, the window's end
    assert row["behind_end"] == 50_000
    assert row["catch_up_why"] == "replicas not caught up by the window's end: 50,000 transactions behind"


def test_a_replica_that_catches_up_does_so_at_the_first_sample_it_is_back():
    behind = [3, 4, 3, 4, 3, 900, 2000, 40, 5, 4]
    row = one(CUT, series([100] * 10), counters("replication_behind", behind), replicated=True)
    assert row["catch_up_s"] == 4  # second 8 was still 40 behind (usual 3, twice that 6); 9 is back
    assert row["catch_up_why"] is None and row["behind_end"] == 4


def test_a_replica_that_never_fell_behind_caught_up_at_once():
    row = one(CUT, series([100] * 10), counters("replication_behind", [1] * 10), replicated=True)
    assert row["catch_up_s"] == 0 and row["catch_up_why"] is None


def test_a_lag_still_rising_at_the_window_s_end_has_no_peak():
    lag = [0] * 5 + [0, 2, 9, 18, 34]
    row = one(CUT, series([100] * 10), counters("replication_lag_s", lag), replicated=True)
    assert row["lag_peak_s"] is None  # old code: 34, the window's last second
    assert row["lag_end_s"] == 34
    assert row["lag_peak_why"] == "replica lag still at its largest at the window's end, 34 s: no peak seen"


def test_a_lag_that_came_down_has_its_peak():
    lag = [0] * 5 + [3, 12, 7, 1, 0]
    two = counters("replication_lag_s", lag) + counters("replication_lag_s", [0] * 5 + [5, 6, 20, 2, 0], "replica2")
    row = one(CUT, series([100] * 10), two, replicated=True)
    assert (row["lag_peak_s"], row["lag_end_s"], row["lag_peak_why"]) == (20, 0, None)


def test_an_unknown_lag_is_not_a_figure():
    """MariaDB reports -1 for a replica whose threads do not run."""
    row = one(CUT, series([100] * 10), counters("replication_lag_s", [0] * 5 + [-1] * 5), replicated=True)
    assert row["lag_peak_s"] is None and row["lag_end_s"] is None
    assert row["lag_peak_why"] == "no replica reported its lag after the event"


def test_a_missing_lag_input_is_said_where_there_are_replicas_and_absent_where_there_are_none():
    row = one(CUT, series([100] * 10), replicated=True)
    assert row["lag_peak_s"] is None and row["catch_up_s"] is None
    assert row["lag_peak_why"] == "no replica reported its lag after the event"
    bare = one(KILL, series([100] * 10))
    assert bare["lag_peak_why"] is None and bare["catch_up_why"] is None and bare["catch_up_s"] is None


def test_a_client_stalled_at_the_window_s_end_has_no_worst_latency():
    row = one(KILL, series([100] * 5 + [0] * 5, lat_max_ms=[5.0] * 6 + [None] * 4,
                           wait_ms=[5.0] * 5 + [1000.0, 2000, 3000, 4000, 5000]))
    assert row["worst_lat_max_ms"] is None  # old code: 5 ms, with a transaction waiting 5 s
    assert row["worst_lat_why"] == ("no transaction completed in the window's last 5 s: "
                                    "one had waited 5,000 ms by its end")


def test_the_worst_latency_after_a_recovered_stall_is_the_longest_transaction():
    row = one(KILL, series([100] * 5 + [0, 0, 100, 100, 100], lat_max_ms=[5.0] * 7 + [2100.0, 6, 5]))
    assert row["worst_lat_max_ms"] == 2100 and row["worst_lat_why"] is None


def write_table(path: Path, rows: list[dict]) -> Path:
    columns = ["events", "reps", *RECOVERY_COLUMNS]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, columns)
        w.writeheader()
        w.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
    return path


def test_the_answer_line_says_a_replica_not_caught_up_in_words_and_gives_no_time(tmp_path):
    """The issue's run: a semi-sync replica cut off 15 s in a 40 s window, never caught up."""
    behind = [0] * 10 + [3000 * k for k in range(1, 31)]
    lag = [0] * 10 + [k for k in range(1, 31)]
    schedule = {"at": 10, "for": 15, "action": "cut", "target": "link primary-replica1"}
    row = one(schedule, series([100] * 40), counters("replication_behind", behind) + counters("replication_lag_s", lag),
              replicated=True, behind_unit="transactions")
    (line,) = answer.recovery(write_table(tmp_path / "recovery.csv", [row | {"events": "outage", "reps": 1}]), [])
    assert "caught up after" not in line and "lag peak" not in line
    assert "replicas not caught up by the window's end: 90,000 transactions behind" in line
    assert "replica lag still at its largest at the window's end, 30 s: no peak seen" in line


def test_the_answer_line_counts_a_loss_to_the_window_s_end_when_not_back(tmp_path):
    row = one(KILL, series([100] * 5 + [0] * 5)) | {"events": "loss", "reps": 3}
    (line,) = answer.recovery(write_table(tmp_path / "recovery.csv", [row]), [])
    assert "under 95% for 5 s of the 5 s after it" in line
    assert "not back within 95% by the window's end: 0 tps in its last second" in line
    assert "transactions lost by the window's end 500" in line
    assert line.endswith("(median of 3 repetitions)")


def test_counts_are_said_whole_though_the_table_holds_estimates(tmp_path):
    """Errors summed from a client's per-interval rates (8.02) and a deficit of tps (5.99) are counts."""
    row = {"index": 0, "action": "kill", "at_s": 3, "before_tps": 100, "after_s": 7, "below95_s": 1,
           "recovered_s": 2, "lost_tx": 5.99, "errors": 8.02, "reconnects": 1.0, "unacked_tx": 0.4,
           "events": "e", "reps": 2}
    (line,) = answer.recovery(write_table(tmp_path / "recovery.csv", [row]), [])
    assert "transactions lost 6;" in line and "client errors 8;" in line and "reconnects 1;" in line
    assert "commits no replica acknowledged 0 " in line and "." not in line.split("before;")[1]


@pytest.mark.parametrize("value", ["", "NA"])
def test_an_empty_figure_without_a_why_is_left_out(tmp_path, value):
    row = {"index": 0, "action": "sql", "at_s": 3, "before_tps": 100, "after_s": 7, "below95_s": 0,
           "recovered_s": 0, "lost_tx": 0, "lag_peak_s": value, "events": "e", "reps": 1}
    (line,) = answer.recovery(write_table(tmp_path / "recovery.csv", [row]), [])
    assert line == "e: sql at 3 s: 100 tps before; under 95% for 0 s; back within 95% after 0 s; transactions lost 0 " \
                   "(median of 1 repetition)"
