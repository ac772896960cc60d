"""sysbench OLTP: the Lua scripts that ship with sysbench 1.0 (oltp_*, select_random_*) or a
user's own script, against MariaDB/MySQL (any engine) or PostgreSQL, with per-second reports.

The connection (db-driver, mysql-host ... pgsql-password) lives in a config file the caller
writes with mode 0600; prepare() and command() put --config-file first because sysbench 1.0.20
applies options in command-line order, so a later option overrides the file. The file is read
before the script is loaded, and a script's own options found there (mysql_storage_engine,
tables, ...) are silently replaced by the script's defaults: a MyRocks prepare would create
InnoDB tables. So prepare() and command() copy those lines of the file onto the command line,
right after --config-file; sysbench's own options, the password among them, stay in the file.

Raw output kept in rawdir: stdout.txt (header, one line per second, final report; sysbench
prints its errors there too) and stderr.txt, both saved by the caller.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from dbsweep import plans
from dbsweep.errors import ConfigError
from dbsweep.workloads import RUNS_COMMAND, SET_BY_DBSWEEP, check_names, check_rate, rate, sysbench_time
from dbsweep.workloads.contract import DATABASE, Table, Workload

TOOL = "sysbench"
PERCENTILE = 95
# With --rate (an open loop) the per-second and final latency is the 99th percentile instead, as
# study 9 reports it. sysbench measures it from each event's arrival in its queue, not from when
# a thread took it up (1.0.20's sb_timer_stop adds the queue time), so time in the queue counts.
OPEN_LOOP_PERCENTILE = 99
# The samples and summary key of each percentile sysbench may be asked for.
PERCENTILE_KEY = {PERCENTILE: "lat_pct_ms", OPEN_LOOP_PERCENTILE: "lat_p99_ms"}

# The scripts in /usr/share/sysbench that build on oltp_common.lua, and each one's options
# beyond oltp_common's.
BUILTIN = {
    "oltp_read_write": (), "oltp_read_only": (), "oltp_write_only": (), "oltp_point_select": (),
    "oltp_insert": (), "oltp_update_index": (), "oltp_update_non_index": (), "oltp_delete": (),
    "select_random_ranges": ("number_of_ranges", "delta"),
    "select_random_points": ("random_points",),
}
# What oltp_common's `prepare` writes, with its defaults, so that a cell spelling a default out
# shares its dataset with one that leaves it implicit.
DATASET_DEFAULTS = {"tables": 1, "table_size": 10000, "create_secondary": True, "auto_inc": True,
                    "secondary": False}
# The table engine (MariaDB/MySQL only) is part of the dataset when the options name it; when it
# comes from the config file, the caller's dataset key must name the engine itself.
ENGINE = "mysql_storage_engine"
# oltp_common's options that only shape the queries of a run.
RUN_OPTIONS = {"range_size", "point_selects", "simple_ranges", "sum_ranges", "order_ranges",
               "distinct_ranges", "index_updates", "non_index_updates", "delete_inserts",
               "range_selects", "skip_trx", "pgsql_variant"}
BOOLEANS = {"create_secondary", "auto_inc", "secondary", "range_selects", "skip_trx", "histogram",
            "validate", "mysql_compression"}

# sysbench's own options (`sysbench --help`), spelled with dashes as there.
GENERAL = {"threads", "events", "time", "forced-shutdown", "thread-stack-size", "rate", "report-interval",
           "report-checkpoints", "debug", "validate", "help", "version", "config-file", "tx-rate",
           "max-requests", "max-time", "num-threads", "rand-type", "rand-spec-iter", "rand-spec-pct",
           "rand-spec-res", "rand-seed", "rand-pareto-h", "verbosity", "percentile", "histogram",
           "db-driver", "db-ps-mode", "db-debug"}
CONNECTION = {"db-driver", "mysql-host", "mysql-port", "mysql-socket", "mysql-user", "mysql-password",
              "mysql-db", "mysql-ssl", "mysql-ssl-cipher", "pgsql-host", "pgsql-port", "pgsql-user",
              "pgsql-password", "pgsql-db"}
# The drivers' options; oltp_common's mysql_storage_engine and pgsql_variant are script options.
DRIVER = CONNECTION | {"mysql-compression", "mysql-debug", "mysql-ignore-errors", "mysql-dry-run"}
# Options a study may not set (compared as _key(name)), and why: those dbsweep sets itself, or that would
# change the stdout this module parses (verbosity hides the interval lines; debug output and checkpoint
# reports add lines of their own), and LuaJIT's control commands (sysbench 1.1's --luajit-cmd, whose
# `v=FILE` writes where it says).
RESERVED = {
    **dict.fromkeys({"threads", "report-interval", "percentile", "config-file", "verbosity", "debug", "db-debug",
                     "mysql-debug", "report-checkpoints", "help", "version"} | CONNECTION,
                    f"{SET_BY_DBSWEEP} (the connection comes from the server config)"),
    "luajit-cmd": RUNS_COMMAND,
}
# Deprecated aliases that would bypass what dbsweep sets or reads (time_s, the warm-up).
ALIASES = {"num-threads": "threads", "max-time": "time", "max-requests": "events", "tx-rate": "rate"}

_NUMBER = r"(\d+(?:\.\d+)?)"
# "[ 1s ] thds: 2 tps: 39.95 qps: 39.95 (r/w/o: 39.95/0.00/0.00) lat (ms,95%): 0.24 err/s: 0.00 reconn/s: 0.00"
# is the C reporter's line; sysbench.report_default (a Lua script's report hook) prints "err/s 0.00".
INTERVAL = re.compile(
    rf"^\[ (?P<t>\d+)s \] thds: (?P<thds>\d+) tps: (?P<tps>{_NUMBER}) qps: (?P<qps>{_NUMBER}) "
    rf"\(r/w/o: (?P<r>{_NUMBER})/(?P<w>{_NUMBER})/(?P<o>{_NUMBER})\) lat \(ms,(?P<pct>\d+)%\): (?P<lat>{_NUMBER}) "
    rf"err/s:? (?P<err>{_NUMBER}) reconn/s: (?P<reconn>{_NUMBER})$")
# With --rate the C reporter adds "[ 1s ] queue length: 0, concurrency: 0" after each interval line.
QUEUE = re.compile(r"^\[ (?P<t>\d+)s \] queue length: (?P<q>\d+),? concurrency: (?P<c>\d+)$")
HISTOGRAM_HEADER = "Latency histogram (values are in milliseconds)"
HISTOGRAM_ROW = re.compile(r"^\s+(?P<ms>\d+(?:\.\d+)?) \|\**\s+(?P<n>\d+)$")


def _key(name) -> str:
    """sysbench takes --table-size as well as --table_size; compare in one spelling."""
    return str(name).replace("_", "-")


def _script_key(name) -> str:
    return str(name).replace("-", "_")


def _value(value) -> str:
    # "True"/"False": a YAML boolean put through an axis placeholder; sysbench wants on/off
    if isinstance(value, bool) or value in ("True", "False"):
        return "on" if value in (True, "True") else "off"
    return str(value)


def _shown(name, value) -> str:
    return "'***'" if "password" in str(name) else repr(value)


def _bool(value):
    """sysbench's on/off values (it takes on, true, 1 and off, false, 0); None if not one."""
    if isinstance(value, bool):
        return value
    text = str(value)
    if text in ("on", "true", "1", "True"):
        return True
    if text in ("off", "false", "0", "False"):
        return False
    return None


