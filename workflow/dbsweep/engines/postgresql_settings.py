"""A PostgreSQL server's settings as a study declares them and as pg_settings reports them."""
from __future__ import annotations

from dbsweep.engines import postgresql
from dbsweep.engines.settings import MS, Reading, flag, size_bytes, time_ms
from dbsweep.units import format_size, parse_size

CONNECTIONS = "db.numbackends"  # pg_stat_database's connected backends of the cell's database (counters.jsonl)
# pg_settings' units: bytes per unit of a size, milliseconds per unit of a time.
SIZE_UNITS = {"B": 1, "kB": 1024, "8kB": 8192, "MB": 1 << 20, "16MB": 16 << 20, "GB": 1 << 30}
# Values one parameter shows under another name: from 15, wal_compression is a method, and `on` is pglz
# (pg_settings shows pglz); before 15 it is a boolean that shows on. Both sides compare as ON.
SAME_AS = {("wal_compression", "pglz"): "ON"}


def _same_as(name: str, value: str) -> str:
    """value, or the word it shares with another spelling of the same setting (SAME_AS)."""
    return SAME_AS.get((name, str(value).lower()), value)


def declared(engine: str, memory: str | None, options: dict) -> list[tuple[str, str, object]]:
    """(kind, parameter, value) of every setting the cell declares: shared_buffers from its memory axis, then
    each server option (the study's, its option sets')."""
    out = []
    if memory is not None:
        out.append(("memory", "shared_buffers", format_size(parse_size(memory), postgresql.PG_UNITS)))
    return out + [("server option", str(name), value) for name, value in (options or {}).items()]


def variable(name: str, value) -> tuple[tuple[str, ...], str]:
    """The parameter's name in pg_settings and the declared value in its terms: sizes in bytes, times in
    milliseconds, booleans ON/OFF. A plain number of a parameter with a unit stays a number of that unit
    (read() gives the reading in both forms)."""
    key = str(name).lower()
    return (key,), _same_as(key, flag(value) or size_bytes(value) or time_ms(value) or str(value))


def read(rows: list[list[str]]) -> dict[str, Reading]:
    """raw/variables.tsv's rows (name, setting, unit): a size in bytes, a time in ms, a boolean ON/OFF. A row
    without its unit (written before dbsweep kept it) is compared as the setting's bare number."""
    out = {}
    for name, setting, *rest in rows:
        unit = rest[0] if rest else ""
        shown = f"{setting}{unit and ' ' + unit}"
        value = flag(setting) or setting
        try:
            if unit in SIZE_UNITS:
                value = str(int(float(setting) * SIZE_UNITS[unit]))
            elif unit in MS:
                value = f"{float(setting) * MS[unit]:g}"
        except ValueError:
            pass
        out[name.lower()] = Reading(_same_as(name.lower(), value), shown, setting if unit else "")
    return out


def known(name: str) -> bool | None:
    names = postgresql.option_names()
    return None if names is None else str(name).lower() in names


FACT = {"server_encoding": "database.encoding", "lc_collate": "database.collate", "lc_ctype": "database.ctype",
        "data_checksums": "data_checksums", "wal_segment_size": "wal_segment_size"}


def dataset(engine: str, options: dict, facts: dict[str, str]) -> list[tuple[str, object, str, bool]]:
    """(setting, declared, delivered, equal) of each initdb setting the cell declares (postgresql.INITDB) against
    the database as the server reports it (postgresql.dataset_facts): encoding and locales by name (any case,
    POSIX is C), checksums ON/OFF, the WAL segment size in bytes (a plain number is MB, as initdb takes it)."""
    out = []
    for name, value in options.items():
        key = str(name).lower()
        if key not in FACT:
            continue
        got = facts.get(FACT[key])
        if got is None:
            out.append((key, value, None, False))
            continue
        if key == "data_checksums":
            ok = flag(value) == flag(got)
        elif key == "wal_segment_size":
            want = size_bytes(value) or (str(int(value) << 20) if str(value).isdigit() else str(value))
            ok = want == size_bytes(got)
        else:
            def name_of(text):
                return "c" if str(text).lower() in ("c", "posix") else str(text).lower().replace("-", "")
            ok = name_of(value) == name_of(got)
        out.append((key, value, got, ok))
    return out
