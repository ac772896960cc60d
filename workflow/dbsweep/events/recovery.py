"""A repetition's timed events as tables: what happened when (events.csv), and how the measurement
recovered from each event (recovery.csv), from raw/events.jsonl, the tool's per-second samples and the
nodes' counters. Seconds are the samples' (the tool's second k ends k seconds into the window).

Recovery, per event (its undo is not an event of its own). A figure whose condition the window did not
show (a replica that never caught up, a lag still at its largest when the window ended) is None, and its
*_why column says in words what was seen instead; a None without a why is a figure that does not apply
(no replica, no throughput to compare with):
    before_tps         median throughput of the seconds wholly before the event (before_why: there was none)
    after_s            seconds measured after the event: the span the figures below cover
    below95_s, below50_s   seconds after the event under 95% / 50% of before_tps
    recovered_s        seconds from the event until throughput is back within 95% of before_tps and stays
                       there RECOVERED_RUN seconds in a row (0: it never left; recovered_why: it was not back)
    lost_tx            transactions short of before_tps from the event until it recovered, or until the
                       window's end where it did not (recovered_why then says so)
    worst_lat_pct_ms   the worst per-second latency percentile the tool reported from the event on,
    worst_lat_max_ms   and the worst per-second maximum (where the tool reports one); both None when the
                       client completed no transaction in the window's last seconds, whose waits no
                       latency figure holds (worst_lat_why)
    errors, reconnects the client's ignored errors and reconnects from the event on
    lag_peak_s         the largest replica lag (replication_lag_s, the largest of the replicas each second)
                       from the event on, once the lag came down from it (lag_peak_why: it was at its
                       largest at the window's end, so no peak was seen)
    lag_end_s          that lag at the window's last sampled second
    catch_up_s         seconds from the event until the first sample at which no replica is more than twice
                       as far behind the primary as it was before the event (replication_behind; at least
                       1): 0 when none fell that far behind (catch_up_why: one still was at the window's end)
    behind_end         the furthest replica's replication_behind at the window's last sample
    sync_off_s         seconds from the event on in which the primary did not wait for a replica
    unacked_tx         commits from the event on that no replica acknowledged
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

EVENT_COLUMNS = ["index", "action", "target", "planned_s", "actual_s", "late_ms", "outcome", "error"]
RECOVERY_COLUMNS = ["index", "action", "target", "at_s", "for_s", "before_tps", "before_why", "after_s",
                    "below95_s", "below50_s", "recovered_s", "recovered_why", "lost_tx", "worst_lat_pct_ms",
                    "worst_lat_max_ms", "worst_lat_why", "errors", "reconnects", "lag_peak_s", "lag_end_s",
                    "lag_peak_why", "catch_up_s", "behind_end", "catch_up_why", "sync_off_s", "unacked_tx"]
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
            late_ms = round((r["actual"] - r["planned"]) * 1000, 1)
            rows.append({k: r.get(k) for k in EVENT_COLUMNS} | {"late_ms": late_ms})
    return rows


def recovery_rows(schedule: list[dict], samples: list[dict], counters: list[dict], replicated: bool = False,
                  behind_unit: str = "behind") -> list[dict]:
    """One row per scheduled event (see above). replicated: the cell has replicas, so a missing lag or
    position is a missing input (said in the why columns), not a figure that does not apply; behind_unit:
    what replication_behind counts ("transactions", "bytes of WAL")."""
    tps = {row["second"]: row.get("tps") for row in samples if row.get("tps") is not None}
    if not tps:
        return []
    last = max(tps)
    rows = []
    for index, event in enumerate(schedule):
        at = event["at"]
        start = int(at) + 1  # the first second the event can touch
        row = dict.fromkeys(RECOVERY_COLUMNS) | {"index": index, "action": event["action"],
                                                  "target": event.get("target"), "at_s": at, "for_s": event.get("for")}
        rows.append(row | _throughput(tps, at, start, last) | _latency(samples, start, last)
                    | _replication(counters, at, start, replicated, behind_unit))
    return rows


def _throughput(tps: dict[int, float], at: float, start: int, last: int) -> dict:
    before = [v for s, v in tps.items() if s <= at]
    base = statistics.median(before) if before else None
    after = [(s, tps[s]) for s in range(start, last + 1) if s in tps]
    out = {"before_tps": base, "after_s": len(after)}
    if base is None:
        return out | {"before_why": "no second was measured wholly before the event"}
    if not base:
        return out | {"before_why": "no throughput before the event to compare with"}
    if not after:
        return out | {"recovered_why": "no second was measured after the event"}
    floor = 0.95 * base
    out["below95_s"] = sum(1 for _, v in after if v < floor)
    out["below50_s"] = sum(1 for _, v in after if v < 0.5 * base)
    back = _recovered(after, floor)
    until = back + 1 if back is not None else last + 1  # the recovered run's first second (it ends back + 1)
    out["lost_tx"] = sum(max(0.0, base - v) for s, v in after if s < until)
    if back is not None:
        out["recovered_s"] = max(0.0, back - at)
    else:
        out["recovered_why"] = _not_back(after, floor)
    return out


def _recovered(after: list[tuple[int, float]], floor: float) -> int | None:
    """The second (its start, in seconds into the window) from which throughput stays at least floor for
    RECOVERED_RUN seconds in a row."""
    run = 0
    for i, (_second, value) in enumerate(after):
        run = run + 1 if value >= floor else 0
        if run == RECOVERED_RUN:
            return after[i - RECOVERED_RUN + 1][0] - 1
    return None


def _not_back(after: list[tuple[int, float]], floor: float) -> str:
    """Why recovered_s is None, in words: what the window's last seconds showed."""
    tail = 0
    for _, value in reversed(after):
        if value < floor:
            break
        tail += 1
    if tail:
        return (f"not back within 95% by the window's end: back only for its last {tail} s "
                f"({RECOVERED_RUN} s in a row needed)")
    return f"not back within 95% by the window's end: {_number(after[-1][1])} tps in its last second"


