"""One long table per kind across all cells and repetitions."""
from __future__ import annotations

import csv
import gzip
import json
from contextlib import ExitStack, contextmanager
from pathlib import Path

from dbsweep import delivered, engines, workloads
from dbsweep.events.recovery import EVENT_COLUMNS, RECOVERY_COLUMNS
from dbsweep.topology.figures import FIGURE_KEYS
from dbsweep.collect import (COUNTER_COLUMNS, DATABASE_KEYS, PERCENTILE_COLUMNS, RATE_KEYS, SUMMARY_KEYS,
                             SYSTEM_COLUMNS, sample_columns)


def aggregate(rep_dirs: list[Path], axes: list[str], study: str, out: dict[str, Path],
              not_applicable: list[tuple[str, str]] = ()) -> None:
    """rep_dirs each hold run.json, summary.json, samples.csv, system.csv, counters.csv, percentiles.csv and
    one <name>.csv per table a workload declares (workloads.tables(): the insert benchmark's phases, the query
    workload's executions), each gathered into out[<name>]; not_applicable lists the cells that were not run,
    and why. The summary table says each repetition's kind (storage, database) and whether it has a
    per-second series (per_second 1/0), from its workload's declaration. Only the tables out names are written
    (a round's check needs the summary and the samples); the summary always."""
    if "not_applicable" in out:
        with open(out["not_applicable"], "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["cell", "reason"])
            writer.writerows(not_applicable)
    # Where each repetition ran: a column of every table (an axis of its own when the study names hosts).
    keys = axes + ["rep"] + ([] if "host" in axes else ["host"])
    summary_cols = (keys + ["tool", "kind", "per_second", "duration_s", "seconds"] + SUMMARY_KEYS + DATABASE_KEYS
                    + FIGURE_KEYS + RATE_KEYS + workloads.summary_keys() + delivered.COUNT_KEYS)
    per_rep = {"samples": sample_columns(), "system": SYSTEM_COLUMNS, "counters": COUNTER_COLUMNS,
               "percentiles": PERCENTILE_COLUMNS, "events": EVENT_COLUMNS, "recovery": RECOVERY_COLUMNS,
               "delivered": delivered.COLUMNS} \
        | {name: list(cols) for name, cols in workloads.tables().items()}
    with ExitStack() as stack:
        summary = stack.enter_context(_gz(out["summary"], summary_cols))
        writers = {name: stack.enter_context(_gz(out[name], keys + columns)) for name, columns in per_rep.items()
                   if name in out}
        tools, hosts, servers = {}, {}, {}
        for rep_dir in rep_dirs:
            record = json.loads((rep_dir / "run.json").read_text())
            ident = {a: record["cell"].get(a) for a in axes} | {"rep": record["rep"], "host": node(record["host"])}
            final = json.loads((rep_dir / "summary.json").read_text())
            workload = workloads.get(final["tool"])
            summary.writerow(ident | final | {"kind": workload.kind, "per_second": int(workload.per_second)})
            for name, writer in writers.items():
                path = rep_dir / f"{name}.csv"
                if not path.exists() and (name not in workload.tables or name in ("events", "recovery", "delivered")):
                    continue  # collected before that table existed; its workload has none
                with open(path, newline="") as f:
                    for row in csv.DictReader(f):
                        writer.writerow(ident | row)
            tools |= record["tools"]
            if "server" in record:
                family = engines.family(record["server"]["engine"])
                tools[family.FAMILY] = server_version(family.NAME, record["server"]["version"])
                servers.setdefault(family.FAMILY, set()).add(tools[family.FAMILY])
            hosts[record["host"]["hostname"]] = record["host"]
    host = next(iter(hosts.values()), {})
    provenance = {
        "study": study, "host": ", ".join(hosts), "cpu": host.get("cpu"), "kernel": host.get("kernel"),
        "memory_gb": host.get("memory_gb"), "kernel_cmdline": host.get("kernel_cmdline"),
        "sysctl": host.get("sysctl"), "tools": tools, "hosts": list(hosts.values()),
        "servers": {family: sorted(versions) for family, versions in sorted(servers.items())},  # every version run
    }
    if "provenance" in out:
        out["provenance"].write_text(json.dumps(provenance, indent=2) + "\n")
    for kind in TABLES:
        if f"{kind}_parquet" in out:
            to_parquet(out[kind], out[f"{kind}_parquet"], axes)


ROUND_TABLES = ("summary", "samples")  # what a round's check reads (rule round_noise)


def tables_in(folder: Path) -> dict[str, Path]:
    """The tables a round's check reads, as files of one folder (rule round_tables)."""
    folder.mkdir(parents=True, exist_ok=True)
    return {name: folder / f"{name}.csv.gz" for name in ROUND_TABLES}


TABLES = ("summary", "samples", "system", "counters", "percentiles")
TEXT_COLUMNS = {"tool", "kind", "device", "name", "source", "check", "phase", "host", "node", "node_host", "action",
                "target", "outcome", "error"}


def to_parquet(csv_gz: Path, parquet: Path, axes: list[str]) -> None:
    """The same table as Parquet, for joining with other data: axes (but threads) and text columns as
    strings, threads, rep and second as integers, every other column as float64 (also when it is empty)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    with gzip.open(csv_gz, "rt", newline="") as f:
        header = next(csv.reader(f), [])
    integers = {"threads", "rep", "second", "seconds"}
    types = {c: pa.string() for c in header if (c in axes and c not in integers) or c in TEXT_COLUMNS}
    types |= {c: pa.int64() for c in header if c in integers}
    types |= {c: pa.float64() for c in header if c not in types}
    table = pacsv.read_csv(pa.input_stream(str(csv_gz), compression="gzip"),
                           convert_options=pacsv.ConvertOptions(column_types=types, strings_can_be_null=True))
    tmp = parquet.with_name(parquet.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(parquet)


def node(host: dict) -> str:
    """The node a repetition ran on: its Slurm node name, else its hostname."""
    return host.get("node") or host["hostname"]


def server_version(name: str, version: str) -> str:
    """SELECT version() made short and named (name: the family's NAME): 'PostgreSQL 15.18 (Debian 15.18-0+deb12u1)',
    'MariaDB 10.11.19-…'."""
    version = version.split(" on ", 1)[0]
    return version if version.lower().startswith(name.lower()) else f"{name} {version}"


@contextmanager
def _gz(path: Path, columns: list[str]):
    """A DictWriter over a gzipped CSV with a header."""
    with gzip.open(path, "wt", newline="") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        yield writer