def _int(value, minimum: int):
    if isinstance(value, bool):
        return None
    try:
        number = int(str(value))
    except ValueError:
        return None
    return number if number >= minimum else None


def _is_sysbench_option(name) -> bool:
    """One of sysbench's own (general or driver) options, as opposed to the script's."""
    return _key(name) in GENERAL or _key(name) in DRIVER


def check(options: dict, where: str) -> None:
    check_names(options, where, "sysbench")
    script = options.get("script")
    if script is None:
        raise ConfigError(f"{where}.script: missing (one of {', '.join(BUILTIN)}, "
                          "or the path of a .lua file)")
    if not isinstance(script, str) or script not in BUILTIN:
        path = Path(str(script))
        if not isinstance(script, str) or not path.is_absolute() or path.suffix != ".lua":
            raise ConfigError(f"{where}.script: {script!r} is neither a sysbench OLTP script "
                              f"({', '.join(BUILTIN)}) nor the path of a .lua file")
        if not path.is_file():
            raise ConfigError(f"{where}.script: {script!r} does not exist")
    for name, value in options.items():
        key = _key(name)
        if name == "script":
            continue
        if key in RESERVED:
            raise ConfigError(f"{where}.{name}: {_shown(name, value)} {RESERVED[key]}; remove it")
        if key in ALIASES:
            raise ConfigError(f"{where}.{name}: {value!r} is a deprecated alias; use {ALIASES[key]}")
        if key == "mysql-dry-run":
            raise ConfigError(f"{where}.{name}: {value!r} would measure no database; remove it")
        if value is None or isinstance(value, (list, dict)):
            raise ConfigError(f"{where}.{name}: {_shown(name, value)} is not a single value "
                              f"(sysbench takes --{name}=<value>)")
        if script in BUILTIN and not _is_sysbench_option(name):
            own = set(DATASET_DEFAULTS) | {ENGINE} | RUN_OPTIONS | set(BUILTIN[script])
            if _script_key(name) not in own:
                raise ConfigError(f"{where}.{name}: {value!r} is not an option of sysbench {script} "
                                  f"(see `sysbench {script} help`)")
        if isinstance(value, str) and "{" in value:
            continue  # an axis placeholder, substituted per cell
        if _script_key(name) in BOOLEANS and _bool(value) is None:
            raise ConfigError(f"{where}.{name}: {value!r} is not on/off (or true/false, 1/0)")
        if _script_key(name) == "tables" and _int(value, 1) is None:
            raise ConfigError(f"{where}.{name}: {value!r} is not a positive integer")
        if _script_key(name) == "table_size" and _int(value, 0) is None:
            raise ConfigError(f"{where}.{name}: {value!r} is not a whole number of rows")
    check_rate(options, where)


