"""The results catalog: the long tables of many dbsweep result trees (hosts, dates, builds) in one DuckDB file.

A run is one completed repetition (its run.json), identified by study, cell, repetition, attempt and host.
Adding a tree adds its runs that are not in the catalog yet, in one transaction: a tree that is not a dbsweep
result, a table that cannot be read to its end, or a run whose identity is in the catalog with other data
stops the whole add with one line naming the file, and the catalog is left as it was. The schema is
documented in docs/catalog.md.
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import json
import re
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from dbsweep import engines
from dbsweep.aggregate import TABLES, TEXT_COLUMNS, node, server_version

DEFAULT = Path("results/catalog.duckdb")
INTEGER_COLUMNS = {"second", "seconds"}

SCHEMA = """
CREATE TABLE IF NOT EXISTS sources (
    source_id INTEGER PRIMARY KEY, path VARCHAR NOT NULL, study VARCHAR NOT NULL,
    added TIMESTAMPTZ NOT NULL, runs INTEGER NOT NULL, provenance VARCHAR);
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY, source_id INTEGER NOT NULL,
    study VARCHAR NOT NULL, cell VARCHAR NOT NULL, rep INTEGER NOT NULL, attempt VARCHAR NOT NULL,
    host VARCHAR NOT NULL,
    series VARCHAR NOT NULL, build VARCHAR,
    started TIMESTAMPTZ, ended TIMESTAMPTZ, tool VARCHAR, server VARCHAR,
    dbsweep_commit VARCHAR, dbsweep_dirty BOOLEAN, kernel VARCHAR, cpu VARCHAR,
    metric VARCHAR, window_start BIGINT, window_end BIGINT, seconds BIGINT, median DOUBLE,
    digest VARCHAR NOT NULL,
    UNIQUE (study, cell, rep, attempt, host));
CREATE TABLE IF NOT EXISTS run_axes (run_id INTEGER NOT NULL, axis VARCHAR NOT NULL, value VARCHAR);
CREATE TABLE IF NOT EXISTS run_versions (run_id INTEGER NOT NULL, name VARCHAR NOT NULL, version VARCHAR);
"""


class CatalogError(ValueError):
    """Input the catalog refuses; the message names the file, on one line."""


@dataclass
class Run:
    """One run.json of a tree, as the catalog keeps it."""
    path: Path
    study: str
    cell: str
    rep: int
    attempt: str
    host: str
    axes: dict[str, str]
    record: dict
    digest: str

    @property
    def identity(self) -> tuple:
        return (self.study, self.cell, self.rep, self.attempt, self.host)

    @property
    def series(self) -> str:
        """The cell without its build axis: what a history follows from build to build."""
        return "/".join(p for p in self.cell.split("/") if not p.startswith("build~"))


@dataclass
class Tree:
    """A dbsweep result tree: its provenance, the axes of its long tables and its runs."""
    root: Path
    study: str
    provenance: dict
    axes: list[str]
    host_column: bool     # the tables have a host column of their own (host is not an axis)
    runs: list[Run]


def text(value) -> str:
    """An axis value as the long tables' CSV holds it."""
    return "" if value is None else str(value)


def read_tree(root: Path) -> Tree:
    """The provenance, axes and runs of a result tree; CatalogError naming the file when it is not one."""
    root = Path(root)
    provenance_path = root / "tables" / "provenance.json"
    if not provenance_path.is_file():
        raise CatalogError(f"{provenance_path}: missing: {root} is not a dbsweep result tree")
    try:
        provenance = json.loads(provenance_path.read_text())
        study = provenance["study"]
    except (ValueError, KeyError, TypeError):
        raise CatalogError(f"{provenance_path}: not a dbsweep provenance (no study)") from None
    summary = root / "tables" / "summary.csv.gz"
    header = _header(summary)
    if "rep" not in header:
        raise CatalogError(f"{summary}: no rep column: not a dbsweep long table")
    axes = header[:header.index("rep")]
    runs = []
    for path in sorted((root / "runs").glob("**/rep~*/run.json")):
        try:
            record = json.loads(path.read_text())
            cell = str(path.parent.parent.relative_to(root / "runs"))
            run = Run(path=path, study=study, cell=cell, rep=int(record["rep"]), attempt=record["attempt"],
                      host=node(record["host"]), axes={a: text(record["cell"].get(a)) for a in axes},
                      record=record,
                      digest=hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest())
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CatalogError(f"{path}: not a dbsweep run.json ({type(e).__name__}: {e})") from None
        if record.get("status") == "ok":
            runs.append(run)
    host_column = "host" in header and "host" not in axes
    # A run not in the tables yet (measured after the last aggregate) waits for a later add.
    collected = _summary_keys(summary, axes + ["rep"] + (["host"] if host_column else []))
    runs = [r for r in runs if _key(r, axes, host_column) in collected]
    return Tree(root=root, study=study, provenance=provenance, axes=axes, host_column=host_column, runs=runs)


