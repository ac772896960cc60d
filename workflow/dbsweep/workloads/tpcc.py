"""tpcc: the TPC-C-like workload of workflow/lua/tpcc.lua (written here from the TPC-C
specification), run by sysbench 1.0.20 against MariaDB/MySQL (InnoDB, MyRocks) or PostgreSQL.

A dataset is `tables` independent sets of the nine TPC-C tables with `scale` warehouses each,
with or without foreign keys; sysbench's threads share the warehouses in prepare and check.
After the measured window the pipeline runs the script's `check` (the consistency conditions
of TPC-C clause 3.3.2) against the still-running server: its output is raw/check.stdout.txt,
and its verdict goes into the summary (check: ok / failed, check_failures) beside tpmC and
the committed transactions per type.

Raw output: stdout.txt as for sysbench OLTP (interval lines, final report) plus one
"tpcc-thread {json}" line per client thread; check.stdout.txt with "tpcc-check {json}" per
failing (set, warehouse, condition) and "tpcc-check-done {json}" per thread.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from dbsweep import engines
from dbsweep.errors import ConfigError
from dbsweep.workloads import check_names, sysbench_oltp as oltp, sysbench_time
from dbsweep.workloads.contract import DATABASE, Workload

TOOL = "sysbench"
SCRIPT = Path(__file__).resolve().parents[2] / "lua" / "tpcc.lua"
TYPES = ("new_order", "payment", "order_status", "delivery", "stock_level")
ISOLATIONS = ("RR", "RC", "SERIALIZABLE")
DATASET_DEFAULTS = {"tables": 1, "scale": 1, "foreign_keys": False}
RUN_DEFAULTS = {"isolation": "RC", "purge": 0}
# Summary keys beyond the common ones (collect.py writes them; aggregate.py adds the columns).
EXTRA_KEYS = ["tpmc", *TYPES, "rollbacks", "retries", "check", "check_failures", "check_warehouses"]
# Written to summary.json only: retries per SQL error, and every failing (set, warehouse, condition).
DETAIL_KEYS = ["retries_by_error", "check_failed"]
CHECK_STDOUT = "check.stdout.txt"
THREAD_LINE = re.compile(r"^tpcc-thread (\{.*\})$", re.M)
CHECK_LINE = re.compile(r"^tpcc-check (\{.*\})$", re.M)
CHECK_DONE = re.compile(r"^tpcc-check-done (\{.*\})$", re.M)

samples = oltp.samples
version = oltp.version
live = oltp.live  # the interval lines are sysbench's own


def check(options: dict, where: str) -> None:
    check_names(options, where, "tpcc")
    for name, value in options.items():
        key = oltp._script_key(name)
        if oltp._key(name) in oltp.RESERVED:
            raise ConfigError(f"{where}.{name}: {oltp._shown(name, value)} {oltp.RESERVED[oltp._key(name)]}; remove it")
        if oltp._key(name) in oltp.ALIASES:
            raise ConfigError(f"{where}.{name}: {value!r} is a deprecated alias; use {oltp.ALIASES[oltp._key(name)]}")
        if value is None or isinstance(value, (list, dict)):
            raise ConfigError(f"{where}.{name}: {oltp._shown(name, value)} is not a single value "
                              f"(sysbench takes --{name}=<value>)")
        if oltp._key(name) == "mysql-dry-run":
            raise ConfigError(f"{where}.{name}: {value!r} would measure no database; remove it")
        if oltp._is_sysbench_option(name):
            continue
        if key not in DATASET_DEFAULTS and key not in RUN_DEFAULTS:
            raise ConfigError(f"{where}.{name}: {value!r} is not an option of tpcc "
                              f"({', '.join([*DATASET_DEFAULTS, *RUN_DEFAULTS])}, or sysbench's own)")
        if isinstance(value, str) and "{" in value:
            continue  # an axis placeholder, substituted per cell
        if key in ("tables", "scale") and oltp._int(value, 1) is None:
            raise ConfigError(f"{where}.{name}: {value!r} is not a positive integer")
        if key == "purge" and oltp._int(value, 0) is None:
            raise ConfigError(f"{where}.{name}: {value!r} is not a whole number of orders (0: no purge)")
        if key == "foreign_keys" and oltp._bool(value) is None:
            raise ConfigError(f"{where}.{name}: {value!r} is not on/off (or true/false, 1/0)")
        if key == "isolation" and str(value).upper() not in ISOLATIONS:
            raise ConfigError(f"{where}.{name}: {value!r} is not one of {', '.join(ISOLATIONS)}")


def not_applicable(options: dict, engine: str) -> str | None:
    """Why a cell of this workload cannot run on engine, or None."""
    if oltp._bool(_options(options)["foreign_keys"]) and not engines.foreign_keys(engine):
        return f"{engine} has no foreign keys (tpcc foreign_keys: on)"
    return None


def _options(options: dict) -> dict:
    given = {oltp._script_key(name): value for name, value in options.items() if not oltp._is_sysbench_option(name)}
    return DATASET_DEFAULTS | RUN_DEFAULTS | given


def dataset(options: dict) -> dict:
    """What `prepare` writes: the sets, warehouses and foreign keys, and the script's sha256
    (its loader shapes the data)."""
    given = _options(options)
    data = {"sha256": hashlib.sha256(SCRIPT.read_bytes()).hexdigest()}
    for name in ("tables", "scale"):
        number = oltp._int(given[name], 1)
        data[name] = given[name] if number is None else number
    flag = oltp._bool(given["foreign_keys"])
    data["foreign_keys"] = given["foreign_keys"] if flag is None else flag
    return data


# The tables of one set (`tables` counts sets: the script creates each name with the set's number, lua/tpcc.lua)
SET_TABLES = ("warehouse", "district", "customer", "history", "orders", "new_order", "item", "stock", "order_line")


def dataset_tables(data: dict) -> int | None:
    """How many tables prepare makes: each of the `tables` sets has SET_TABLES' nine."""
    sets = data.get("tables")
    return sets * len(SET_TABLES) if isinstance(sets, int) else None