def files(options: dict) -> tuple[str, ...]:
    """A script that is not one of sysbench's own is a file of the user's."""
    script = options.get("script")
    return ("script",) if isinstance(script, str) and script not in BUILTIN else ()


def percentile(options: dict) -> int:
    """The latency percentile sysbench is asked for: the 99th in an open loop, else the 95th."""
    return OPEN_LOOP_PERCENTILE if rate(TOOL, options) else PERCENTILE


def dataset(options: dict, dataset_options: list | None = None, prepare_threads: int | None = None,
            where: str = "workloads") -> dict:
    """What `prepare` writes. The built-in scripts share oltp_common's schema and loader, so
    their name is not part of it. A user script is (its path and the sha256 of its content),
    with the options of its own the user declares as shaping its dataset (dataset_options; without
    that, every option of its own the user gave), and the threads its prepare runs with
    (prepare_threads, default 1); nothing of oltp_common's is added to what the user wrote."""
    script = options.get("script", "oltp_read_write")
    if script not in BUILTIN:
        return _own_dataset(options, dataset_options, prepare_threads, where)
    for key, value in (("dataset_options", dataset_options), ("prepare_threads", prepare_threads)):
        if value is not None:
            raise ConfigError(f"{where}.{key}: {value!r} is for a script of your own; {script} has its own "
                              "dataset options (tables, table_size, ...)")
    given = {_script_key(name): value for name, value in options.items()
             if name not in ("script", "sha256") and not _is_sysbench_option(name)}
    data = {name: given.get(name, default) for name, default in DATASET_DEFAULTS.items()}
    for name in ("tables", "table_size"):
        number = _int(data[name], 0)
        data[name] = data[name] if number is None else number
    for name in ("create_secondary", "auto_inc", "secondary"):
        flag = _bool(data[name])
        data[name] = data[name] if flag is None else flag
    if ENGINE in given:
        data[ENGINE] = str(given[ENGINE]).lower()  # engine names are case-blind
    if script == "oltp_insert" and not data["auto_inc"]:
        # oltp_insert's own prepare leaves the tables empty without auto_inc (its run inserts
        # random ids that would collide with 1..table_size)
        data["table_size"] = 0
    return data


