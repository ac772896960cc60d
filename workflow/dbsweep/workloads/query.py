"""The user's own SQL, timed: a setup file loaded into the prepared image, then a query file run
`executions` times, cold (each execution after a server restart with the OS caches dropped) or warm
(after one unmeasured warm-up pass), under session settings given as `session.<name>` options (a value may
name an axis: {optimizer}); server-wide settings come from option sets as for every database workload.

Raw output, raw/executions.jsonl: one line per pass (warmup, idle, measured) with its start, seconds, rows
and the server's counters (SHOW GLOBAL STATUS; pg_stat_database and pg_statio_user_tables summed) right
before and after. The idle pass reads the counters twice with nothing between: what reading them costs,
subtracted from each execution's deltas.

The plan the server chose, raw/plans/<query>.json (the query file's name): once, after the measured executions
(so their times are those of executions alone), in the session of the last one (the cell's session settings),
the server's JSON as it sent it (engines' explain: ANALYZE where the statement only reads, else EXPLAIN); its
pass in executions.jsonl ("plan") says the statement used and its seconds. The plans table gives each plan's
fingerprint (dbsweep.plans: its shape without costs, estimates and what the run measured), which tells the
cells that ran the same plan.
"""
from __future__ import annotations

import hashlib
import json
import re
import statistics
import time
from pathlib import Path

from dbsweep import engines, plans
from dbsweep.errors import ConfigError
from dbsweep.workloads import check_names
from dbsweep.workloads.contract import DATABASE, Table, Workload

TOOL = "query"
DEFAULTS = {"executions": 5, "cache": "warm"}
FILES = ("setup", "query")
CACHES = ("cold", "warm")
SESSION = "session."
# A session setting's name (PostgreSQL's may hold a dot: an extension's own), checked after `session.`
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
OPTION = re.compile(rf"[A-Za-z][A-Za-z0-9_-]*|{re.escape(SESSION)}.*")
# Counters reported per execution: each server family's QUERY_COUNTERS (those present on the engine); the
# rest stay in the raw file.
REPORTED = re.compile("|".join(f"^(?:{family.QUERY_COUNTERS})$" for family in engines.families()), re.I)
EXECUTION_COLUMNS = ["execution", "name", "value"]
PLANS = "plans"  # raw/plans/<query>.json
PLAN_COLUMNS = plans.COLUMNS


def check(options: dict, where: str) -> None:
    check_names(options, where, "query", OPTION, "setup, query, executions, cache or session.<setting>")
    for key in FILES:
        value = options.get(key)
        if value is None:
            raise ConfigError(f"{where}.{key}: missing (the path of an .sql file)")
        path = Path(str(value))
        if not path.is_file():
            raise ConfigError(f"{where}.{key}: {value!r} does not exist")
        options[key] = str(path.resolve())  # config.load made it absolute (relative to the study's folder)
    if not Path(options["query"]).read_text().strip().rstrip(";").strip():
        raise ConfigError(f"{where}.query: {options['query']!r} holds no statement")
    for name, value in options.items():
        if name in FILES:
            continue
        if name.startswith(SESSION):
            if not NAME.fullmatch(name[len(SESSION):]):
                raise ConfigError(f"{where}.{name}: {name[len(SESSION):]!r} is not a setting name")
            continue
        if name not in DEFAULTS:
            raise ConfigError(f"{where}.{name}: {value!r} is not an option of query (setup, query, executions, "
                              "cache, session.<setting>)")
        if isinstance(value, str) and "{" in value:
            continue  # an axis placeholder
        if name == "executions" and (isinstance(value, bool) or not str(value).isdigit() or int(value) < 1):
            raise ConfigError(f"{where}.executions: {value!r} is not a whole number of at least 1")
        if name == "cache" and value not in CACHES:
            raise ConfigError(f"{where}.cache: {value!r} is not one of {', '.join(CACHES)}")


