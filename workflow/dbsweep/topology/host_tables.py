"""Which host each row of the per-second tables was measured on (issue 34): the `node_host` column of the
system and counters tables, and the system rows of a placed topology's other hosts, on the client's clock.

On one host every row is that host's (node_host: the repetition's host, as the aggregated tables' `host`).
A placed topology's (placed.py) nodes each ran on a host of their own, whose monitors (vmstat, iostat of
the node's device: host_step.HostMonitors) wrote RAW/<node>/vmstat.txt and iostat.json on that host's
clock. Their rows join the system table with `node` (the node whose host it is) and `node_host`; the rows
of the repetition's own host, where the client ran, keep `node` empty as on one host, so what reads the
system table as the run's host (per-transaction CPU, a device class's utilisation, the CPU plot) reads
those only.

One clock: each row's time is the client's host's. A node's host's offset (run.json
topology.network.clocks.<node>.offset_ms, theirs minus ours, hosts.clock_offset) is taken off its
monitors' times before their rows are numbered into the window's seconds. The offset is known to within
half the round trip of the exchange it came from (within_ms); vmstat prints whole seconds, so on hosts
whose clocks agree to well under a second a row lands in the second it was printed in.

Counters, and the lag derived from them, are sampled from the client's host through each node's
connection (topology.cell.sampling), on the client's clock already: their rows get the node's host.
"""
from __future__ import annotations

from pathlib import Path


def run_host(record: dict) -> str:
    """The host the repetition ran on (its Slurm node name, else its hostname)."""
    return record["host"].get("node") or record["host"]["hostname"]


def node_hosts(record: dict) -> dict[str, str]:
    """node name -> the host it ran on: its own for a placed topology, else the repetition's; `proxy` -> the
    proxy's, where it ran on a host of its own."""
    topology = record.get("topology") or {}
    proxy = topology.get("proxy") or {}
    return {node["name"]: node.get("host") or run_host(record) for node in topology.get("nodes") or []} \
        | ({"proxy": proxy["host"]} if proxy.get("host") else {})


def with_hosts(rows: list[dict], record: dict) -> list[dict]:
    """rows (each with `node`) with node_host: the node's host ('': the repetition's; a proxy's: its own,
    the client's beside it)."""
    hosts = node_hosts(record)
    here = run_host(record)
    return [row | {"node_host": hosts.get(row.get("node") or "", here)} for row in rows]


def other_hosts_system(raw: Path, record: dict, window_start: float, system_rows) -> list[dict]:
    """The system rows of a placed topology's nodes' hosts (and its proxy's, on a host of its own), on the
    client's clock: system_rows(folder, window_start) read each RAW/<node>'s monitors (collect.system_rows)."""
    topology = record.get("topology") or {}
    clocks = (topology.get("network") or {}).get("clocks") or {}
    proxy = topology.get("proxy") or {}
    # a proxy on a host of its own has monitors there too (host_step.serve_proxy); beside the client, none
    parts = [(node["name"], node.get("host")) for node in topology.get("nodes") or []] \
        + [("proxy", proxy.get("host"))]
    out = []
    for name, host in parts:
        folder = raw / name
        if host is None or not (folder / "vmstat.txt").exists():
            continue
        offset_s = clocks.get(name, {}).get("offset_ms", 0.0) / 1000
        # a row at their time t is at our t - offset: numbered against our window start moved by offset
        for row in system_rows(folder, window_start + offset_s):
            out.append(row | {"time": row["time"] - offset_s, "node": name, "node_host": host})
    return out