def _own_dataset(options: dict, declared: list | None, threads: int | None, where: str) -> dict:
    own = [name for name in options if name != "script" and not _is_sysbench_option(name)]
    if declared is None:  # every option of its own but oltp_common's run options may shape what it writes
        declared = [name for name in own if _script_key(name) not in RUN_OPTIONS]
    for i, name in enumerate(declared):
        if name not in own:
            raise ConfigError(f"{where}.dataset_options[{i}]: {name!r} is not one of the script's options given "
                              f"under options ({', '.join(own) or 'none'})")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ConfigError(f"{where}.prepare_threads: {threads!r} is not a positive integer")
    path = Path(options["script"])
    return ({"script": str(path), "sha256": _sha256(path)} | {name: options[name] for name in declared}
            | {"prepare_threads": threads or 1})


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def prepare(data: dict, config_file: Path, threads: int = 2) -> list[list[str]]:
    """Load the dataset (what dataset() gives): oltp_common's parallel prepare (by tables) through
    oltp_read_write for every built-in script (select_random_*'s own prepare is oltp_common's too: their
    tables == 1 assertion overrides a function sysbench never calls); for a user script, the script
    itself with the options of its dataset and its prepare_threads, nothing else."""
    data = dict(data) if "sha256" in data else dataset(data)  # a dataset, or options
    if "sha256" in data:
        data.pop("sha256")
        script, threads = data.pop("script"), data.pop("prepare_threads")
        return [["sysbench", script, f"--config-file={config_file}"]
                + [f"--{name}={_value(value)}" for name, value in data.items()] + [f"--threads={threads}", "prepare"]]
    data.pop("script", None)
    return [["sysbench", "oltp_read_write", f"--config-file={config_file}"]
            + [f"--{name}={_value(value)}" for name, value in data.items()]
            + [f"--threads={max(1, min(threads, data['tables']))}", "prepare"]]


def command(options: dict, threads: int, rawdir: Path, config_file: Path, time_s: int | None = None) -> list[str]:
    argv = (["sysbench", str(options["script"]), f"--config-file={config_file}"]
            + [f"--threads={threads}", "--report-interval=1", f"--percentile={percentile(options)}"])
    timed = False
    for name, value in options.items():
        if name == "script":
            continue
        if _key(name) == "time" and time_s is not None:
            value, timed = time_s, True
        argv.append(f"--{name}={_value(value)}")
    if time_s is not None and not timed:
        argv.append(f"--time={time_s}")
    return argv + ["run"]


@contextmanager
def client(db, argv: list[str]):
    """A built-in script's command gets what the engine needs (MyRocks tables: --mysql-storage-engine);
    a user script only the options the user wrote (sysbench refuses options a script does not declare)."""
    yield (db.sysbench(argv) if argv[1] in BUILTIN else argv), None


def _stdout(rawdir: Path, stdout: str) -> tuple[str, Path]:
    path = Path(rawdir) / stdout
    if not path.exists():
        raise ValueError(f"{path}: missing (sysbench did not run)")
    return path.read_text(errors="replace"), path


