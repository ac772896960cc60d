"""From one repetition's raw output to tidy files; rebuildable without rerunning anything."""
from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

from dbsweep import accounting, delivered, devices, engines, monitors, workloads
from dbsweep.events.recovery import EVENT_COLUMNS, RECOVERY_COLUMNS, event_rows, recovery_rows
from dbsweep.recipe import Recipe
from dbsweep.topology import figures as topology_figures
from dbsweep.topology import host_tables, proxies
from dbsweep.workloads.contract import Run

SAMPLE_COLUMNS = ["second", "time", "iops", "mibs", "tps", "qps", "reads", "writes", "other",
                  "lat_ms", "lat_pct_ms", "err_s", "reconn_s", "queue", "lat_p99_ms"]
VMSTAT_COLUMNS = ["us", "sy", "id", "wa", "bi", "bo", "cs"]
IOSTAT_COLUMNS = ["device", "r_s", "w_s", "f_s", "rkb_s", "wkb_s", "r_await", "w_await", "aqu_sz", "util"]
# class_util_pct: the device class's utilisation in that second (devices.utilisation), on a capped device
# node, node_host: where a row was measured (topology/host_tables.py): the run's own host (node empty), or a
# placed topology's node's host
SYSTEM_COLUMNS = (["second", "time", "node", "node_host"] + VMSTAT_COLUMNS + IOSTAT_COLUMNS
                  + ["class_util_pct"])
COUNTER_COLUMNS = ["second", "time", "node", "node_host", "name", "value"]  # node: a topology's (else empty)
PERCENTILE_COLUMNS = ["percentile", "lat_ms", "source"]
SUMMARY_KEYS = ["iops", "read_iops", "write_iops", "mibs", "fsyncs", "tps", "qps", "transactions",
                "ignored_errors", "reconnects", "lat_mean_ms", "lat_p95_ms", "lat_p99_ms", "lat_max_ms",
                "class_util_pct"]
# An open-loop run (sysbench --rate): the target and achieved arrival rates, the event queue's
# longest and last length, and whether the run fell short of its target (1) or not (0); for a rate given
# as a percentage of the host's calibrated throughput (calibration.py), that percentage and throughput.
RATE_KEYS = ["rate", "rate_achieved", "queue_max", "queue_end", "rate_short", "rate_percent", "rate_calibrated_tps"]
# Short: fewer events than the target rate brings, by more than this share and by more than
# POISSON_SIGMAS standard deviations of the Poisson arrivals sysbench generates; or a queue that
# ends longer than it started and longer than QUEUE_SHARE of a second's arrivals.
SHORT_SHARE = 0.05
POISSON_SIGMAS = 3
QUEUE_SHARE = 0.1
DATABASE_KEYS = ["hit_ratio", "kb_read_per_txn", "kb_written_per_txn", "log_kb_per_txn", "binlog_kb_per_txn",
                 "cpu_us_per_txn", "cs_per_txn", "server_cpu_us_per_txn",
                 "server_kb_read_per_txn", "server_kb_written_per_txn",
                 "datadir_mb_start", "datadir_mb_end", "memory_limit_mb"]


def collect(run_json: Path, out: dict[str, Path]) -> None:
    """out: samples, system, counters, percentiles, events, recovery, delivered (CSV: every declared setting
    against what ran, delivered.py), summary (JSON), and one CSV per table a workload declares
    (workloads.tables(): every one, with only its header for other workloads). A deviation is also a warning
    on stderr (the rule's log)."""
    record = json.loads(run_json.read_text())
    raw = run_json.parent / record["attempt"] / "raw"
    recipe = Recipe.from_dict(record["recipe"])
    tool = workloads.get(recipe.tool)
    samples = tool.samples(raw, record["measure_start"])
    write_csv(out["samples"], sample_columns(), samples)
    # The system clock second that ends sample `second` 1 is window_start + 1.
    window_start = samples[0]["time"] - 1 if samples else record["measure_start"]
    device_class = record.get("filesystem", {}).get("device_class")
    if device_class:
        device_class = device_class | {"charged": record.get("throttle_ios", {}).get(device_class.get("device"))}
    system = system_rows(raw, window_start, device_class)
    write_csv(out["system"], SYSTEM_COLUMNS,
              host_tables.with_hosts(system, record)
              + host_tables.other_hosts_system(raw, record, window_start, system_rows))
    engine = recipe.engine
    counters = node_counter_rows(raw, record, recipe, window_start) if engine else []
    write_csv(out["counters"], COUNTER_COLUMNS, host_tables.with_hosts(counters, record))
    final = tool.summary(raw)
    final.setdefault("lat_p95_ms", final.get("lat_pct_ms"))
    summary = {k: final.get(k) for k in SUMMARY_KEYS}
    # a workload's own figures (aggregated as columns) and details (summary.json only)
    summary |= {k: final.get(k) for k in [*tool.summary_keys, *tool.detail_keys]}
    summary |= {"tool": recipe.tool, "duration_s": recipe.duration_s, "seconds": len(samples)}
    summary["class_util_pct"] = devices.mean_utilisation(system, len(samples)) if device_class else None
    target = tool.rate(recipe.options)
    if target:
        calibrated = record.get("calibration", {})
        summary |= open_loop(target, final, samples) | {"rate_percent": calibrated.get("rate_percent"),
                                                         "rate_calibrated_tps": calibrated.get("tps")}
    if tool.database:
        summary |= per_transaction(samples, system, record["host"]["cpus"])
        summary |= server_summary(recipe, raw / "counters.jsonl", window_start, samples)
        summary |= topology_figures.figures(counters, record, len(samples))
        summary |= server_per_txn(record.get("server_accounting"), counters, samples)
    if "delivered" in out:
        checks = delivered.checks(recipe, record, raw) + delivered.extra(recipe, summary, counters)
        delivered.write(out["delivered"], checks)
        summary |= delivered.counts(checks)
        for check in checks:
            if check.verdict == delivered.DEVIATED:
                print(f"warning: deviated: {check.line()}", file=sys.stderr)
    out["summary"].write_text(json.dumps(summary, indent=2) + "\n")
    if "percentiles" in out:
        rows = [{"percentile": p, "lat_ms": ms, "source": tool.percentile_source}
                for p, ms in tool.percentiles(raw)] if tool.percentiles else []
        write_csv(out["percentiles"], PERCENTILE_COLUMNS, rows)
    if "events" in out:
        write_csv(out["events"], EVENT_COLUMNS, event_rows(raw))
        unit = engines.family(engine).POSITION_UNIT if engine else None
        write_csv(out["recovery"], RECOVERY_COLUMNS,
                  recovery_rows(recipe.events or [], samples, counters, topology_figures.has_replicas(record), unit))
    run = Run(system=system, cpus=record["host"]["cpus"])
    for name, columns in workloads.tables().items():
        if name in out:
            table = tool.tables.get(name)
            write_csv(out[name], list(columns), table.rows(raw, run) if table else [])