def _key(run: Run, axes: list[str], host_column: bool) -> tuple:
    return tuple([run.axes[a] for a in axes] + [str(run.rep)] + ([run.host] if host_column else []))


def _summary_keys(path: Path, keys: list[str]) -> set[tuple]:
    try:
        with gzip.open(path, "rt", newline="") as f:
            return {tuple(row[k] or "" for k in keys) for row in csv.DictReader(f)}
    except (OSError, EOFError, zlib.error, csv.Error) as e:
        raise CatalogError(f"{path}: truncated or corrupt ({e})") from None


def _header(path: Path) -> list[str]:
    if not path.is_file():
        raise CatalogError(f"{path}: missing: not a dbsweep result tree")
    try:
        with gzip.open(path, "rt") as f:
            return f.readline().rstrip("\r\n").split(",")
    except (OSError, EOFError) as e:
        raise CatalogError(f"{path}: unreadable ({e})") from None


@contextmanager
def connect(path: Path = DEFAULT, read_only: bool = False):
    """The catalog's connection (created with its schema when new); closed on exit."""
    path = Path(path)
    if read_only and not path.is_file():
        raise CatalogError(f"{path}: no catalog here (make one with: ./dbsweep catalog add results/)")
    try:
        con = duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as e:   # e.g. held by another process's DuckDB
        raise CatalogError(f"{path}: {_first_line(e)}") from None
    try:
        if not read_only:
            con.execute(SCHEMA)
        yield con
    finally:
        con.close()


@dataclass
class Added:
    runs: int = 0
    skipped: int = 0   # already in the catalog with the same data


def add(catalog: Path, roots: list[Path]) -> Added:
    """Add the runs of result trees that the catalog does not hold yet, all in one transaction."""
    trees = [read_tree(r) for r in roots]   # before the catalog is touched: a tree that is not one stops here
    catalog = Path(catalog)
    new_file = not catalog.exists()
    try:
        with connect(catalog) as con:
            con.execute("BEGIN TRANSACTION")
            try:
                added = Added()
                seen: dict[tuple, Run] = {}
                for tree in trees:
                    _add_tree(con, tree, seen, added)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
    except CatalogError:
        if new_file:   # an add that failed on a new catalog leaves no file behind
            for leftover in (catalog, catalog.with_name(catalog.name + ".wal")):
                leftover.unlink(missing_ok=True)
        raise
    return added


