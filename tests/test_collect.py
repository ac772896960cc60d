"""collect's per-second server counters on real captured ticks (tests/fixtures/capture_pgbench.py,
pgbench_counters: the sampler entered just before pgbench started, as run.py does)."""
from collections import Counter
from pathlib import Path

from dbsweep.collect import counter_rows, read_samples
from dbsweep.engines import postgresql
from dbsweep.workloads import pgbench

RAW = Path(__file__).parent / "fixtures" / "pgbench_counters"


def test_each_counter_lands_in_the_second_its_tick_closes():
    """The sampler ticks within a few ms of whole seconds after the window's start, some a hair before,
    some after: each tick belongs to the tool's second it closes (second k ends at window_start + k),
    so every second of the window has exactly one row per counter."""
    samples = pgbench.samples(RAW, float((RAW / "start.txt").read_text()))
    window_start = samples[0]["time"] - 1  # as collect() numbers them
    rows = counter_rows(read_samples(RAW / "counters.jsonl"), window_start, postgresql)
    commits = [r for r in rows if r["name"] == "db.xact_commit"]  # cumulative: deltas from the second tick on
    assert [r["second"] for r in commits] == [s["second"] for s in samples] == [1, 2, 3, 4, 5]
    assert all(abs(r["time"] - (window_start + r["second"])) < 0.5 for r in rows)
    gauges = Counter(r["second"] for r in rows if r["name"] == "db.numbackends")
    assert sorted(gauges) == [0, 1, 2, 3, 4, 5] and set(gauges.values()) == {1}


def test_the_wal_written_in_a_window_is_the_positions_advance_not_the_lagging_statistics():
    """PostgreSQL's log_kb_per_txn: the written WAL position read at each tick's instant. pg_stat_wal's
    wal_bytes reaches the view only when a backend next reports (at most once a second), so it stood
    still over the fixture's first second while pgbench wrote 43 KB of WAL."""
    ticks = read_samples(RAW / "counters.jsonl")
    first, second, last = ticks[0]["counters"], ticks[1]["counters"], ticks[-1]["counters"]
    assert second["wal.wal_bytes"] == first["wal.wal_bytes"] and second["wal_lsn_bytes"] > first["wal_lsn_bytes"]
    assert postgresql.logs_written("postgresql", first, second) == {"log": 43488.0, "binlog": None}
    assert postgresql.logs_written("postgresql", first, last)["log"] == last["wal_lsn_bytes"] - first["wal_lsn_bytes"]
    standby = {k: v for k, v in last.items() if k != "wal_lsn_bytes"}
    assert postgresql.logs_written("postgresql", first, standby)["log"] == \
        last["wal.wal_bytes"] - first["wal.wal_bytes"]
    # a standby promoted inside the window: no position at its first tick, one at its last
    promoted = {k: v for k, v in first.items() if k != "wal_lsn_bytes"}
    assert postgresql.logs_written("postgresql", promoted, last)["log"] == \
        last["wal.wal_bytes"] - first["wal.wal_bytes"]