def samples(rawdir: Path, start: float, stdout: str = "stdout.txt") -> list[dict]:
    """One row per interval line; sysbench's times are seconds since its threads started,
    counted here from `start` (taken before exec, so a little early).

    Rates are per second as printed (2 decimals): tps, qps and its reads/writes/other split,
    err_s (ignored errors) and reconn_s. lat_pct_ms is the interval's 95th percentile; sysbench
    prints 0.00 for an interval without transactions, which is reported as None. With --rate
    the interval's latency is the 99th percentile, lat_p99_ms (lat_pct_ms None), time in the
    queue included, and queue is the event queue length at the end of the interval; without
    --rate, lat_p99_ms and queue are None.
    """
    text, path = _stdout(rawdir, stdout)
    rows = []
    for line in text.splitlines():
        if not line.startswith("[ "):
            continue
        queue = QUEUE.match(line)
        if queue:
            if not rows or rows[-1]["second"] != int(queue["t"]):
                raise ValueError(f"{path}: queue line without its interval line: {line!r}")
            rows[-1]["queue"] = int(queue["q"])
            continue
        match = INTERVAL.match(line)
        if not match:
            raise ValueError(f"{path}: not a sysbench OLTP interval line: {line!r}")
        pct = int(match["pct"])
        if pct not in PERCENTILE_KEY:
            raise ValueError(f"{path}: interval latency is the {pct}th percentile, expected "
                             f"{PERCENTILE}th (or {OPEN_LOOP_PERCENTILE}th with --rate)")
        second, tps = int(match["t"]), float(match["tps"])
        latency = dict.fromkeys(PERCENTILE_KEY.values()) | \
            {PERCENTILE_KEY[pct]: float(match["lat"]) if tps > 0 else None}
        rows.append({
            "time": start + second,
            "second": second,
            "threads": int(match["thds"]),
            "tps": tps,
            "qps": float(match["qps"]),
            "reads": float(match["r"]),
            "writes": float(match["w"]),
            "other": float(match["o"]),
            **latency,
            "err_s": float(match["err"]),
            "reconn_s": float(match["reconn"]),
            "queue": None,
        })
    if not rows:
        raise ValueError(f"{path}: no per-second lines (killed in its first second, or a report hook "
                         "other than sysbench.report_default?)")
    seconds = [r["second"] for r in rows]
    if seconds != sorted(set(seconds)):
        raise ValueError(f"{path}: interval lines are not in increasing seconds: {seconds}")
    return _with_waits(rows, Path(rawdir) / stdout.replace("stdout", "stderr"), start)


# --- what a stall second still shows (workflow/lua/wait_report.lua) ---------------------------

WAIT_REPORT = Path(__file__).resolve().parents[2] / "lua" / "wait_report.lua"
MAX_LINE = re.compile(r"^dbsweep-max (\d+) ([0-9.]+)$", re.M)
LONG_LINE = re.compile(r"^dbsweep-long ([0-9.]+) ([0-9.]+)$", re.M)
LOST_LINE = re.compile(r"^dbsweep-lost ([0-9.]+) ", re.M)
RECONNECTED_LINE = re.compile(r"^dbsweep-reconnected ([0-9.]+) ", re.M)


def wait_report(argv: list[str], origin: float, raw: Path) -> tuple[list[str], dict]:
    """A `run` command made to run its script through wait_report.lua (per-second maximum latency, and
    the start and end of every long transaction, on stderr), and the environment it needs."""
    if argv[-1] != "run":
        return argv, {}
    return [argv[0], str(WAIT_REPORT), *argv[2:]], {"DBSWEEP_SCRIPT": argv[1], "DBSWEEP_ORIGIN": f"{origin:.6f}"}