def _add_tree(con, tree: Tree, seen: dict[tuple, Run], added: Added) -> None:
    for run in tree.runs:
        if run.identity in seen and seen[run.identity].digest != run.digest:
            raise CatalogError(f"{run.path}: run {_name(run)} is also {seen[run.identity].path} with other data")
        seen[run.identity] = run
    # the tree's runs that the catalog holds already, in one query
    con.execute("CREATE OR REPLACE TEMP TABLE _ids (i INTEGER, study VARCHAR, cell VARCHAR, rep INTEGER, "
                "attempt VARCHAR, host VARCHAR)")
    _insert(con, "_ids", ["i", "study", "cell", "rep", "attempt", "host"],
            [(i, *r.identity) for i, r in enumerate(tree.runs)])
    existing = {}
    for i, run_id, digest, source in con.execute(
            "SELECT i, r.run_id, r.digest, s.path FROM _ids JOIN runs r USING (study, cell, rep, attempt, host) "
            "JOIN sources s ON s.source_id = r.source_id ORDER BY i").fetchall():
        run = tree.runs[i]
        if digest != run.digest:
            raise CatalogError(f"{run.path}: run {_name(run)} is in the catalog with other data (from {source})")
        existing[run.identity] = run_id
    new = [r for r in tree.runs if r.identity not in existing]
    added.skipped += len(tree.runs) - len(new)
    if not new:
        return
    source_id = con.execute("SELECT coalesce(max(source_id), 0) + 1 FROM sources").fetchone()[0]
    first = con.execute("SELECT coalesce(max(run_id), 0) + 1 FROM runs").fetchone()[0]
    ids = {run.identity: first + i for i, run in enumerate(new)}
    con.execute("INSERT INTO sources VALUES (?, ?, ?, now(), ?, ?)",
                [source_id, str(tree.root.resolve()), tree.study, len(new), json.dumps(tree.provenance)])
    _insert(con, "runs", ["run_id", "source_id", "study", "cell", "rep", "attempt", "host", "series", "build",
                          "started", "ended", "tool", "server", "dbsweep_commit", "dbsweep_dirty", "kernel", "cpu",
                          "digest"],
            [_run_row(ids[r.identity], source_id, r) for r in new])
    _insert(con, "run_axes", ["run_id", "axis", "value"],
            [(ids[r.identity], a, v or None) for r in new for a, v in r.axes.items()])
    _insert(con, "run_versions", ["run_id", "name", "version"],
            [(ids[r.identity], name, version) for r in new for name, version in _versions(r.record)])
    # Every run of the tree, old and new, by the key its table rows carry; only new ones get rows.
    keys = tree.axes + ["rep"] + (["host"] if tree.host_column else [])
    # (_run and _new: underscored so that they do not meet an axis)
    con.execute("CREATE OR REPLACE TEMP TABLE _keys (_run INTEGER, _new BOOLEAN, "
                + ", ".join(f'"{k}" VARCHAR' for k in keys) + ")")
    _insert(con, "_keys", ["_run", "_new"] + keys,
            [[ids.get(r.identity, existing.get(r.identity)), r.identity in ids]
             + [r.axes[a] for a in tree.axes] + [str(r.rep)] + ([r.host] if tree.host_column else [])
             for r in tree.runs])
    for kind in TABLES:
        _add_table(con, tree.root / "tables" / f"{kind}.csv.gz", kind, keys)
    _add_windows(con, tree, keys)
    added.runs += len(new)


def _insert(con, table: str, columns: list[str], rows: list) -> None:
    """Rows into a table in one statement (through Arrow: DuckDB's executemany runs one statement a row)."""
    if not rows:
        return
    con.register("_data", pa.table({c: [row[i] for row in rows] for i, c in enumerate(columns)}))
    try:
        names = ", ".join(f'"{c}"' for c in columns)
        con.execute(f'INSERT INTO "{table}" ({names}) SELECT * FROM _data')
    finally:
        con.unregister("_data")


def _add_table(con, path: Path, kind: str, keys: list[str]) -> None:
    """The rows of one long table of new runs, with run_id in place of the axes, rep and host."""
    if not path.is_file():
        raise CatalogError(f"{path}: missing: not a complete dbsweep result tree")
    _check_gzip(path)
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE _rows AS SELECT * FROM read_csv(?, header = true, "
                    "all_varchar = true, auto_detect = false, columns = "
                    + _columns_struct(_header(path)) + ")", [str(path)])
    except duckdb.Error as e:
        raise CatalogError(f"{path}: unreadable ({_first_line(e)})") from None
    columns = [c for c in _header(path) if c not in keys]
    on = " AND ".join(f'coalesce(t."{k}", \'\') = coalesce(k."{k}", \'\')' for k in keys)
    orphans = con.execute(f"SELECT count(*) FROM _rows t ANTI JOIN _keys k ON {on}").fetchone()[0]
    if orphans:
        raise CatalogError(f"{path}: {orphans} rows of no completed run (no run.json with their cell and rep)")
    types = {c: "VARCHAR" if c in TEXT_COLUMNS else "BIGINT" if c in INTEGER_COLUMNS else "DOUBLE"
             for c in columns}
    present = {r[0] for r in con.execute("SELECT column_name FROM information_schema.columns "
                                         "WHERE table_schema = 'main' AND table_name = ?", [kind]).fetchall()}
    if not present:
        con.execute(f'CREATE TABLE "{kind}" (run_id INTEGER NOT NULL'
                    + "".join(f', "{c}" {t}' for c, t in types.items()) + ")")
    else:   # a tree of a later dbsweep may have more columns
        for c in columns:
            if c not in present:
                con.execute(f'ALTER TABLE "{kind}" ADD COLUMN "{c}" {types[c]}')
    select = ", ".join(["k._run AS run_id"] + [f'CAST(t."{c}" AS {types[c]}) AS "{c}"' for c in columns])
    try:
        con.execute(f'CREATE OR REPLACE TEMP TABLE "_new_{kind}" AS SELECT {select} FROM _rows t JOIN _keys k '
                    f'ON {on} WHERE k._new')
        con.execute(f'INSERT INTO "{kind}" BY NAME SELECT * FROM "_new_{kind}"')
    except duckdb.Error as e:
        raise CatalogError(f"{path}: {_first_line(e)}") from None