def dataset(options: dict) -> dict:
    """The setup file, by path and content."""
    path = Path(options["setup"])
    return {"setup": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def prepare(data: dict, config_file: Path, threads: int = 1) -> list[list[str]]:
    return []  # load() runs the setup file through the engine's client


def load(db, data: dict, log) -> list[list[str]]:
    """Run the setup file as the benchmark user; fail naming the file and the server's error."""
    path = Path(data["setup"])
    log.write(f"setup: {path}\n")
    log.flush()
    try:
        db.family.user_sql(db.handle, db.conn, path.read_text())
    except (RuntimeError, OSError) as e:
        raise RuntimeError(f"setup {path}: {e}") from None
    return [["setup", str(path)]]


def _settings(options: dict) -> dict:
    return {name[len(SESSION):]: value for name, value in options.items() if name.startswith(SESSION)}


def _session(db, options: dict):
    """A client session of the benchmark user with the cell's session settings."""
    conn = db.family.connect(db.local)
    with conn.cursor() as cursor:
        for name, value in _settings(options).items():
            db.family.set_session(cursor, name, value)
    return conn


def _session_settings(db, session, options: dict, raw: Path) -> None:
    """Each session setting the cell declares, as the session that ran the executions reports it at their end,
    into raw/session.tsv (delivered.py compares it with the declaration)."""
    settings = _settings(options)
    if not settings:
        return
    with session.cursor() as cursor:
        got = {name: db.family.session_value(cursor, name) for name in settings}
    (raw / "session.tsv").write_text("".join(f"{name}\t{value}\n" for name, value in got.items()))


def _counters(db) -> dict:
    return db.family.counters(db.local) | db.family.table_counters(db.local)


def _pass(db, session, sql: str, kind: str, n: int) -> dict:
    before = _counters(db)
    start = time.time()
    t0 = time.perf_counter()
    rows = None
    if kind != "idle":
        with session.cursor() as cursor:
            cursor.execute(sql)
            rows = len(cursor.fetchall()) if cursor.description else cursor.rowcount
    seconds = time.perf_counter() - t0
    db.family.flush_statistics(session)  # so that the counters after include this pass
    return {"pass": kind, "execution": n, "start": start, "seconds": seconds, "rows": rows,
            "before": before, "after": _counters(db)}


def _plan(db, session, sql: str, query: str, raw: Path) -> dict:
    """The plan the server chooses for sql in session, into raw/plans/<query>.json byte for byte; its pass. A plan
    the server would not give fails the repetition, naming the query: its timings alone cannot say which plan
    they are of."""
    start = time.time()
    t0 = time.perf_counter()
    try:
        statement, text = db.family.explain(session, sql)
    except Exception as e:  # the driver's own errors (PyMySQL, psycopg)
        raise RuntimeError(f"plan of {query}: {e}") from None
    seconds = time.perf_counter() - t0
    path = raw / PLANS / f"{query}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(text.encode())
    return {"pass": "plan", "execution": None, "start": start, "seconds": seconds, "statement": statement,
            "file": str(path.relative_to(raw))}


def measure(window) -> None:
    """The executions: window gives db, restart() (stop, drop the OS caches, start), raw and recipe."""
    options = window.recipe.options
    sql = Path(options["query"]).read_text().strip().rstrip(";").strip()
    cold = options.get("cache", DEFAULTS["cache"]) == "cold"
    executions = int(options.get("executions", DEFAULTS["executions"]))
    with open(window.raw / "executions.jsonl", "w") as out:
        def write(entry: dict) -> None:
            out.write(json.dumps(entry) + "\n")
            out.flush()

        session = None
        try:
            if not cold:
                session = _session(window.db, options)
                write(_pass(window.db, session, sql, "warmup", 0))
            for n in range(1, executions + 1):
                if cold:
                    if session is not None:
                        session.close()
                    window.restart()
                    session = _session(window.db, options)
                write(_pass(window.db, session, sql, "idle", n))
                write(_pass(window.db, session, sql, "measured", n))
            write(_plan(window.db, session, sql, Path(options["query"]).stem, window.raw))
            _session_settings(window.db, session, options, window.raw)
        finally:
            if session is not None:
                session.close()


def _passes(rawdir: Path) -> list[dict]:
    path = Path(rawdir) / "executions.jsonl"
    if not path.exists():
        raise ValueError(f"{path}: missing (the query did not run)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _deltas(entry: dict) -> dict:
    return {name: entry["after"][name] - entry["before"][name] for name in entry["after"]
            if name in entry["before"] and REPORTED.match(name)}


def executions(rawdir: Path) -> list[dict]:
    """Per measured execution: ms, rows and the reported counters' deltas less the idle pass's."""
    passes = _passes(rawdir)
    idle = {p["execution"]: _deltas(p) for p in passes if p["pass"] == "idle"}
    out = []
    for p in passes:
        if p["pass"] != "measured":
            continue
        cost = idle.get(p["execution"], {})
        row = {"execution": p["execution"], "ms": p["seconds"] * 1000, "rows": p["rows"]}
        row |= {name: value - cost.get(name, 0) for name, value in sorted(_deltas(p).items())}
        out.append(row)
    return out


def samples(rawdir: Path, start: float) -> list[dict]:
    return []  # no per-second samples: the executions are the measurements


def summary(rawdir: Path) -> dict:
    rows = executions(rawdir)
    if not rows:
        raise ValueError(f"{Path(rawdir) / 'executions.jsonl'}: no measured execution (killed or failed)")
    ms = [r["ms"] for r in rows]
    return {"lat_mean_ms": statistics.mean(ms), "lat_max_ms": max(ms), "transactions": len(rows)}


def execution_rows(rawdir: Path, run) -> list[dict]:
    """The executions table, long: one row per measured execution and figure (ms, rows, counter deltas)."""
    return [{"execution": e["execution"], "name": name, "value": value}
            for e in executions(rawdir) for name, value in e.items() if name != "execution"]


def plan_rows(rawdir: Path, run) -> list[dict]:
    """The plans table: per plan the server gave (the plan passes), the query, the statement that asked for it,
    its fingerprint, the seconds it took and its file, relative to the results folder (runs/<cell>/...) when
    it lies in one."""
    return [plans.table_row(rawdir, Path(p["file"]).stem, p["statement"], p["seconds"], p["file"])
            for p in _passes(rawdir) if p["pass"] == "plan"]


def version() -> str:
    import psycopg
    import pymysql
    return f"PyMySQL {pymysql.__version__}, psycopg {psycopg.__version__}"


WORKLOAD = Workload(
    tool=TOOL, kind=DATABASE, check=check, dataset=dataset, prepare=prepare, samples=samples, summary=summary,
    version=version, files=lambda options: FILES, duration=lambda options: None, duration_key=None,
    dataset_options=("setup",), analyses=("query_timing",),
    per_second=False, warmup=False, tables={"executions": Table(tuple(EXECUTION_COLUMNS), execution_rows),
                                          "plans": Table(tuple(PLAN_COLUMNS), plan_rows)},
    load=load, measure=measure)
