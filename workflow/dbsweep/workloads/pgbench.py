"""pgbench, PostgreSQL's own benchmark, against PostgreSQL (any version; a MariaDB engine cannot run it):
its built-in scripts (tpcb-like, the TPC-B-like default; simple-update, pgbench -N; select-only, -S) or the
user's own script file (-f), clients and threads from the threads axis, a -T window, -P 1 progress.

The dataset is pgbench's own tables at a scale (-s) and fill factor (-F), loaded once into the image by
`pgbench -i`; the run skips pgbench's vacuum (-n), so its clock starts with the measured window. The
program is the server build's own pgbench when it has one, else Debian's (postgresql-15's drives every
server version). The connection and password come from the environment and a 0600 password file
(engines.postgresql.client_env), never the command line.

Raw output: stdout.txt (the final report; with per_statement, each statement's latency and failures) and
stderr.txt (one "progress:" line per second, and pgbench's errors). In a cell with timed events, pgbench
also logs every transaction (--log: pgbench_log.<pid>[.<thread>], its latency and when it ended), from
which each second gets its longest completed transaction (lat_max_ms) and, in a second in which nothing
completed, how long its transactions had been waiting (wait_ms).
"""
from __future__ import annotations

import math
import re
import subprocess
from contextlib import contextmanager
from pathlib import Path

from dbsweep.errors import ConfigError
from dbsweep.workloads import check_names, check_rate, rate
from dbsweep.workloads.contract import DATABASE, Workload

TOOL = "pgbench"
BUILTIN = ("tpcb-like", "simple-update", "select-only")
PROTOCOLS = ("simple", "extended", "prepared")
DATASET_DEFAULTS = {"scale": 1, "fillfactor": 100}
RUN_DEFAULTS = {"script": "tpcb-like", "time": 10, "rate": None, "per_statement": False, "protocol": "simple"}
PROGRESS_FILE = "stderr.txt"
LOG_PREFIX = "pgbench_log"
LONG_MS = 250  # a transaction this long or longer counts in the wait of every second it spans

_N = r"(\d+(?:\.\d+)?|NaN|nan)"
# "progress: 1.0 s, 745.9 tps, lat 2.671 ms stddev 1.185, 0 failed" (15 and later say "failed"), with --rate
# ", lag 0.050 ms" after it; before 15 neither "failed" nor "N failed".
PROGRESS = re.compile(rf"^progress: (?P<t>\d+(?:\.\d+)?) s, (?P<tps>{_N}) tps, lat (?P<lat>{_N}) ms "
                      rf"stddev (?P<sd>{_N})(?:, (?P<failed>\d+) failed)?(?:, lag (?P<lag>{_N}) ms)?"
                      rf"(?:, (?P<skipped>\d+) skipped)?(?:, \d+ retried, \d+ retries)?$")
STATEMENT = re.compile(r"^\s+(?P<ms>\d+(?:\.\d+)?)\s+(?:(?P<failures>\d+)\s+)?(?P<sql>\S.*)$")


def _int(value, minimum: int, maximum: int | None = None) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = int(str(value))
    except ValueError:
        return None
    return number if number >= minimum and (maximum is None or number <= maximum) else None


def _bool(value) -> bool | None:
    if isinstance(value, bool):
        return value
    return {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}.get(str(value).lower())


def files(options: dict) -> tuple[str, ...]:
    """A script that is not one of pgbench's built-ins is a file of the user's."""
    script = options.get("script")
    return ("script",) if isinstance(script, str) and script not in BUILTIN else ()


def check(options: dict, where: str) -> None:
    check_names(options, where, "pgbench")
    for name, value in options.items():
        if name not in DATASET_DEFAULTS and name not in RUN_DEFAULTS:
            raise ConfigError(f"{where}.{name}: {value!r} is not an option of pgbench here "
                              f"({', '.join([*DATASET_DEFAULTS, *RUN_DEFAULTS])})")
        if isinstance(value, str) and "{" in value:
            continue  # an axis placeholder, substituted per cell
        if name == "script" and value not in BUILTIN:
            path = Path(str(value))
            if not isinstance(value, str) or not path.is_absolute():
                raise ConfigError(f"{where}.script: {value!r} is neither a pgbench built-in ({', '.join(BUILTIN)}) "
                                  "nor the path of a script file")
            if not path.is_file():
                raise ConfigError(f"{where}.script: {value!r} does not exist")
        if name == "scale" and _int(value, 1) is None:
            raise ConfigError(f"{where}.scale: {value!r} is not a positive integer")
        if name == "fillfactor" and _int(value, 10, 100) is None:
            raise ConfigError(f"{where}.fillfactor: {value!r} is not a whole number from 10 to 100")
        if name == "time" and _int(str(value).rstrip("s"), 1) is None:
            raise ConfigError(f"{where}.time: {value!r} is not a whole number of seconds of at least 1")
        if name == "per_statement" and _bool(value) is None:
            raise ConfigError(f"{where}.per_statement: {value!r} is not on/off (or true/false, 1/0)")
        if name == "protocol" and value not in PROTOCOLS:
            raise ConfigError(f"{where}.protocol: {value!r} is not one of {', '.join(PROTOCOLS)}")
    check_rate(options, where)