def _with_waits(rows: list[dict], stderr: Path, start: float) -> list[dict]:
    """Rows with lat_max_ms (the longest transaction that ended in the second) and wait_ms (the longest
    any transaction had been running by the second's end, counting one still running then: in a second
    without a completed transaction, how long its transactions had waited), where the run reported them;
    the transactions that lost their connection and the new connections added to err_s and reconn_s."""
    text = stderr.read_text(errors="replace") if stderr.exists() else ""
    if "dbsweep-" not in text:
        return rows
    worst: dict[int, float] = {}
    for second, ms in MAX_LINE.findall(text):
        worst[int(second)] = max(worst.get(int(second), 0.0), float(ms))
    long = [(float(a), float(b)) for a, b in LONG_LINE.findall(text)]
    def per_second(pattern) -> dict[int, int]:
        counts: dict[int, int] = {}
        for t in pattern.findall(text):
            k = max(1, math.ceil(float(t) - start))
            counts[k] = counts.get(k, 0) + 1
        return counts

    lost, reconnected = per_second(LOST_LINE), per_second(RECONNECTED_LINE)
    for row in rows:
        k = row["second"]
        row["err_s"] = (row.get("err_s") or 0) + lost.get(k, 0)
        row["reconn_s"] = (row.get("reconn_s") or 0) + reconnected.get(k, 0)
        row["lat_max_ms"] = worst.get(k)
        begin, end = start + k - 1, start + k
        waited = [min(b, end) - a for a, b in long if a < end and b > begin]
        row["wait_ms"] = round(1000 * max(waited), 3) if waited else row["lat_max_ms"]
    return rows


def live(line: str, state: dict) -> tuple[int, float, str] | None:
    """(second, tps, "tps") of an interval line as sysbench prints it, for the progress line."""
    match = INTERVAL.match(line)
    return (int(match["t"]), float(match["tps"]), "tps") if match else None


# What sysbench 1.0.20 prints for a query that lost its connection, which the wait report (workflow/lua/
# wait_report.lua) survives: its lines for it are no error of the run when the report says it reconnected.
LOST_QUERY = re.compile(r"^FATAL: mysql_\w+\(\) returned error (2002|2003|2006|2013|2055) |"
                        r"^FATAL: .*(server closed the connection|terminating connection|connection to server)")


def _fatal(text: str, path: Path) -> None:
    fatal = [line for line in text.splitlines() if line.startswith("FATAL:")]
    stderr = path.with_name(path.name.replace("stdout", "stderr"))
    survived = stderr.exists() and "dbsweep-reconnected" in stderr.read_text(errors="replace")
    if survived:
        fatal = [line for line in fatal if not LOST_QUERY.match(line) and "(last message repeated" not in line]
    if fatal:
        raise ValueError(f"{path}: sysbench reported an error: {fatal[0]}")


def _figure(text: str, label: str, path: Path, pattern: str = r"([\d.]+)s?") -> re.Match:
    match = re.search(rf"^\s+{re.escape(label)}\s+{pattern}$", text, re.M)
    if not match:
        raise ValueError(f"{path}: final report has no {label!r} line")
    return match


def _count_rate(text: str, label: str, path: Path) -> tuple[int, float]:
    """'    transactions:                        314    (156.71 per sec.)'"""
    match = _figure(text, label, path, r"(\d+)\s+\(([\d.]+) per sec\.\)")
    return int(match[1]), float(match[2])