def _check_gzip(path: Path) -> None:
    """Read the file to its end: a gzip cut short (a copy that stopped) lacks its end-of-stream marker and
    checksum, which Python's gzip checks; a cut at a line's end would otherwise look complete."""
    try:
        with gzip.open(path, "rb") as f:
            while f.read(1 << 22):
                pass
    except (OSError, EOFError, zlib.error) as e:
        raise CatalogError(f"{path}: truncated or corrupt ({e})") from None


def _columns_struct(header: list[str]) -> str:
    return "{" + ", ".join(f"'{c}': 'VARCHAR'" for c in header) + "}"


def _add_windows(con, tree: Tree, keys: list[str]) -> None:
    """Per new run: its throughput metric (tps where the tool gives it, else iops), the steady-state window the
    study's analysis found (tables/steady_state.csv; every second without one) and the median in it."""
    steady = tree.root / "tables" / "steady_state.csv"
    if steady.is_file():
        header = steady.read_text().split("\n", 1)[0].split(",")
        shared = [k for k in keys if k in header]
        on = " AND ".join(f'coalesce(w."{k}", \'\') = coalesce(k."{k}", \'\')' for k in shared)
        try:
            con.execute("CREATE OR REPLACE TEMP TABLE _windows AS SELECT k._run AS run_id, "
                        "CAST(w.window_start AS BIGINT) AS ws, CAST(w.window_end AS BIGINT) AS we "
                        "FROM read_csv(?, header = true, all_varchar = true, auto_detect = false, columns = "
                        + _columns_struct(header) + f") w JOIN _keys k ON {on} WHERE k._new", [str(steady)])
        except duckdb.Error as e:
            raise CatalogError(f"{steady}: {_first_line(e)}") from None
    else:
        con.execute("CREATE OR REPLACE TEMP TABLE _windows (run_id INTEGER, ws BIGINT, we BIGINT)")
    con.execute("""
        UPDATE runs SET metric = m.metric, window_start = m.ws, window_end = m.we, seconds = m.n, median = m.median
        FROM (
            SELECT s.run_id, any_value(w.ws) AS ws, any_value(w.we) AS we,
                   CASE WHEN count(s.tps) > 0 THEN 'tps' ELSE 'iops' END AS metric,
                   count(*) FILTER (w.ws IS NULL OR s.second BETWEEN w.ws AND w.we) AS n,
                   CASE WHEN count(s.tps) > 0
                        THEN median(s.tps) FILTER (w.ws IS NULL OR s.second BETWEEN w.ws AND w.we)
                        ELSE median(s.iops) FILTER (w.ws IS NULL OR s.second BETWEEN w.ws AND w.we) END AS median
            FROM _new_samples s
            LEFT JOIN _windows w ON w.run_id = s.run_id
            GROUP BY s.run_id) m
        WHERE runs.run_id = m.run_id""")


def _run_row(run_id: int, source_id: int, run: Run) -> tuple:
    r = run.record
    version = r.get("dbsweep") or {}
    return (run_id, source_id, run.study, run.cell, run.rep, run.attempt, run.host, run.series,
            run.axes.get("build") or None, r.get("started"), r.get("ended"), (r.get("recipe") or {}).get("tool"),
            _server(r), version.get("commit"), version.get("dirty"), r["host"].get("kernel"), r["host"].get("cpu"),
            run.digest)


def _server(record: dict) -> str | None:
    server = record.get("server")
    if not server:
        return None
    return server_version(engines.ENGINES[server["engine"]], server["version"])


def _versions(record: dict) -> list[tuple[str, str]]:
    out = list((record.get("tools") or {}).items())
    if record.get("server"):
        out.append((engines.ENGINES[record["server"]["engine"]], _server(record)))
    return out


def _name(run: Run) -> str:
    return f"{run.study} {run.cell} rep {run.rep} {run.attempt} on {run.host}"


def _first_line(e: Exception) -> str:
    return re.sub(r"\s+", " ", str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
