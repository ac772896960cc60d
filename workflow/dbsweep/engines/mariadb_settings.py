"""A MariaDB (or MySQL) server's settings as a study declares them and as SHOW GLOBAL VARIABLES reports them."""
from __future__ import annotations

from pathlib import PurePath

from dbsweep.engines import mariadb, option_key
from dbsweep.engines.settings import Reading, flag, size_bytes
from dbsweep.units import format_size, parse_size

CONNECTIONS = "Threads_connected"  # the status counter of connected clients (counters.jsonl)
# An option's variable where the two names differ (MariaDB before 11.1 names the isolation variable tx_…).
VARIABLE = {"transaction_isolation": ("transaction_isolation", "tx_isolation"),
            "transaction_read_only": ("transaction_read_only", "tx_read_only")}
TABLE_ENGINE = {"innodb": "InnoDB", "myrocks": "ROCKSDB"}  # information_schema.tables.engine of each engine's tables
FLAG_PREFIXES = {"skip_": "OFF", "disable_": "OFF", "enable_": "ON"}


def declared(engine: str, memory: str | None, options: dict) -> list[tuple[str, str, object]]:
    """(kind, option, value) of every setting the cell declares: the variable its memory axis sets, then each
    server option (the study's, its option sets')."""
    out = []
    if memory is not None:
        out.append(("memory", mariadb.MEMORY_OPTION[engine], format_size(parse_size(memory))))
    return out + [("server option", str(name), value) for name, value in (options or {}).items()]


def variable(name: str, value) -> tuple[tuple[str, ...], str]:
    """The variable names an option shows as (the first that the server has is read) and its declared value
    in the variable's terms: a bare flag skip-X / disable-X / enable-X is X = OFF / OFF / ON; log_bin with a
    file name is log_bin = ON; a size with a unit is bytes."""
    key = option_key(name)
    for prefix, state in FLAG_PREFIXES.items():
        if key.startswith(prefix) and (value is True or value in ("", None)):
            return (key[len(prefix):],), state
    if key == "log_bin" and flag(value) is None:
        return (key,), "ON"
    names = VARIABLE.get(key, (key,))
    if key in mariadb.IN_DATADIR:
        return names, str(value)
    return names, flag(value) or size_bytes(value) or str(value)


def read(rows: list[list[str]]) -> dict[str, Reading]:
    """raw/variables.tsv's rows (name, value), by lower-case name. A file name (log files, in the datadir) is
    compared by its last part."""
    out = {}
    for name, value, *_ in rows:
        key = name.lower()
        shown = value
        if key in mariadb.IN_DATADIR and "/" in value:
            value = PurePath(value).name
        out[key] = Reading(value, shown)
    return out


def known(name: str) -> bool | None:
    """Whether the installed server takes the option at all (its --verbose --help), None when it cannot tell."""
    names = mariadb.option_names()
    if names is None:
        return None
    key = option_key(name)
    return key in names or any(key.startswith(p) and key[len(p):] in names for p in mariadb.MODIFIERS)


def dataset(engine: str, options: dict, facts: dict[str, str]) -> list[tuple[str, object, str, bool]]:
    """(setting, declared, delivered, equal) of what the dataset was made with, from its catalog
    (mariadb.dataset_facts): the engine of every table, and each dataset-shaping option the cell declares
    (mariadb.DATASET_SETTINGS; their values in the image key): the schema's and every table's character
    set and collation, the page size, the case of names, the default engine. innodb_default_row_format is
    not in the catalog facts: not read (delivered None)."""
    tables = {key.split(".")[1] for key in facts if key.startswith("table.")}
    engines = sorted({facts[f"table.{t}.engine"] for t in tables})
    collations = sorted({facts[f"table.{t}.collation"] for t in tables} | {facts.get("schema.collation", "")} - {""})
    charsets = sorted({c.split("_", 1)[0] for c in collations})
    out = [("engine", TABLE_ENGINE[engine], ",".join(engines), [e.lower() for e in engines] ==
            [TABLE_ENGINE[engine].lower()])] if tables else []
    given = {option_key(name): value for name, value in options.items()}
    for key in mariadb.DATASET_SETTINGS:
        if key not in given:
            continue
        want = str(given[key])
        if key == "character_set_server":
            out.append((key, want, ",".join(charsets), charsets == [want.lower()]))
        elif key == "collation_server":
            out.append((key, want, ",".join(collations), collations == [want.lower()]))
        elif key == "innodb_page_size":
            got = facts.get("innodb_page_size", "")
            out.append((key, want, got, got == str(mariadb.PAGE_SIZES.get(want.lower(), want))))
        elif key == "lower_case_table_names":
            got = facts.get("lower_case_table_names", "")
            out.append((key, want, got, got == want))
        elif key == "default_storage_engine":
            out.append((key, want, ",".join(engines), [e.lower() for e in engines] == [want.lower()]))
        else:
            out.append((key, want, None, False))
    return out
