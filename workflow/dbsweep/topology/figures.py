"""A topology repetition's per-node counters and its figures, from raw output alone.

raw/counters.jsonl holds the first node's samples (the primary, or a cluster's first member),
raw/counters-<node>.jsonl every other node's, raw/counters-proxy.jsonl the proxy's. Every row of the
counters table gets its node. Derived rows, in words every family shares (the family names its own
counters: SYNC_STATUS, FLOW_PAUSED_NS):
    replication_behind  per replica and second: the primary's replication_position minus the
                        replica's (transactions for MariaDB's GTIDs, bytes of WAL for PostgreSQL)
    sync_on             per second on the primary: 1 while commits wait for a replica, 0 when not
    unacked_tx          per second on the primary: commits no replica acknowledged (the family's
                        SYNC_UNACKED; MariaDB's semi-sync), each one lost if the primary failed then
    flow_paused         per second and member: the share of that second replication was paused

Figures of a repetition (summary columns, FIGURE_KEYS):
    lag_max_s         the largest replication_lag_s any replica reported in the measured window (a negative
                      lag is MariaDB's unknown, left out; None: no replica reported one)
    lag_end_s         the largest replication_lag_s at the window's last second: a replica still behind then
    behind_max        the largest replication_behind of any replica
    behind_end        the largest replication_behind at the window's last second
    sync_off_s        seconds the primary did not wait for a replica while it was meant to
                      (the family's SYNC_STATUS counter at 0: MariaDB's semi-sync fallen back to async)
    unacked_tx        commits in the window no replica acknowledged
    flow_paused_share share of the window a Galera cluster's replication was paused by flow control
                      (the largest of its members; the family's FLOW_PAUSED_NS counter)
    rtt_client_ms     measured round trip client → first node; rtt_node_ms: first node → second node
"""
from __future__ import annotations

import json
from pathlib import Path

FIGURE_KEYS = ["lag_max_s", "lag_end_s", "behind_max", "behind_end", "sync_off_s", "unacked_tx", "flow_paused_share",
               "rtt_client_ms", "rtt_node_ms"]
PROXY = "proxy"


def node_files(raw: Path, record: dict) -> list[tuple[str, Path]]:
    """(node, its counters file) of a repetition: one ("", counters.jsonl) without a topology."""
    topology = record.get("topology")
    if not topology:
        return [("", raw / "counters.jsonl")]
    names = [node["name"] for node in topology["nodes"]]
    files = [(names[0], raw / "counters.jsonl")] + [(name, raw / f"counters-{name}.jsonl") for name in names[1:]]
    if topology.get("proxy"):
        files.append((PROXY, raw / f"counters-{PROXY}.jsonl"))
    return files


def derived_rows(rows: list[dict], record: dict, family, positions: dict[str, dict[int, float]]) -> list[dict]:
    """replication_behind, sync_on, unacked_tx and flow_paused rows (see above) from the nodes' own; positions: each
    node's replication_position as sampled (node -> second -> value: not a per-second delta)."""
    topology = record.get("topology")
    if not topology or topology.get("replication") is None:
        return []
    status = family.SYNC_STATUS if topology["replication"] in family.SYNC_KINDS else None
    unacked = family.SYNC_UNACKED if status else None
    paused = family.FLOW_PAUSED_NS if topology["replication"] == "galera" else None
    primary = topology["nodes"][0]["name"]
    out = []
    for row in rows:
        if status and row["name"] == status and row["node"] == primary:
            out.append(row | {"name": "sync_on", "value": 1.0 if row["value"] else 0.0})
        elif unacked and row["name"] == unacked and row["node"] == primary:  # a running total: per-second deltas
            out.append(row | {"name": "unacked_tx"})
        elif paused and row["name"] == paused:
            out.append(row | {"name": "flow_paused", "value": row["value"] / 1e9})
    if topology["replication"] != "galera":
        head = positions.get(primary, {})
        for node, seconds in positions.items():
            if node == primary:
                continue
            out += [{"second": second, "time": "", "node": node, "name": "replication_behind",
                     "value": max(0.0, head[second] - value)} for second, value in sorted(seconds.items())
                    if second in head]
    return out


def positions(samples: list[dict], window_start: float) -> dict[int, float]:
    """A node's replication_position by second (the counter rows' seconds), as sampled."""
    return {round(s["time"] - window_start): s["counters"]["replication_position"] for s in samples
            if "replication_position" in s["counters"]}


def figures(rows: list[dict], record: dict, seconds: int) -> dict:
    """The repetition's FIGURE_KEYS, None where the topology has no such thing."""
    topology = record.get("topology")
    out = dict.fromkeys(FIGURE_KEYS)
    if not topology:
        return out
    inside = [row for row in rows if 1 <= row["second"] <= seconds]
    primary = topology["nodes"][0]["name"]

    def values(name: str, nodes=None) -> list[float]:
        return [row["value"] for row in inside if row["name"] == name and (nodes is None or row["node"] in nodes)
                and row["value"] not in (None, "")]

    replicas = {node["name"] for node in topology["nodes"][1:]}
    lag = _by_second(row for row in inside if row["name"] == "replication_lag_s" and row["node"] in replicas)
    out["lag_max_s"] = max(lag.values()) if lag else None
    out["lag_end_s"] = lag[max(lag)] if lag else None
    behind = _by_second(row for row in inside if row["name"] == "replication_behind")
    out["behind_max"] = max(behind.values()) if behind else None
    out["behind_end"] = behind[max(behind)] if behind else None
    on = values("sync_on", {primary})
    out["sync_off_s"] = sum(1 for v in on if v == 0) if on else None
    unacked = values("unacked_tx", {primary})
    out["unacked_tx"] = sum(unacked) if unacked else None
    if values("flow_paused") and seconds:
        out["flow_paused_share"] = max(sum(values("flow_paused", {node["name"]})) / seconds
                                       for node in topology["nodes"])
    rtt = (topology.get("network") or {}).get("rtt_ms") or {}
    names = [node["name"] for node in topology["nodes"]]
    out["rtt_client_ms"] = _rtt(rtt, "client", names[0])
    out["rtt_node_ms"] = _rtt(rtt, names[0], names[1]) if len(names) > 1 else None
    return out


def _by_second(rows) -> dict[int, float]:
    """The largest known (non-negative) value of rows at each second."""
    out: dict[int, float] = {}
    for row in rows:
        if row["value"] not in (None, "") and row["value"] >= 0:
            out[row["second"]] = max(out.get(row["second"], row["value"]), row["value"])
    return out


def has_replicas(record: dict) -> bool:
    """The repetition's topology has replicas that report a lag and a position behind their primary (a
    Galera cluster's members do not: they are no one's replicas)."""
    replication = (record.get("topology") or {}).get("replication")
    return replication is not None and replication != "galera"


def _rtt(rtt: dict, a: str, b: str) -> float | None:
    return rtt.get(f"{a}-{b}", rtt.get(f"{b}-{a}"))


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
