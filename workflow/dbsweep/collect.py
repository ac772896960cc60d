"""From one repetition's raw output to tidy files; rebuildable without rerunning anything."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from dbsweep import monitors, workloads

SAMPLE_COLUMNS = ["second", "time", "iops", "mibs", "lat_ms", "lat_pct_ms"]
VMSTAT_COLUMNS = ["us", "sy", "id", "wa", "bi", "bo", "cs"]
IOSTAT_COLUMNS = ["device", "r_s", "w_s", "rkb_s", "wkb_s", "r_await", "w_await", "aqu_sz", "util"]
SYSTEM_COLUMNS = ["second", "time"] + VMSTAT_COLUMNS + IOSTAT_COLUMNS
SUMMARY_KEYS = ["iops", "read_iops", "write_iops", "mibs", "fsyncs",
                "lat_mean_ms", "lat_p95_ms", "lat_p99_ms", "lat_max_ms"]


def collect(run_json: Path, samples_csv: Path, system_csv: Path, summary_json: Path) -> None:
    record = json.loads(run_json.read_text())
    raw = run_json.parent / record["attempt"] / "raw"
    tool = workloads.module(record["recipe"]["tool"])
    samples = tool.samples(raw, record["measure_start"])
    write_csv(samples_csv, SAMPLE_COLUMNS, samples)
    # The system clock second that ends sample `second` 1 is window_start + 1.
    window_start = samples[0]["time"] - 1 if samples else record["measure_start"]
    write_csv(system_csv, SYSTEM_COLUMNS, system_rows(raw, window_start))
    final = tool.summary(raw)
    summary = {k: final.get(k) for k in SUMMARY_KEYS}
    summary |= {"tool": record["recipe"]["tool"], "duration_s": record["recipe"]["duration_s"],
                "seconds": len(samples)}
    summary_json.write_text(json.dumps(summary, indent=2) + "\n")


def system_rows(raw: Path, window_start: float) -> list[dict]:
    """vmstat and iostat joined on the second they were sampled in, numbered like the samples."""
    def second(t: float) -> int:
        return math.ceil(t - window_start)

    rows: dict[int, dict] = {}
    for row in monitors.vmstat(raw / "vmstat.txt"):
        rows[second(row["time"])] = {"time": row["time"]} | {k: row[k] for k in VMSTAT_COLUMNS}
    iostat = raw / "iostat.json"
    if iostat.exists():
        for row in monitors.iostat(iostat):
            target = rows.setdefault(second(row["time"]), {"time": row["time"]})
            target |= {k: row[k] for k in IOSTAT_COLUMNS}
    return [{"second": s} | rows[s] for s in sorted(rows)]


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, columns, extrasaction="ignore")
        w.writeheader()
        w.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