def _latency(samples: list[dict], start: int, last: int) -> dict:
    after = [row for row in samples if row["second"] >= start]

    def worst(key):
        values = [row[key] for row in after if row.get(key) is not None]
        return max(values) if values else None

    def total(key):
        values = [row[key] for row in after if row.get(key) is not None]
        return sum(values) if values else None

    pct = [v for v in (worst("lat_p99_ms"), worst("lat_pct_ms")) if v is not None]
    out = {"worst_lat_pct_ms": max(pct) if pct else None, "worst_lat_max_ms": worst("lat_max_ms"),
           "errors": total("err_s"), "reconnects": total("reconn_s")}
    stalled = 0
    for row in reversed(after):
        if row.get("tps") is None or row["tps"] > 0:
            break
        stalled += 1
    if stalled:
        waited = after[-1].get("wait_ms")
        out |= {"worst_lat_pct_ms": None, "worst_lat_max_ms": None,
                "worst_lat_why": f"no transaction completed in the window's last {stalled} s"
                                 + (f": one had waited {_number(waited)} ms by its end" if waited else "")}
    return out


def _replication(counters: list[dict], at: float, start: int, replicated: bool, unit: str) -> dict:
    def series(name):
        return [(row["second"], row["node"], row["value"]) for row in counters
                if row["name"] == name and row["value"] not in (None, "")]

    out = _lag([(s, v) for s, _, v in series("replication_lag_s") if s >= start], replicated)
    out |= _catch_up(series("replication_behind"), at, start, replicated, unit)
    on = [v for s, n, v in series("sync_on") if s >= start]
    out["sync_off_s"] = sum(1 for v in on if v == 0) if on else None
    unacked = [v for s, _, v in series("unacked_tx") if s >= start]
    out["unacked_tx"] = sum(unacked) if unacked else None
    return out


def _lag(lags: list[tuple[int, float]], replicated: bool) -> dict:
    """lag_peak_s, lag_end_s, lag_peak_why from the replicas' lags after the event (negative: unknown, as
    a MariaDB replica whose threads do not run reports it)."""
    by_second: dict[int, float] = {}
    for second, value in lags:
        if value >= 0:
            by_second[second] = max(by_second.get(second, 0.0), value)
    if not by_second:
        why = "no replica reported its lag after the event" if replicated or lags else None
        return {"lag_peak_s": None, "lag_end_s": None, "lag_peak_why": why}
    end = by_second[max(by_second)]
    peak = max(by_second.values())
    if peak > 0 and end == peak:
        return {"lag_peak_s": None, "lag_end_s": end,
                "lag_peak_why": f"replica lag still at its largest at the window's end, {_number(end)} s: no peak seen"}
    return {"lag_peak_s": peak, "lag_end_s": end, "lag_peak_why": None}


def _catch_up(behind: list[tuple[int, str, float]], at: float, start: int, replicated: bool, unit: str) -> dict:
    """catch_up_s, behind_end, catch_up_why (see above)."""
    after = sorted({s for s, _, _ in behind if s >= start})
    if not after:
        why = "no replica position was sampled after the event" if replicated or behind else None
        return {"catch_up_s": None, "behind_end": None, "catch_up_why": why}
    nodes = {n for _, n, _ in behind}
    usual = {n: statistics.median([v for s, m, v in behind if m == n and s <= at] or [0]) for n in nodes}
    end = max(v for s, _, v in behind if s == after[-1])
    late = sorted({s for s, n, v in behind if s >= start and v > max(usual[n] * 2, 1)})
    if not late:
        return {"catch_up_s": 0, "behind_end": end, "catch_up_why": None}
    if late[-1] == after[-1]:
        return {"catch_up_s": None, "behind_end": end,
                "catch_up_why": f"replicas not caught up by the window's end: {_number(end)} {unit} behind"}
    caught = next(s for s in after if s > late[-1])
    return {"catch_up_s": caught - at, "behind_end": end, "catch_up_why": None}


def _number(value: float) -> str:
    """A figure in words: thousands separated, at most one decimal."""
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:,.1f}"