def sample_columns() -> list[str]:
    """The samples' columns: the common ones, then those some workloads add."""
    return SAMPLE_COLUMNS + [c for c in workloads.sample_columns() if c not in SAMPLE_COLUMNS]


def open_loop(target: int, final: dict, samples: list[dict]) -> dict:
    """How an open-loop run kept up with its arrival rate. The achieved rate is the tool's
    events per second over its whole run; the queue is sysbench's (None where it prints none)."""
    achieved = final["events"] / final["time_s"] if final.get("time_s") else None
    expected = target * final.get("time_s", 0)
    slack = max(SHORT_SHARE * expected, POISSON_SIGMAS * math.sqrt(expected))
    queues = [row["queue"] for row in samples if row.get("queue") is not None]
    growing = bool(queues) and queues[-1] > queues[0] and queues[-1] > QUEUE_SHARE * target
    short = achieved is None or final["events"] < expected - slack or growing
    return {"rate": target, "rate_achieved": achieved, "queue_max": max(queues) if queues else None,
            "queue_end": queues[-1] if queues else None, "rate_short": int(short)}


def per_transaction(samples: list[dict], system: list[dict], cpus: int) -> dict:
    """KB read and written (iostat), CPU microseconds (vmstat us+sy) and context switches (vmstat cs) per
    transaction, over the seconds of the measured window."""
    window = {row["second"] for row in samples}
    txn = sum(row["tps"] or 0 for row in samples)
    rows = [row for row in system if row["second"] in window]

    def total(key: str) -> float | None:
        values = [row[key] for row in rows if row.get(key) not in (None, "")]
        return sum(values) if values else None

    def per_txn(value: float | None) -> float | None:
        return None if value is None or not txn else value / txn

    cpu = total("us"), total("sy")
    cpu_us = None if None in cpu else (cpu[0] + cpu[1]) / 100 * cpus * 1e6
    return {"kb_read_per_txn": per_txn(total("rkb_s")), "kb_written_per_txn": per_txn(total("wkb_s")),
            "cpu_us_per_txn": per_txn(cpu_us), "cs_per_txn": per_txn(total("cs"))}


def server_cpu_per_txn(counters: list[dict], samples: list[dict]) -> float | None:
    """CPU microseconds of the servers' own processes (every node's: server_cpu_s) per transaction over
    the measured window; where vmstat's cpu_us_per_txn counts the whole host (client and monitors too)."""
    window = {row["second"] for row in samples}
    cpu = [row["value"] for row in counters if row["name"] == "server_cpu_s" and row["second"] in window]
    txn = sum(row["tps"] or 0 for row in samples)
    return sum(cpu) * 1e6 / txn if cpu and txn else None


def server_per_txn(readings: dict | None, counters: list[dict], samples: list[dict]) -> dict:
    """CPU microseconds, and KB read and written (block layer: page cache misses, dirtied pages), of the
    servers' own processes per transaction, from their totals read at the measured window's start and
    end (run.json's server_accounting; accounting.py). Where there is no such pair (runs from before they
    were read, a node taken down or started again within the window), the CPU comes from the sampler's
    per-second server_cpu_s (server_cpu_per_txn) and the KB are None. Where vmstat's cpu_us_per_txn and
    iostat's kb_*_per_txn count the whole host, the client and the monitors too."""
    used = accounting.delta(*(readings.get(end) for end in ("start", "end"))) if readings else None
    txn = sum(row["tps"] or 0 for row in samples)
    got = accounting.per_op(used, txn, "txn")
    if got["server_cpu_us_per_txn"] is None:
        got["server_cpu_us_per_txn"] = server_cpu_per_txn(counters, samples)
    return got