def summary(rawdir: Path, stdout: str = "stdout.txt") -> dict:
    """sysbench's final report. Counts are whole numbers, rates per second, latencies in ms
    (2 decimals); sysbench gives one percentile: the 95th (lat_pct_ms), or with --rate the 99th
    (lat_p99_ms)."""
    text, path = _stdout(rawdir, stdout)
    _fatal(text, path)
    if "\nSQL statistics:" not in text or "\nThreads fairness:" not in text \
            or "execution time (avg/stddev):" not in text:
        raise ValueError(f"{path}: no final report (sysbench killed or failed; see stderr.txt)")
    counts = {name: int(_figure(text, f"{name}:", path, r"(\d+)")[1])
              for name in ("read", "write", "other", "total")}
    transactions, tps = _count_rate(text, "transactions:", path)
    queries, qps = _count_rate(text, "queries:", path)
    errors, _ = _count_rate(text, "ignored errors:", path)
    reconnects, _ = _count_rate(text, "reconnects:", path)
    if counts["read"] + counts["write"] + counts["other"] != counts["total"] or counts["total"] != queries:
        raise ValueError(f"{path}: query counts do not add up: {counts}, queries {queries}")
    pct = re.search(r"^\s+(\d+)th percentile:\s+([\d.]+)$", text, re.M)
    if not pct or int(pct[1]) not in PERCENTILE_KEY:
        raise ValueError(f"{path}: final report has no {PERCENTILE}th or {OPEN_LOOP_PERCENTILE}th percentile line")
    return {
        "transactions": transactions,
        "tps": tps,
        "queries": queries,
        "qps": qps,
        "reads": counts["read"],
        "writes": counts["write"],
        "other": counts["other"],
        "ignored_errors": errors,
        "reconnects": reconnects,
        "lat_min_ms": float(_figure(text, "min:", path)[1]),
        "lat_mean_ms": float(_figure(text, "avg:", path)[1]),
        **dict.fromkeys(PERCENTILE_KEY.values()),
        PERCENTILE_KEY[int(pct[1])]: float(pct[2]),
        "lat_max_ms": float(_figure(text, "max:", path)[1]),
        "lat_sum_ms": float(_figure(text, "sum:", path)[1]),
        "time_s": float(_figure(text, "total time:", path)[1]),
        "events": int(_figure(text, "total number of events:", path, r"(\d+)")[1]),
    }


def histogram(rawdir: Path, stdout: str = "stdout.txt") -> list[tuple[float, int]]:
    """(latency ms, count) per non-empty bucket of --histogram=on, over the whole run; []
    without it. The counts add up to the run's events."""
    text, path = _stdout(rawdir, stdout)
    lines = text.splitlines()
    if HISTOGRAM_HEADER not in lines:
        return []
    at = lines.index(HISTOGRAM_HEADER)
    if at + 1 >= len(lines) or "distribution" not in lines[at + 1]:
        raise ValueError(f"{path}: histogram without its column header")
    rows = []
    for line in lines[at + 2:]:
        if not line.strip():  # sysbench ends the histogram with a line of one space
            return rows
        match = HISTOGRAM_ROW.match(line)
        if not match:
            raise ValueError(f"{path}: not a histogram row: {line!r}")
        rows.append((float(match["ms"]), int(match["n"])))
    raise ValueError(f"{path}: histogram cut off after {len(rows)} rows")


def percentiles(rawdir: Path, stdout: str = "stdout.txt") -> list[tuple[float, float]]:
    """(percentile, latency ms) at each non-empty bucket of the histogram: the share of the run's
    events at or below that bucket; [] without a histogram."""
    rows = histogram(rawdir, stdout)
    total = sum(n for _, n in rows)
    out, below = [], 0
    for ms, n in rows:
        below += n
        out.append((100 * below / total, ms))
    return out