def duration(options: dict) -> int:
    return int(str(options.get("time", RUN_DEFAULTS["time"])).rstrip("s"))


def dataset(options: dict) -> dict:
    """pgbench's tables: scale and fill factor (the script only reads and writes them)."""
    given = DATASET_DEFAULTS | {name: options[name] for name in DATASET_DEFAULTS if name in options}
    return {name: int(str(value)) if str(value).isdigit() else value for name, value in given.items()}


def prepare(data: dict, config_file: Path | None = None, threads: int = 1) -> list[list[str]]:
    """pgbench -i: its four tables at the scale and fill factor, vacuumed, with primary keys (quietly:
    a progress line per 5 s rather than per 100,000 rows)."""
    return [["pgbench", "-i", "-q", f"--scale={data['scale']}", f"--fillfactor={data['fillfactor']}"]]


def command(options: dict, threads: int, rawdir: Path, config_file: Path | None = None,
            time_s: int | None = None) -> list[str]:
    """The measured run: `threads` clients on as many pgbench threads, -P 1, -T the window (or time_s)."""
    given = RUN_DEFAULTS | options
    script = str(given["script"])
    argv = ["pgbench", "-n", f"--client={threads}", f"--jobs={threads}", "--progress=1",
            f"--time={time_s or duration(options)}", f"--protocol={given['protocol']}"]
    argv += [f"--builtin={script}"] if script in BUILTIN else [f"--file={script}"]
    if rate(TOOL, options):
        argv.append(f"--rate={rate(TOOL, options)}")
    if _bool(given["per_statement"]):
        argv.append("--report-per-command")
    return argv


@contextmanager
def client(db, argv: list[str]):
    """pgbench of the server's build (else Debian's) with the connection in its environment."""
    program, env = db.family.client("pgbench", db.handle.basedir)
    with db.family.client_env(db.conn, db.handle.rundir) as connection:
        yield [program, *argv[1:]], env | connection


def _text(rawdir: Path, name: str) -> tuple[str, Path]:
    path = Path(rawdir) / name
    if not path.exists():
        raise ValueError(f"{path}: missing (pgbench did not run)")
    return path.read_text(errors="replace"), path


def _number(text: str | None) -> float | None:
    return None if text is None or text.lower() == "nan" else float(text)


def samples(rawdir: Path, start: float) -> list[dict]:
    """One row per progress line: tps, the interval's mean latency (lat_ms) and its standard deviation
    (lat_sd_ms), failed transactions per second (err_s, 15 on), and with --rate the mean schedule lag
    (lag_ms). Seconds count from `start` (taken before exec; -n: no vacuum before the clock starts)."""
    text, path = _text(rawdir, PROGRESS_FILE)
    rows = []
    for line in text.splitlines():
        if not line.startswith("progress: "):
            continue
        match = PROGRESS.match(line)
        if not match:
            raise ValueError(f"{path}: not a pgbench progress line: {line!r}")
        second = round(float(match["t"]))
        tps = float(match["tps"])
        rows.append({"time": start + second, "second": second, "tps": tps,
                     "lat_ms": _number(match["lat"]) if tps > 0 else None,
                     "lat_sd_ms": _number(match["sd"]) if tps > 0 else None,
                     "err_s": float(match["failed"]) if match["failed"] is not None else None,
                     "lag_ms": _number(match["lag"])})
    if not rows:
        raise ValueError(f"{path}: no progress lines (pgbench failed or was killed in its first second)")
    seconds = [r["second"] for r in rows]
    if seconds != sorted(set(seconds)):
        raise ValueError(f"{path}: progress lines are not in increasing seconds: {seconds}")
    logs = sorted(Path(rawdir).glob(f"{LOG_PREFIX}.*"))
    return _with_waits(rows, transactions(logs, start), start) if logs else rows


def wait_report(argv: list[str], origin: float, raw: Path) -> tuple[list[str], dict]:
    """The run with every transaction logged into raw (a cell with timed events)."""
    return [*argv, "--log", f"--log-prefix={Path(raw).absolute() / LOG_PREFIX}"], {}


