"""A repetition's timed events as tables: what happened when (events.csv), and how the measurement
recovered from each event (recovery.csv), from raw/events.jsonl, the tool's per-second samples and the
nodes' counters. Seconds are the samples' (the tool's second k ends k seconds into the window).

Recovery, per event (its undo is not an event of its own):
    before_tps         median throughput of the seconds before the event
    below95_s, below50_s   seconds from the event to the window's end under 95% / 50% of before_tps
    recovered_s        seconds from the event until throughput is back within 95% of before_tps and
                       stays there RECOVERED_RUN seconds in a row (None: it never came back)
    lost_tx            transactions short of before_tps from the event until it recovered (or the end)
    worst_lat_pct_ms   the worst per-second latency percentile the tool reported from the event on,
    worst_lat_max_ms   and the worst per-second maximum (where the tool reports one)
    errors, reconnects the client's ignored errors and reconnects from the event on
    lag_peak_s, catch_up_s   the largest replica lag from the event on, and the seconds from the event
                       until no replica is more than twice as far behind the primary as it was
                       before it (replication_behind; at least 1)
    sync_off_s         seconds from the event on in which the primary did not wait for a replica
    unacked_tx         commits from the event on that no replica acknowledged
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

EVENT_COLUMNS = ["index", "action", "target", "planned_s", "actual_s", "late_ms", "outcome", "error"]
RECOVERY_COLUMNS = ["index", "action", "target", "at_s", "for_s", "before_tps", "below95_s", "below50_s",
                    "recovered_s", "lost_tx", "worst_lat_pct_ms", "worst_lat_max_ms", "errors", "reconnects",
                    "lag_peak_s", "catch_up_s", "sync_off_s", "unacked_tx"]
RECOVERED_RUN = 3


def event_rows(raw: Path) -> list[dict]:
    """raw/events.jsonl as rows, with how late each action came (ms after its planned time)."""
    path = raw / "events.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            rows.append({k: r.get(k) for k in EVENT_COLUMNS} | {"late_ms": round((r["actual"] - r["planned"]) * 1000, 1)})
    return rows


def recovery_rows(schedule: list[dict], samples: list[dict], counters: list[dict]) -> list[dict]:
    """One row per scheduled event (see above)."""
    tps = {row["second"]: row.get("tps") for row in samples if row.get("tps") is not None}
    if not tps:
        return []
    last = max(tps)
    rows = []
    for index, event in enumerate(schedule):
        at = event["at"]
        start = int(at) + 1  # the first second the event can touch
        before = [v for s, v in tps.items() if s <= at]
        base = statistics.median(before) if before else None
        after = [(s, tps[s]) for s in range(start, last + 1) if s in tps]
        row = {"index": index, "action": event["action"], "target": event.get("target"), "at_s": at,
               "for_s": event.get("for"), "before_tps": base}
        if base:
            row["below95_s"] = sum(1 for _, v in after if v < 0.95 * base)
            row["below50_s"] = sum(1 for _, v in after if v < 0.5 * base)
            back = _recovered(after, 0.95 * base)
            row["recovered_s"] = None if back is None else back - at
            until = back if back is not None else last + 1
            row["lost_tx"] = sum(max(0.0, base - v) for s, v in after if s < until)
        rows.append(row | _latency(samples, start) | _replication(counters, at, start))
    return rows


def _recovered(after: list[tuple[int, float]], floor: float) -> int | None:
    """The second (its start, in seconds into the window) from which throughput stays at least floor for
    RECOVERED_RUN seconds in a row."""
    run = 0
    for i, (second, value) in enumerate(after):
        run = run + 1 if value >= floor else 0
        if run == RECOVERED_RUN:
            return after[i - RECOVERED_RUN + 1][0] - 1
    return None


def _latency(samples: list[dict], start: int) -> dict:
    after = [row for row in samples if row["second"] >= start]

    def worst(key):
        values = [row[key] for row in after if row.get(key) is not None]
        return max(values) if values else None

    def total(key):
        values = [row[key] for row in after if row.get(key) is not None]
        return sum(values) if values else None

    pct = [v for v in (worst("lat_p99_ms"), worst("lat_pct_ms")) if v is not None]
    return {"worst_lat_pct_ms": max(pct) if pct else None, "worst_lat_max_ms": worst("lat_max_ms"),
            "errors": total("err_s"), "reconnects": total("reconn_s")}


def _replication(counters: list[dict], at: float, start: int) -> dict:
    def series(name):
        return [(row["second"], row["node"], row["value"]) for row in counters
                if row["name"] == name and row["value"] not in (None, "")]

    lag = [v for s, _, v in series("replication_lag_s") if s >= start]
    behind = series("replication_behind")
    out = {"lag_peak_s": max(lag) if lag else None, "catch_up_s": None,
           "sync_off_s": None, "unacked_tx": None}
    if behind:
        nodes = {n for _, n, _ in behind}
        usual = {n: statistics.median([v for s, m, v in behind if m == n and s <= at] or [0]) for n in nodes}
        late = sorted({s for s, n, v in behind if s >= start and v > max(usual[n] * 2, 1)})
        out["catch_up_s"] = (late[-1] - at) if late else 0
    on = [v for s, n, v in series("sync_on") if s >= start]
    if on:
        out["sync_off_s"] = sum(1 for v in on if v == 0)
    unacked = [v for s, _, v in series("unacked_tx") if s >= start]
    if unacked:
        out["unacked_tx"] = sum(unacked)
    return out