# The statements of oltp_common.lua (sysbench 1.0), each with the option that counts it per transaction (0: not
# run) and the built-in scripts that run it; the parameters are the first rows' (ids from 1, a range of
# range_size), so that every cell asks for the plan of the same statement.
STATEMENTS = {
    "point_select": ("point_selects", "SELECT c FROM sbtest1 WHERE id=1"),
    "simple_range": ("simple_ranges", "SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND {range}"),
    "sum_range": ("sum_ranges", "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 1 AND {range}"),
    "order_range": ("order_ranges", "SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND {range} ORDER BY c"),
    "distinct_range": ("distinct_ranges", "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 1 AND {range} ORDER BY c"),
    "index_update": ("index_updates", "UPDATE sbtest1 SET k=k+1 WHERE id=1"),
    "non_index_update": ("non_index_updates", "UPDATE sbtest1 SET c='dbsweep' WHERE id=1"),
    "delete": ("delete_inserts", "DELETE FROM sbtest1 WHERE id=1"),
    "insert": ("delete_inserts", "INSERT INTO sbtest1 (id, k, c, pad) VALUES (1, 1, 'dbsweep', 'dbsweep')"),
}
READS = ("point_select", "simple_range", "sum_range", "order_range", "distinct_range")
WRITES = ("index_update", "non_index_update", "delete", "insert")
SCRIPT_STATEMENTS = {"oltp_read_write": READS + WRITES, "oltp_read_only": READS, "oltp_write_only": WRITES,
                     "oltp_point_select": ("point_select",), "oltp_update_index": ("index_update",),
                     "oltp_update_non_index": ("non_index_update",), "oltp_delete": ("delete", "insert"),
                     "oltp_insert": ("insert",)}
PLANS = "plans"  # raw/plans/<statement>.json, and raw/plans.jsonl: how each was asked for


def statements(options: dict) -> dict[str, str]:
    """name -> SQL of the distinct statements a built-in script runs with these options; none for a user's
    own script or select_random_* (their statements are not known here)."""
    out = {}
    for name in SCRIPT_STATEMENTS.get(str(options.get("script")), ()):
        count, sql = STATEMENTS[name]
        if options.get(count) in (0, "0"):
            continue
        if name.endswith("_range") and _bool(options.get("range_selects", True)) is False:
            continue
        out[name] = sql.format(range=int(options.get("range_size", 100)))
    return out


def explain(db, options: dict, raw: Path) -> None:
    """Each distinct statement's plan, once, before the measured window (so its timing is unchanged), into
    raw/plans/<statement>.json byte for byte as the server gave it (the family's explain: ANALYZE in a
    read-only transaction rolled back, EXPLAIN for a statement that writes: nothing is changed). The plans
    table fingerprints them, so a reader can check that the plans did not change between cells."""
    wanted = statements(options)
    if not wanted:
        return
    (raw / PLANS).mkdir(exist_ok=True)
    entries = []
    conn = db.family.connect(db.local)
    try:
        for name, sql in wanted.items():
            t0 = time.perf_counter()
            try:
                statement, text = db.family.explain(conn, sql)
            except Exception as e:  # noqa: BLE001 - the driver's own errors (PyMySQL, psycopg)
                raise RuntimeError(f"plan of sysbench's {name} statement: {e}") from None
            (raw / PLANS / f"{name}.json").write_bytes(text.encode())
            entries.append({"query": name, "statement": statement, "seconds": time.perf_counter() - t0,
                            "file": f"{PLANS}/{name}.json"})
    finally:
        conn.close()
    (raw / f"{PLANS}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))


def plan_rows(rawdir: Path, run) -> list[dict]:
    """The plans table: one row per statement explained before the window (none when none was)."""
    path = Path(rawdir) / f"{PLANS}.jsonl"
    if not path.exists():
        return []
    return [plans.table_row(rawdir, e["query"], e["statement"], e["seconds"], e["file"])
            for e in map(json.loads, path.read_text().splitlines())]


def version() -> str:
    out = subprocess.run(["sysbench", "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


WORKLOAD = Workload(
    tool=TOOL, kind=DATABASE, check=check, dataset=dataset, prepare=prepare, command=command, samples=samples,
    summary=summary, live=live, version=version, duration=sysbench_time, takes_rate=True, files=files,
    dataset_options=(*DATASET_DEFAULTS, ENGINE), settings=("dataset_options", "prepare_threads"),
    analyses=("statistics", "figures", "db_tables", "db_plots"),
    percentiles=percentiles, percentile_source="sysbench histogram", client=client,
    sample_columns=("lat_max_ms", "wait_ms"), wait_report=wait_report,
    before_window=explain, tables={"plans": Table(tuple(plans.COLUMNS), plan_rows)})