def _script_args(data: dict) -> list[str]:
    return [f"--{name}={oltp._value(data[name])}" for name in ("tables", "scale", "foreign_keys")]


def prepare(options: dict, config_file: Path, threads: int = 2) -> list[list[str]]:
    """The script's parallel prepare (its units: each warehouse's stock, and each district); the
    optimizer's statistics are taken after it by database.load; takes options or dataset(options)."""
    data = dataset(options)
    units = data["tables"] * data["scale"] * 11
    return [["sysbench", str(SCRIPT), f"--config-file={config_file}", *_script_args(data),
             f"--threads={max(1, min(threads, units))}", "prepare"]]


def command(options: dict, threads: int, rawdir: Path, config_file: Path, time_s: int | None = None) -> list[str]:
    given = _options(options)
    extra = {name: value for name, value in options.items() if oltp._is_sysbench_option(name)}
    argv = oltp.command({"script": str(SCRIPT)} | extra, threads, rawdir, config_file, time_s)
    return argv[:-1] + _script_args(dataset(options)) + [
        f"--isolation={str(given['isolation']).upper()}", f"--purge={given['purge']}", "run"]


def after_run(options: dict, threads: int, config_file: Path) -> tuple[list[str], str]:
    """The consistency check, run against the server after the measured window, and the name
    of the raw file its stdout goes to."""
    given = _options(options)
    argv = ["sysbench", str(SCRIPT), f"--config-file={config_file}", *_script_args(dataset(options)),
            f"--purge={given['purge']}", f"--threads={max(1, threads)}", "check"]
    return argv, CHECK_STDOUT


def _json_lines(pattern: re.Pattern, text: str, path: Path) -> list[dict]:
    out = []
    for match in pattern.finditer(text):
        try:
            out.append(json.loads(match[1]))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: unreadable line {match[0]!r}: {e}") from None
    return out


def summary(rawdir: Path, stdout: str = "stdout.txt") -> dict:
    """sysbench's final report, plus the committed transactions per type, New-Order rollbacks
    (the 1% invalid item, not errors), retries (deadlocks, lock wait timeouts, serialization
    failures; also in ignored_errors), tpmC (committed New-Orders per minute of the run), and
    the check's verdict when it ran."""
    out = oltp.summary(rawdir, stdout)
    path = Path(rawdir) / stdout
    threads = _json_lines(THREAD_LINE, path.read_text(errors="replace"), path)
    if not threads:
        raise ValueError(f"{path}: no tpcc-thread lines (not a tpcc run, or its threads did not finish)")
    for kind in TYPES:
        out[kind] = sum(t["committed"][kind] for t in threads)
    out["rollbacks"] = sum(t["rollbacks"] for t in threads)
    out["retries"] = sum(sum(t["retries"].values()) for t in threads)
    out["retries_by_error"] = {}
    for t in threads:
        for error, n in t["retries"].items():
            out["retries_by_error"][error] = out["retries_by_error"].get(error, 0) + n
    if sum(out[kind] for kind in TYPES) + out["rollbacks"] != out["transactions"]:
        raise ValueError(f"{path}: per-type counts {[out[k] for k in TYPES]} and {out['rollbacks']} rollbacks "
                         f"do not add up to sysbench's {out['transactions']} transactions")
    out["tpmc"] = out["new_order"] / out["time_s"] * 60 if out["time_s"] else None
    out |= check_result(rawdir)
    return out


def check_result(rawdir: Path) -> dict:
    """check: "ok" or "failed" (None if it did not run), the number of failing (set, warehouse,
    condition) triples, the warehouses checked, and the failures themselves."""
    path = Path(rawdir) / CHECK_STDOUT
    if not path.exists():
        return {"check": None, "check_failures": None, "check_warehouses": None}
    text = path.read_text(errors="replace")
    oltp._fatal(text, path)
    done = _json_lines(CHECK_DONE, text, path)
    if not done:
        raise ValueError(f"{path}: the check did not finish (no tpcc-check-done line)")
    failures = _json_lines(CHECK_LINE, text, path)
    if len(failures) != sum(d["failures"] for d in done):
        raise ValueError(f"{path}: {len(failures)} tpcc-check lines, but its threads counted "
                         f"{sum(d['failures'] for d in done)}")
    failures.sort(key=lambda f: (f["set"], f["warehouse"], f["condition"]))
    return {"check": "failed" if failures else "ok", "check_failures": len(failures),
            "check_warehouses": sum(d["warehouses"] for d in done), "check_failed": failures}


WORKLOAD = Workload(
    tool="tpcc", kind=DATABASE, check=check, dataset=dataset, prepare=prepare, command=command, samples=samples,
    summary=summary, live=live, version=version, duration=sysbench_time, takes_rate=True,
    dataset_options=tuple(DATASET_DEFAULTS), analyses=("statistics", "figures", "db_tables", "db_plots", "tpcc_table"),
    summary_keys=tuple(EXTRA_KEYS), detail_keys=tuple(DETAIL_KEYS), not_applicable=not_applicable,
    after_run=after_run, sample_columns=("lat_max_ms", "wait_ms"), wait_report=oltp.wait_report,
    dataset_tables=dataset_tables)
