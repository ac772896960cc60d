"""One long table per kind across all cells and repetitions."""
from __future__ import annotations

import csv
import gzip
import json
from contextlib import contextmanager
from pathlib import Path

from dbsweep import engines
from dbsweep.collect import COUNTER_COLUMNS, DATABASE_KEYS, SAMPLE_COLUMNS, SUMMARY_KEYS, SYSTEM_COLUMNS


def aggregate(rep_dirs: list[Path], axes: list[str], study: str, out: dict[str, Path],
              not_applicable: list[tuple[str, str]] = ()) -> None:
    """rep_dirs each hold run.json, summary.json, samples.csv, system.csv and counters.csv;
    not_applicable lists the cells that were not run, and why."""
    with open(out["not_applicable"], "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["cell", "reason"])
        writer.writerows(not_applicable)
    # Where each repetition ran: a column of every table (an axis of its own when the study names hosts).
    keys = axes + ["rep"] + ([] if "host" in axes else ["host"])
    summary_cols = keys + ["tool", "duration_s", "seconds"] + SUMMARY_KEYS + DATABASE_KEYS
    with _gz(out["summary"], summary_cols) as summary, \
            _gz(out["samples"], keys + SAMPLE_COLUMNS) as samples, \
            _gz(out["system"], keys + SYSTEM_COLUMNS) as system, \
            _gz(out["counters"], keys + COUNTER_COLUMNS) as counters:
        tools, hosts = {}, {}
        for rep_dir in rep_dirs:
            record = json.loads((rep_dir / "run.json").read_text())
            ident = {a: record["cell"].get(a) for a in axes} | {"rep": record["rep"], "host": node(record["host"])}
            summary.writerow(ident | json.loads((rep_dir / "summary.json").read_text()))
            for name, writer in (("samples.csv", samples), ("system.csv", system), ("counters.csv", counters)):
                with open(rep_dir / name, newline="") as f:
                    for row in csv.DictReader(f):
                        writer.writerow(ident | row)
            tools |= record["tools"]
            if "server" in record:
                family = engines.ENGINES[record["server"]["engine"]]
                tools[family] = server_version(family, record["server"]["version"])
            hosts[record["host"]["hostname"]] = record["host"]
    host = next(iter(hosts.values()), {})
    provenance = {
        "study": study, "host": ", ".join(hosts), "cpu": host.get("cpu"), "kernel": host.get("kernel"),
        "memory_gb": host.get("memory_gb"), "tools": tools, "hosts": list(hosts.values()),
    }
    out["provenance"].write_text(json.dumps(provenance, indent=2) + "\n")


def node(host: dict) -> str:
    """The node a repetition ran on: its Slurm node name, else its hostname."""
    return host.get("node") or host["hostname"]


def server_version(family: str, version: str) -> str:
    """SELECT version() made short and named: 'PostgreSQL 15.18 (Debian 15.18-0+deb12u1)', 'MariaDB 10.11.19-…'."""
    version = version.split(" on ", 1)[0]
    return version if version.lower().startswith(family) else f"{'MariaDB' if family == 'mariadb' else family} {version}"


@contextmanager
def _gz(path: Path, columns: list[str]):
    """A DictWriter over a gzipped CSV with a header."""
    with gzip.open(path, "wt", newline="") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        yield writer