def transactions(logs: list[Path], start: float) -> list[tuple[float, float]]:
    """(began, ended) in epoch seconds of each transaction pgbench --log logged that ended after start
    ("client_id transaction_no time_us script_no end_epoch end_us [lag_us …]"; a failed or skipped one has
    a word for its time and is left out)."""
    found = []
    for path in logs:
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            fields = line.split()
            if len(fields) < 6:
                raise ValueError(f"{path}:{number}: not a pgbench transaction log line: {line!r}")
            if not fields[2].isdigit():
                continue  # failed, skipped
            ended = int(fields[4]) + int(fields[5]) / 1e6
            if ended > start:  # a warm-up's transactions ended before the window
                found.append((ended - int(fields[2]) / 1e6, ended))
    return found


def _with_waits(rows: list[dict], done: list[tuple[float, float]], start: float) -> list[dict]:
    """Rows with lat_max_ms (the longest transaction that ended in the second) and wait_ms (the longest any
    transaction of LONG_MS or more had been running by the second's end; else lat_max_ms)."""
    worst: dict[int, float] = {}
    for began, ended in done:
        k = max(1, math.ceil(ended - start))
        worst[k] = max(worst.get(k, 0.0), ended - began)
    long = [(began, ended) for began, ended in done if ended - began >= LONG_MS / 1000]
    for row in rows:
        k = row["second"]
        row["lat_max_ms"] = round(1000 * worst[k], 3) if k in worst else None
        begin, end = start + k - 1, start + k
        waited = [min(b, end) - a for a, b in long if a < end and b > begin]
        row["wait_ms"] = round(1000 * max(waited), 3) if waited else row["lat_max_ms"]
    return rows


def live(line: str, state: dict) -> tuple[int, float, str] | None:
    match = PROGRESS.match(line)
    return (round(float(match["t"])), float(match["tps"]), "tps") if match else None


def _figure(text: str, pattern: str, path: Path, required: bool = True) -> re.Match | None:
    match = re.search(pattern, text, re.M)
    if match is None and required:
        raise ValueError(f"{path}: final report has no line like {pattern!r} (pgbench failed; see stderr.txt)")
    return match


def summary(rawdir: Path) -> dict:
    """pgbench's final report: transactions, tps (without the initial connection time), mean latency and
    its standard deviation (ms), failed transactions, the window, the initial connection time; with --rate
    the mean and largest schedule lag; with per_statement, each statement's mean latency (statements)."""
    text, path = _text(rawdir, "stdout.txt")
    transactions = int(_figure(text, r"^number of transactions actually processed: (\d+)", path)[1])
    failed = _figure(text, r"^number of failed transactions: (\d+)", path, required=False)
    lag = _figure(text, r"^rate limit schedule lag: avg ([\d.]+) \(max ([\d.]+)\) ms", path, required=False)
    time_s = float(_figure(text, r"^duration: (\d+) s", path)[1])
    return {
        "transactions": transactions,
        "events": transactions,
        "tps": float(_figure(text, r"^tps = ([\d.]+) \(without initial connection time\)", path)[1]),
        "lat_mean_ms": float(_figure(text, r"^latency average = ([\d.]+) ms", path)[1]),
        "lat_sd_ms": _float(_figure(text, r"^latency stddev = ([\d.]+) ms", path, required=False)),
        "ignored_errors": int(failed[1]) if failed else 0,
        "time_s": time_s,
        "connection_ms": _float(_figure(text, r"^initial connection time = ([\d.]+) ms", path, required=False)),
        "lag_mean_ms": float(lag[1]) if lag else None,
        "lag_max_ms": float(lag[2]) if lag else None,
        "statements": statements(text),
    }


def _float(match: re.Match | None) -> float | None:
    return float(match[1]) if match else None


def statements(text: str) -> list[dict]:
    """-r's table: per statement of the script, its mean latency in ms (and failures, from 15 on)."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("statement latencies in milliseconds")), None)
    if at is None:
        return []
    out = []
    for line in lines[at + 1:]:
        match = STATEMENT.match(line)
        if not match:
            break
        out.append({"statement": match["sql"], "lat_mean_ms": float(match["ms"]),
                    "failures": int(match["failures"]) if match["failures"] is not None else None})
    return out


def version() -> str:
    out = subprocess.run(["pgbench", "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


WORKLOAD = Workload(
    tool=TOOL, kind=DATABASE, check=check, dataset=dataset, prepare=prepare, command=command, samples=samples,
    summary=summary, live=live, version=version, duration=duration, takes_rate=True, families=("postgresql",),
    files=files,
    dataset_options=tuple(DATASET_DEFAULTS), analyses=("statistics", "figures", "db_tables", "db_plots"),
    summary_keys=("lat_sd_ms", "connection_ms", "lag_mean_ms", "lag_max_ms"), detail_keys=("statements",),
    sample_columns=("lat_sd_ms", "lag_ms", "lat_max_ms", "wait_ms"), client=client, live_from=PROGRESS_FILE,
    wait_report=wait_report)
