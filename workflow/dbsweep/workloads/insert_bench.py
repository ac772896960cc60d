"""The insert benchmark's phases (workflow/lua/insert_benchmark.lua, written here), against MariaDB/MySQL
(any engine) or PostgreSQL: load in primary-key order, create three secondary indexes, inserts at a fixed
rate per client with concurrent range queries (qr), the same with point queries (qp).

The prepared image holds the empty tables; every phase is measured, one after another in one measured
window (measure.py measure_phases): raw/<phase>/stdout.txt is sysbench's own per-second and final report,
raw/phases.json each phase's start, end and the datadir size at its end, and the server's own CPU and IO
totals read at its start and end (dbsweep.accounting).

CPU and IO per operation come two ways, side by side: host-wide (cpu_us_per_op, kb_read_per_op,
kb_written_per_op, and context switches, cs_per_op: vmstat and iostat's per-second samples within the
phase, which a phase of a second or two cannot measure well) and the server's own (server_cpu_us_per_op,
server_kb_read_per_op, server_kb_written_per_op: its process tree's totals at the phase's exact start
and end). An operation is a row in load and index, a query in qr and qp; KB written also per inserted
row (kb_written_per_insert, server_kb_written_per_insert), since in qr and qp the writes come from the
inserts, not the queries.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from dbsweep import accounting
from dbsweep.errors import ConfigError
from dbsweep.workloads import check_names, sysbench_oltp, sysbench_time
from dbsweep.workloads.contract import DATABASE, Run, Table, Workload

TOOL = "insert"
SCRIPT = Path(__file__).resolve().parents[2] / "lua" / "insert_benchmark.lua"
PHASES = ("load", "index", "qr", "qp")
# Options and their defaults; all are whole numbers.
DEFAULTS = {"tables": 1, "table_size": 10000, "load_batch": 100, "insert_batch": 10, "insert_rate": 100,
            "range_size": 10, "data_length": 100, "time": 10}
MINIMUM = {"table_size": 0, "data_length": 0}  # the others start at 1
DATASET = ("tables",)  # what prepare writes: empty tables
PHASE_COLUMNS = ["phase", "seconds", "inserts", "queries", "inserts_s", "queries_s", "target_inserts_s",
                 "ops", "op", "cpu_us_per_op", "kb_read_per_op", "kb_written_per_op", "cs_per_op",
                 "server_cpu_us_per_op", "server_kb_read_per_op", "server_kb_written_per_op", "kb_written_per_insert",
                 "server_kb_written_per_insert", "db_mb"]


def check(options: dict, where: str) -> None:
    check_names(options, where, "the insert benchmark")
    for name, value in options.items():
        if name not in DEFAULTS:
            raise ConfigError(f"{where}.{name}: {value!r} is not an option of the insert benchmark "
                              f"({', '.join(DEFAULTS)})")
        if isinstance(value, str) and "{" in value:
            continue  # an axis placeholder, substituted per cell
        _number(name, value, where)


def _number(name: str, value, where: str) -> int:
    minimum = MINIMUM.get(name, 1)
    try:
        number = None if isinstance(value, bool) else int(str(value))
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise ConfigError(f"{where}.{name}: {value!r} is not a whole number of at least {minimum}")
    return number


def settings(options: dict) -> dict:
    """Every option with its default, as numbers (placeholders are substituted by now)."""
    return {name: _number(name, options.get(name, default), f"options.{name}") for name, default in DEFAULTS.items()}


def dataset(options: dict) -> dict:
    """Empty tables: their number, and the script that creates them (its content, so an edit of the
    schema makes new images)."""
    given = {name: options.get(name, DEFAULTS[name]) for name in DATASET}
    given = {name: int(value) if str(value).isdigit() else value for name, value in given.items()}
    return {"script": "insert_benchmark", "sha256": hashlib.sha256(SCRIPT.read_bytes()).hexdigest()} | given


def prepare(data: dict, config_file: Path, threads: int = 1) -> list[list[str]]:
    return [["sysbench", str(SCRIPT), f"--config-file={config_file}", f"--tables={data['tables']}", "prepare"]]


def phases(options: dict, threads: int, config_file: Path) -> list[tuple[str, list[str]]]:
    """One sysbench command per phase. threads is the number of clients: qr and qp run one inserting
    and one querying thread per client."""
    s = settings(options)
    common = ["sysbench", str(SCRIPT), f"--config-file={config_file}", "--report-interval=1",
              f"--percentile={sysbench_oltp.PERCENTILE}"] + [f"--{k}={v}" for k, v in s.items() if k != "time"]
    return [
        ("load", common + ["--phase=load", f"--threads={threads}", "--time=0", "--events=0", "run"]),
        ("index", common + ["--phase=index", f"--threads={min(threads, s['tables'])}", "--time=0", "--events=0",
                            "run"]),
        ("qr", common + ["--phase=qr", f"--threads={2 * threads}", f"--time={s['time']}", "run"]),
        ("qp", common + ["--phase=qp", f"--threads={2 * threads}", f"--time={s['time']}", "run"]),
    ]


def _phases(rawdir: Path) -> list[dict]:
    path = Path(rawdir) / "phases.json"
    if not path.exists():
        raise ValueError(f"{path}: missing (the phases did not run)")
    return json.loads(path.read_text())


def samples(rawdir: Path, start: float) -> list[dict]:
    """sysbench's per-second lines of every phase, in order, with their phase; `second` counts from the
    start of the measured window. A phase of a small table may end before its first line."""
    rows = []
    for phase in _phases(rawdir):
        try:
            lines = sysbench_oltp.samples(Path(rawdir) / phase["phase"], phase["start"])
        except ValueError as e:
            if "no per-second lines" in str(e) and phase["end"] - phase["start"] < 2:
                continue  # over before its first report
            raise
        for row in lines:
            row["phase"] = phase["phase"]
            row["second"] = round(row["time"] - start)
        rows += lines
    return rows


def _options(phase: dict) -> dict:
    """The script's options as the phase's command gave them (--name=value)."""
    return {arg[2:].split("=", 1)[0]: arg.split("=", 1)[1]
            for arg in phase["argv"] if arg.startswith("--") and "=" in arg}


def summary(rawdir: Path) -> dict:
    """Per phase: sysbench's final figures, the phase's window, inserted rows and queries per second
    (over the phase's wall time) against the target rate. Refuses a run without every phase's report."""
    done = {p["phase"]: p for p in _phases(rawdir)}
    missing = [name for name in PHASES if name not in done]
    if missing:
        raise ValueError(f"{Path(rawdir) / 'phases.json'}: phases {', '.join(missing)} did not run")
    out = []
    for name in PHASES:
        phase = done[name]
        opts = _options(phase)
        final = sysbench_oltp.summary(Path(rawdir) / name)
        seconds = phase["end"] - phase["start"]
        batch = int(opts["load_batch"] if name == "load" else opts["insert_batch"])
        inserts = final["writes"] * batch if name != "index" else 0
        clients = int(opts["threads"]) // 2 if name in ("qr", "qp") else None
        rows = int(opts["table_size"]) * int(opts["tables"])
        out.append({
            "phase": name, "start": phase["start"], "end": phase["end"], "seconds": seconds,
            "inserts": inserts, "queries": final["reads"],
            "inserts_s": inserts / seconds if seconds else None,
            "queries_s": final["reads"] / seconds if seconds else None,
            "target_inserts_s": int(opts["insert_rate"]) * clients if clients else None,
            # what CPU and IO are divided by: rows loaded or indexed, or queries
            "op": {"load": "row", "index": "row"}.get(name, "query"),
            "ops": {"load": inserts, "index": rows}.get(name, final["reads"]),
            "db_mb": phase["datadir_bytes"] / 2**20,
            "lat_p95_ms": final["lat_pct_ms"], "lat_max_ms": final["lat_max_ms"],
            # the server's own CPU and IO over the phase (None in runs from before they were read)
            "server_used": accounting.delta(phase.get("server", {}).get("start"), phase.get("server", {}).get("end")),
        })
    return {"phases": out}


def phase_rows(rawdir: Path, run: Run) -> list[dict]:
    """The phases table: each phase's figures, with CPU and IO per operation, host-wide and the server's own,
    and KB written per inserted row."""
    rows = []
    for phase in summary(rawdir)["phases"]:
        figures = per_op(phase, run.system, run.cpus) | accounting.per_op(phase["server_used"], phase["ops"], "op")
        rows.append(phase | figures | per_insert(phase, figures))
    return rows


def per_insert(phase: dict, figures: dict) -> dict:
    """KB written per inserted row, host-wide and the server's own: the insert benchmark's own write figure
    (wKB/i). In qr and qp an operation is a query, but what is written comes from the rows inserted beside
    the queries at the target rate. None in the index phase, which inserts no rows."""
    scale = phase["ops"] / phase["inserts"] if phase["inserts"] and phase["ops"] else None
    return {name.replace("_per_op", "_per_insert"): None if scale is None or figures[name] is None
            else figures[name] * scale for name in ("kb_written_per_op", "server_kb_written_per_op")}


def per_op(phase: dict, system: list[dict], cpus: int) -> dict:
    """CPU microseconds (vmstat us+sy), KB read and written (iostat) and context switches (vmstat cs) per
    operation of one phase of several in a measured window: over the seconds of the system rows sampled
    within the phase (each row covers the second before its time)."""
    rows = [row for row in system if phase["start"] < float(row["time"]) <= phase["end"] + 0.5]
    ops = phase.get("ops")

    def per(key: str, scale: float = 1.0) -> float | None:
        values = [row[key] for row in rows if row.get(key) not in (None, "")]
        return None if not values or not ops else sum(values) * scale / ops

    cpu = [row for row in rows if row.get("us") not in (None, "")]
    return {"cpu_us_per_op": None if not cpu or not ops else
            sum(row["us"] + row["sy"] for row in cpu) / 100 * cpus * 1e6 / ops,
            "kb_read_per_op": per("rkb_s"), "kb_written_per_op": per("wkb_s"), "cs_per_op": per("cs"),
            "system_seconds": len(rows)}


def version() -> str:
    return sysbench_oltp.version()


WORKLOAD = Workload(
    tool=TOOL, kind=DATABASE, check=check, dataset=dataset, prepare=prepare, samples=samples, summary=summary,
    version=version, duration=lambda options: sysbench_time({"time": options.get("time", DEFAULTS["time"])}),
    dataset_options=DATASET, analyses=("insert_benchmark",), per_second=False, warmup=False,
    sample_columns=("phase",), tables={"phases": Table(tuple(PHASE_COLUMNS), phase_rows)}, phases=phases)