def node_counter_rows(raw: Path, record: dict, recipe: Recipe, window_start: float) -> list[dict]:
    """Every node's counter rows (one node, named "", without a topology), the proxy's, and each replica's
    derived rows (topology.figures: replication_behind, sync_on, flow_paused)."""
    family = engines.family(recipe.engine)
    rows, positions = [], {}
    for node, path in topology_figures.node_files(raw, record):
        counting = proxies.adapter(recipe.proxy["type"]) if node == topology_figures.PROXY else family
        samples = read_samples(path)
        rows += [row | {"node": node} for row in counter_rows(samples, window_start, counting)]
        positions[node] = topology_figures.positions(samples, window_start)
    return rows + topology_figures.derived_rows(rows, record, family, positions)


def read_samples(path: Path) -> list[dict]:
    """A counters.jsonl's samples (none when the file is missing)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def counter_rows(samples: list[dict], window_start: float, family) -> list[dict]:
    """Per-second server counters, long: deltas for cumulative counters, values for gauges,
    and the datadir size where it was taken. A tick belongs to the second it closes, the nearest whole
    second after window_start (the tool's second k ends at window_start + k): the sampler ticks within
    a few ms of those, a hair before or after, so rounding up would put some in the next second."""
    rows = []
    previous = None
    for sample in samples:
        second = round(sample["time"] - window_start)
        if "datadir_bytes" in sample:
            rows.append({"second": second, "time": sample["time"], "name": "datadir_bytes",
                         "value": sample["datadir_bytes"]})
        for name, value in sample["counters"].items():
            if family.CUMULATIVE(name):
                if previous is None or name not in previous:
                    continue
                value -= previous[name]
            rows.append({"second": second, "time": sample["time"], "name": name, "value": value})
        previous = sample["counters"]
    return rows


def server_summary(recipe: Recipe, path: Path, window_start: float, samples: list[dict]) -> dict:
    """Over the measured window (the tool's samples): hit ratio, KB the engine wrote to its own log (redo,
    WAL) and to the binary log per transaction, from the server's counters (the primary's, in a topology);
    datadir size at its start and end, the memory cap."""
    ticks = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    inside = [s for s in ticks if -0.5 <= s["time"] - window_start <= len(samples) + 0.5]
    sizes = [s["datadir_bytes"] for s in ticks if "datadir_bytes" in s]
    engine = recipe.engine
    family = engines.family(engine)
    limit = recipe.memory_limit
    logs = family.logs_written(engine, inside[0]["counters"], inside[-1]["counters"]) if len(inside) >= 2 else {}
    txn = sum(row["tps"] or 0 for row in samples)

    def kb_per_txn(written: float | None) -> float | None:
        return None if written is None or not txn else written / 1024 / txn

    return {
        "hit_ratio": family.hit_ratio(engine, inside[0]["counters"], inside[-1]["counters"])
        if len(inside) >= 2 else None,
        "log_kb_per_txn": kb_per_txn(logs.get("log")), "binlog_kb_per_txn": kb_per_txn(logs.get("binlog")),
        "datadir_mb_start": sizes[0] / 2**20 if sizes else None,
        "datadir_mb_end": sizes[-1] / 2**20 if sizes else None,
        "memory_limit_mb": limit / 2**20 if limit else None,
    }


def system_rows(raw: Path, window_start: float, device_class: dict | None = None) -> list[dict]:
    """vmstat and iostat joined on the second they were sampled in, numbered like the samples; with the
    device class's utilisation in each second of its capped device (run.json filesystem.device_class, with
    `charged`: the throttle's counts over the window, run.json throttle_ios)."""
    def second(t: float) -> int:
        return math.ceil(t - window_start)

    rows: dict[int, dict] = {}
    for row in monitors.vmstat(raw / "vmstat.txt"):
        rows[second(row["time"])] = {"time": row["time"]} | {k: row[k] for k in VMSTAT_COLUMNS}
    iostat = monitors.iostat(raw / "iostat.json") if (raw / "iostat.json").exists() else []
    capped = [row for row in iostat if device_class and row["device"] == device_class.get("block")]
    per_io = devices.charged_per_io(device_class.get("charged")) if capped else None
    for row in iostat:
        target = rows.setdefault(second(row["time"]), {"time": row["time"]})
        target |= {k: row[k] for k in IOSTAT_COLUMNS}
        if capped and row["device"] == device_class["block"]:
            target["class_util_pct"] = devices.utilisation(row, device_class["declared"], per_io)
    return [{"second": s} | rows[s] for s in sorted(rows)]


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, columns, extrasaction="ignore")
        w.writeheader()
        w.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
