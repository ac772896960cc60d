"""MariaDB with InnoDB or MyRocks: datadir, my.cnf, server lifecycle, SQL and counters.

The server reads only the my.cnf written into its run folder (never
/etc/mysql), listens on 127.0.0.1:port and rundir/mysqld.sock, and writes its
error log to rundir/error.log. root reaches it through the socket with
unix_socket authentication; benchmark users connect over TCP with a password
that travels only inside this process (the server stores its hash).

Debian's mariadb-server runs by default; `basedir` names another build: a
fetched MariaDB (dbsweep.servers) or a user's own unpacked MariaDB, MySQL
(5.7, 8.0, 8.4) or Percona Server tarball. build(basedir) tells which
family and version it is; the differences are handled here:

- initialisation: MariaDB's mariadb-install-db / mysql_install_db with root on
  the socket only; MySQL's `mysqld --initialize-insecure`, whose root (empty
  password) is switched to auth_socket by an --init-file before the server
  ever listens, so root again logs in only as the system's root;
- my.cnf: the [mysqld] group for MySQL and MariaDB before 10.5, basedir,
  plugin-dir and lc-messages-dir lines; the redo log sized alike everywhere
  (innodb_redo_log_capacity from MySQL 8.0.30, two files of half the size
  before, one file in MariaDB 10.2-10.4); MySQL 8's binary log (on by
  default) turned off unless an option set turns it on, and its X Protocol
  plugin (listening on every address by default) turned off;
- the benchmark user: mysql_native_password in MySQL (sysbench's libmariadb
  and PyMySQL speak it; MySQL 8.4 gets mysql_native_password=ON); MySQL 9,
  which no longer has it, is refused.

Topologies (REPLICATION, NODE_PORTS, check_replication; start_cluster in mariadb_cluster.py, which builds on
this module): GTID replicas, async or semi-synchronous, and Galera clusters.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterator

import pymysql

from dbsweep.engines import (
    ENV, LOADS_LIBRARY, NAMES_PATH, RUNS_COMMAND, SET_BY_DBSWEEP, Conn, Handle, Launch, binary, check_identifier,
    check_reachable, check_socket_path, chown_tree, config_port, line_break, option_key, prepare_rundir, program_env,
    program_runs, run_client, run_logged, supervise, sysbench_line, version_line, write_config, write_private)
from dbsweep.errors import ConfigError
from dbsweep.topology.network import enter_argv
from dbsweep.units import format_size, parse_size

FAMILY = "mariadb"
NAME = "MariaDB"  # as people write it
SERVICE_USER = "mysql"
STOP_SIGNAL = signal.SIGTERM  # a clean, prompt shutdown
ENGINE_NAMES = ("innodb", "myrocks")
DEBIAN_ONLY = {"myrocks": "MyRocks ships only with Debian's mariadb-plugin-rocksdb"}
FOREIGN_KEYS = {"innodb": True, "myrocks": False}
SERVER_PROGRAMS = ("mariadbd", "mysqld")
VERSION_PARTS = 3  # "mariadbd  Ver 11.4.5-MariaDB": the whole version
CONFIG_NAME = "my.cnf"
SOCKET_NAME = "mysqld.sock"
PID_NAME = "mysqld.pid"
ERROR_LOG = "error.log"
IST_ONLY = "dbsweep_ist_only"  # a Galera member's state transfer method: IST, never a full copy (SST)
IST_ONLY_SCRIPT = Path(__file__).with_name("wsrep_sst_ist_only.py")

# engine -> the replication kinds it runs (topologies); MyRocks has no Galera: not applicable, listed as such.
# Status variables the topology figures read (topology/figures.py): 1 while the primary's commits wait
# for a semi-sync replica, the running total of commits no replica acknowledged (made while it did not
# wait, or after waiting timed out), and of the time Galera's flow control paused replication.
SYNC_STATUS, SYNC_KINDS = "Rpl_semi_sync_master_status", ("semisync",)
SYNC_UNACKED = "Rpl_semi_sync_master_no_tx"
FLOW_PAUSED_NS = "wsrep_flow_control_paused_ns"
POSITION_UNIT = "transactions"  # replication_position: a GTID's sequence number (counters)
REPLICATION: dict[str, tuple[str, ...]] = {"innodb": ("async", "semisync", "galera"),
                                           "myrocks": ("async", "semisync")}
# Consecutive ports a node of a replication kind uses from its port (several Galera members may share
# 127.0.0.1): SQL; Galera adds group communication (port+1), IST (port+2) and SST receive (port+3).
NODE_PORTS = {None: 1, "async": 1, "semisync": 1, "galera": 4}
FIRST_START_ONLY = ("wsrep_new_cluster",)  # node options a node started again (a timed event) goes without

# What `memory` sets, per engine.
MEMORY_OPTION = {"innodb": "innodb_buffer_pool_size", "myrocks": "rocksdb_block_cache_size"}

_COMMON = [
    ("performance_schema", "OFF"),
    ("max_connections", 300),
    ("character-set-server", "utf8mb4"),
    ("collation-server", "utf8mb4_general_ci"),
    ("transaction-isolation", "REPEATABLE-READ"),
    # The binary log stays off (MariaDB's default) unless an option set turns it on.
    # InnoDB durability and IO: crash-safe commits, no double buffering in the page cache.
    ("innodb_flush_log_at_trx_commit", 1),
    ("innodb_doublewrite", "ON"),
    ("innodb_flush_method", "O_DIRECT"),
    ("innodb_file_per_table", "ON"),
    ("innodb_log_buffer_size", "16M"),
    ("innodb_io_capacity", 1000),
    ("innodb_io_capacity_max", 2000),
    # Every start from an image is equally cold: no buffer pool dump and reload.
    ("innodb_buffer_pool_dump_at_shutdown", "OFF"),
    ("innodb_buffer_pool_load_at_startup", "OFF"),
]

BASE = {
    "innodb": _COMMON + [
        ("innodb_buffer_pool_size", "128M"),
        ("innodb_log_file_size", "128M"),
    ],
    "myrocks": _COMMON + [
        # InnoDB only holds a few system tables here.
        ("innodb_buffer_pool_size", "32M"),
        ("innodb_log_file_size", "32M"),
        ("plugin-load-add", "ha_rocksdb.so"),
        ("default-storage-engine", "rocksdb"),
        ("rocksdb_block_cache_size", "128M"),
        ("rocksdb_flush_log_at_trx_commit", 1),
        ("rocksdb_max_background_jobs", 2),
        # LZ4 like the published MyRocks runs; index and filter blocks live in (and count against) the block cache.
        ("rocksdb_default_cf_options",
         "write_buffer_size=32m;target_file_size_base=32m;max_bytes_for_level_base=128m;"
         "compression=kLZ4Compression;block_based_table_factory={cache_index_and_filter_blocks=1;"
         "filter_policy=bloomfilter:10:false;whole_key_filtering=1}"),
    ],
}

# Options a study may not set, compared as engines.option_key (any case, - or _, loose_ or not) and behind the
# skip_/enable_/disable_/maximum_ modifiers, and why: where dbsweep puts the server's files and what it
# listens on (for a build in a basedir, where its files are, and what would listen elsewhere: MySQL's X
# Protocol and admin interface); what would let root in without the socket check, run SQL as root, run a
# command, load a library or put files outside the cell's datadir. The server takes an option from any
# prefix of its name that no other option shares (datad for datadir); dbsweep's my.cnf turns that off
# (skip-getopt-prefix-matching; MySQL has taken whole names only since 5.7), so these names are whole.
REFUSED = {
    **dict.fromkeys(("datadir", "port", "bind_address", "socket", "pid_file", "log_error", "tmpdir", "user",
                     "skip_name_resolve", "basedir", "plugin_dir", "lc_messages_dir", "character_sets_dir", "mysqlx",
                     "mysqlx_bind_address", "mysqlx_port", "mysqlx_socket", "admin_address", "admin_port",
                     "getopt_prefix_matching", "defaults_file", "defaults_extra_file", "no_defaults",
                     "defaults_group_suffix"), SET_BY_DBSWEEP),
    "skip_grant_tables": "lets every login in without a password",
    **dict.fromkeys(("init_file", "init_slave", "init_replica"), "runs its SQL as the server's root"),
    "wsrep_notify_cmd": RUNS_COMMAND,
    **dict.fromkeys(("plugin_load", "plugin_load_add", "early_plugin_load", "wsrep_provider"), LOADS_LIBRARY),
    "secure_file_priv": "lets SQL read and write files in the folder it names",
    **dict.fromkeys(("chroot", "innodb_data_home_dir", "innodb_log_group_home_dir", "innodb_undo_directory",
                     "innodb_tmpdir", "innodb_directories", "innodb_redo_log_archive_dirs", "aria_log_dir_path",
                     "rocksdb_datadir", "rocksdb_wal_dir", "rocksdb_tmpdir", "rocksdb_persistent_cache_path",
                     "wsrep_data_home_dir", "slave_load_tmpdir", "replica_load_tmpdir"), NAMES_PATH),
}
MODIFIERS = ("skip_", "enable_", "disable_", "maximum_")
# Options whose value is a file the server writes, relative to the datadir (log_bin: binlog): a file name is
# taken, a path (with a /) is not. log_bin's switches (log_bin: ON, a bare log_bin: true) are file names too.
IN_DATADIR = {"log_bin", "log_bin_index", "log_basename", "relay_log", "relay_log_index", "relay_log_info_file",
              "master_info_file", "general_log_file", "slow_query_log_file", "log_slow_query_file", "log_tc",
              "innodb_buffer_pool_filename", "innodb_data_file_path", "innodb_temp_data_file_path"}
OPTION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")  # a dot: a structured option (a key cache's, hot.key_buffer_size)
OPTION_SPELLING = "a letter, then letters, digits, _, - and ."
# Options that shape what prepare creates, compared as engines.option_key: the image key holds a cell's values
# of them (engines.dataset_options), so two values make two images. The character set and collation are the
# database's default when prepare creates it, so its tables'; the page size and the case of table names are
# fixed when the datadir is made (AT_INITIALIZE: given to mariadb-install-db too); the default storage
# engine and row format are those of a table created without naming one.
DATASET_SETTINGS = ("character_set_server", "collation_server", "innodb_page_size", "default_storage_engine",
                    "lower_case_table_names", "innodb_default_row_format")
AT_INITIALIZE = ("innodb_page_size", "lower_case_table_names")
PAGE_SIZES = {"4k": 4096, "8k": 8192, "16k": 16384, "32k": 32768, "64k": 65536}
DEBIAN_PLUGIN_DIR = Path("/usr/lib/mysql/plugin")
BINLOG_OPTIONS = {"log_bin", "skip_log_bin", "disable_log_bin"}


@functools.cache
def option_names() -> frozenset[str] | None:
    """Every option Debian's mariadbd takes (MyRocks's too when its plugin is installed), as _key names,
    from `mariadbd --verbose --help`; None when it cannot tell. For the check of a study's options at load."""
    try:
        argv = [_mariadbd(), "--no-defaults", "--verbose", "--help"]
        if (DEBIAN_PLUGIN_DIR / "ha_rocksdb.so").is_file():
            argv.insert(2, "--plugin-load-add=ha_rocksdb.so")
        done = subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd="/", stdin=subprocess.DEVNULL,
                              timeout=60)
    except (OSError, RuntimeError, subprocess.TimeoutExpired):
        return None
    names = help_option_names(done.stdout)
    return names if done.returncode == 0 and names else None


# An option's line in `mariadbd --verbose --help`: `  --name[=…]`, or after its short alias,
# `  -C, --character-set-server=name` (the alias may be a sign: `-#, --debug[=name]`).
HELP_OPTION = re.compile(r"^\s+(?:-\S, )?--([A-Za-z0-9][A-Za-z0-9_-]*)", re.M)


def help_option_names(text: str) -> frozenset[str]:
    """The options `mariadbd --verbose --help` lists, as _key names: with or without a short alias."""
    return frozenset(_key(name) for name in HELP_OPTION.findall(text))


def _mariadbd() -> str:
    return binary("mariadbd", "/usr/sbin")


# --- which build ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Build:
    """A MariaDB or MySQL server build: where its programs are and which dialect it speaks."""

    basedir: Path | None  # None: Debian's packages
    family: str  # "mariadb" or "mysql" (MySQL and Percona Server)
    version: tuple[int, int, int]
    version_line: str  # what `server --version` says
    server: Path  # mariadbd or mysqld
    plugin_dir: Path | None
    share_dir: Path | None  # the folder with english/errmsg.sys (lc-messages-dir)
    client: str  # the SQL client admin_sql runs: the build's own when it has one that runs, else Debian's
    admin: str  # the same for mariadb-admin / mysqladmin (readiness pings)
    env: dict  # what its programs run with

    @property
    def name(self) -> str:
        return self.server.name

    def tool(self, program: str) -> tuple[list[str], dict]:
        """How to run client or admin: its argv start and environment. The build's own MariaDB 11.4+ clients
        insist on TLS, which its server here has off (and which a unix socket does not need)."""
        if self.basedir is None or not program.startswith(str(self.basedir) + os.sep):
            return [program, "--no-defaults"], dict(ENV)
        flags = ["--skip-ssl"] if self.family == FAMILY and self.version >= (11, 4, 0) else []
        return [program, "--no-defaults", *flags], self.env


def _first(*paths: Path) -> Path | None:
    return next((path for path in paths if path.exists()), None)


def plugin_dir(basedir: Path | None) -> Path | None:
    """Where a build's plugins (ha_rocksdb.so, auth_socket.so) are; None when it has no plugin folder."""
    if basedir is None:
        return DEBIAN_PLUGIN_DIR
    basedir = Path(basedir).absolute()
    return _first(basedir / "lib" / "plugin", basedir / "lib" / "mysql" / "plugin",
                  basedir / "lib" / "mariadb" / "plugin", basedir / "lib64" / "mysql" / "plugin")


def _server_binary(basedir: Path) -> Path:
    found = _first(basedir / "bin" / "mariadbd", basedir / "bin" / "mysqld", basedir / "sbin" / "mariadbd",
                   basedir / "sbin" / "mysqld", basedir / "libexec" / "mysqld")
    if found is None:
        raise ConfigError(f"version.basedir: {str(basedir)!r} has no server binary (bin/mysqld, bin/mariadbd)")
    return found


def _parse_version(line: str) -> tuple[int, int, int]:
    match = re.search(r"Ver\s+(\d+)\.(\d+)\.(\d+)", line)
    if not match:
        raise RuntimeError(f"cannot tell the server version from {line!r}")
    return tuple(int(part) for part in match.groups())  # type: ignore[return-value]


def build(basedir: Path | None = None) -> Build:
    """The build in basedir (None: Debian's), found once per binary."""
    server = Path(_mariadbd()) if basedir is None else _server_binary(Path(basedir).absolute())
    stat = server.stat()
    return _build(None if basedir is None else str(Path(basedir).absolute()), str(server), stat.st_mtime_ns,
                  stat.st_size)


@functools.lru_cache(maxsize=32)
def _build(basedir: str | None, server: str, mtime_ns: int, size: int) -> Build:
    if basedir is None:
        line = version_line([server, "--version"])
        return Build(None, FAMILY, _parse_version(line), line, Path(server), DEBIAN_PLUGIN_DIR, None,
                     binary("mariadb", "/usr/bin"), binary("mariadb-admin", "/usr/bin"), dict(ENV))
    base = Path(basedir)
    env = program_env(base)
    try:
        line = version_line([server, "--version"], env)
    except RuntimeError as error:
        raise ConfigError(f"version.basedir: {basedir!r}: {Path(server).name} does not run here: {error}") from None
    family = FAMILY if "mariadb" in line.lower() else "mysql"
    errmsg = sorted(base.glob("share/english/errmsg.sys")) + sorted(base.glob("share/*/english/errmsg.sys"))
    share = errmsg[0].parent.parent if errmsg else None

    def own(names: tuple[str, ...], debian: str) -> str:
        for name in names:
            path = base / "bin" / name
            if path.is_file() and program_runs(path, env):
                return str(path)
        return binary(debian, "/usr/bin")

    return Build(base, family, _parse_version(line), line, Path(server), plugin_dir(base), share,
                 own(("mariadb", "mysql"), "mariadb"), own(("mariadb-admin", "mysqladmin"), "mariadb-admin"), env)


def supports(engine: str, basedir: Path | None = None) -> bool:
    """Whether engine runs on the build: InnoDB always; MyRocks only where the build has ha_rocksdb.so
    (Debian's mariadb-plugin-rocksdb; none of the fetched MariaDB builds carries it)."""
    if engine == "innodb":
        return True
    if engine == "myrocks":
        folder = plugin_dir(basedir)
        return folder is not None and (folder / "ha_rocksdb.so").is_file()
    raise ConfigError(f"engine: {engine!r} is not a MariaDB engine ({', '.join(ENGINE_NAMES)})")


def server_version(basedir: Path | None = None) -> str:
    """e.g. "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)"."""
    if basedir is None:
        return version_line([_mariadbd(), "--version"])
    return build(basedir).version_line


def _check_build(b: Build) -> None:
    """dbsweep knows how to run the build, and the service user can read it."""
    if b.family == FAMILY and b.version < (10, 4, 0) and not _has_plugin(b, "auth_socket.so"):
        raise ConfigError(f"version.basedir: {str(b.basedir)!r} is MariaDB {'.'.join(map(str, b.version))} without "
                          f"the unix_socket plugin (lib/plugin/auth_socket.so; built in from 10.4 on); dbsweep "
                          f"needs it so root logs in through the socket only")
    if b.family == "mysql":
        if b.version < (5, 7, 6) or b.version >= (9, 0, 0):
            raise ConfigError(f"version.basedir: {str(b.basedir)!r} is MySQL {'.'.join(map(str, b.version))}; "
                              f"dbsweep runs MySQL 5.7.6 to 8.4 (MySQL 9 has no mysql_native_password, "
                              f"which sysbench's client uses here)")
        if not _has_plugin(b, "auth_socket.so"):
            raise ConfigError(f"version.basedir: {str(b.basedir)!r} has no auth_socket.so plugin "
                              f"(lib/plugin/auth_socket.so); dbsweep needs it so root logs in through the socket only")
    check_reachable(b.server, SERVICE_USER, "basedir")
    if b.share_dir is not None:
        check_reachable(b.share_dir / "english" / "errmsg.sys", SERVICE_USER, "basedir")


def _has_plugin(b: Build, name: str) -> bool:
    return b.plugin_dir is not None and (b.plugin_dir / name).is_file()


def _install_script(basedir: Path) -> Path:
    found = _first(*(basedir / folder / name for folder in ("scripts", "bin")
                     for name in ("mariadb-install-db", "mysql_install_db")))
    if found is None:
        raise ConfigError(f"version.basedir: {str(basedir)!r} has no scripts/mariadb-install-db or "
                          f"scripts/mysql_install_db")
    return found


def initialize(datadir: Path, log, basedir: Path | None = None, options: dict | None = None) -> list[list[str]]:
    """An empty datadir at datadir, owned by mysql; root logs in through the socket only, no test database.
    options: the cell's server options; those fixed when the datadir is made (AT_INITIALIZE) are given to
    the bootstrap too, since a server started later with another page size refuses the datadir."""
    datadir = Path(datadir).absolute()
    check_dataset(options, "server options")  # the install script splits its arguments at spaces
    fixed = [f"--{name}={value}" for name, value in (options or {}).items() if option_key(name) in AT_INITIALIZE]
    if datadir.exists() and any(datadir.iterdir()):
        raise RuntimeError(f"datadir {datadir}: not empty; initialize needs an empty or new folder")
    b = build(basedir) if basedir is not None else None
    if b is not None:
        _check_build(b)
    datadir.mkdir(parents=True, exist_ok=True)
    check_reachable(datadir, SERVICE_USER, "datadir")
    with _private_tmpdir(datadir.parent) as tmpdir:
        if b is None:
            argv = [binary("mariadb-install-db", "/usr/bin"), "--no-defaults", f"--datadir={datadir}",
                    f"--user={SERVICE_USER}", "--auth-root-authentication-method=socket", "--skip-test-db",
                    "--skip-name-resolve", f"--tmpdir={tmpdir}", *fixed]
            run_logged(argv, log)
        elif b.family == FAMILY:
            argv = _install_mariadb(b, datadir, tmpdir, log, fixed)
        else:
            argv = _install_mysql(b, datadir, tmpdir, log, fixed)
    chown_tree(datadir, SERVICE_USER)
    datadir.chmod(0o700)  # only the server's user reads its tables (and the benchmark user's entry)
    return [argv]


@contextmanager
def _private_tmpdir(parent: Path) -> Iterator[Path]:
    """A tmpdir of the bootstrap's own in parent (the datadir's, so a killed prepare leaves it only on the
    filesystem that is thrown away with it, not in /tmp), removed after: the bootstrap server deletes every
    #sql* file in its tmpdir when it starts, so two bootstraps sharing /tmp deleted each other's temporary
    tables ("Unknown table 'mysql.tmp_proxies_priv'")."""
    folder = Path(tempfile.mkdtemp(prefix=".dbsweep-init-", dir=parent))
    try:
        shutil.chown(folder, SERVICE_USER)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _install_mariadb(b: Build, datadir: Path, tmpdir: Path, log, fixed: list[str]) -> list[str]:
    """mariadb-install-db (or mysql_install_db) of the build, with the options its version has."""
    script = _install_script(b.basedir)
    text = script.read_text(errors="replace")
    if "auth-root-authentication-method" not in text:
        raise ConfigError(f"version.basedir: {script} cannot make root log in through the socket only "
                          f"(it has no --auth-root-authentication-method); this MariaDB is too old for dbsweep")
    argv = ([str(script)] if os.access(script, os.X_OK) else ["/bin/sh", str(script)])
    argv += ["--no-defaults", f"--basedir={b.basedir}", f"--datadir={datadir}", f"--user={SERVICE_USER}",
             "--auth-root-authentication-method=socket", "--skip-name-resolve", f"--tmpdir={tmpdir}"]
    argv += [option for option in ("--skip-test-db", "--skip-auth-anonymous-user") if option in text]
    argv += fixed  # the script passes options it does not know on to the server it bootstraps
    run_logged(argv, log, env=b.env)
    return argv


def _install_mysql(b: Build, datadir: Path, tmpdir: Path, log, fixed: list[str]) -> list[str]:
    """mysqld --initialize-insecure; its --init-file turns root's empty password into auth_socket before the
    server ever listens (the file holds no secret)."""
    chown_tree(datadir, SERVICE_USER)  # mysqld --initialize writes into it as mysql (install-db chowns by itself)
    tmpdir.chmod(0o755)
    init = tmpdir / "init.sql"
    write_config(init, "ALTER USER 'root'@'localhost' IDENTIFIED WITH auth_socket;\n")
    argv = [str(b.server), "--no-defaults", "--initialize-insecure", f"--user={SERVICE_USER}",
            f"--basedir={b.basedir}", f"--datadir={datadir}", f"--plugin-dir={b.plugin_dir}",
            "--plugin-load-add=auth_socket.so", f"--init-file={init}", f"--tmpdir={tmpdir}", *fixed]
    if b.share_dir is not None:
        argv.append(f"--lc-messages-dir={b.share_dir}")
    run_logged(argv, log, env=b.env)
    return argv


def _key(name: str) -> str:
    return name.lower().replace("-", "_")


def refused(name: str, value) -> str | None:
    """Why a study may not set the option name to value (REFUSED, IN_DATADIR), or None."""
    key = option_key(name)
    for bare in (key, *(key[len(m):] for m in MODIFIERS if key.startswith(m))):
        if bare in REFUSED:
            return REFUSED[bare]
    if key in IN_DATADIR and "/" in str(value):
        return f"{NAMES_PATH} (a file name there has no /)"
    return None


def check_dataset(options: dict, where: str) -> None:
    """Refuse, at load, a value of a setting fixed when the datadir is made that the bootstrap would refuse
    only in prepare: innodb_page_size (4k to 64k, or those in bytes), lower_case_table_names (0, 1, 2)."""
    for name, value in (options or {}).items():
        key = option_key(name)
        if key == "innodb_page_size" and str(value).lower() not in PAGE_SIZES and \
                str(value) not in map(str, PAGE_SIZES.values()):
            raise ConfigError(f"{where}.{name}: {value!r} is not an InnoDB page size ({', '.join(PAGE_SIZES)})")
        if key == "lower_case_table_names" and str(value) not in ("0", "1", "2"):
            raise ConfigError(f"{where}.{name}: {value!r} is not 0, 1 or 2")


def _line(name: str, value) -> str:
    if not OPTION_NAME.fullmatch(name):
        raise ConfigError(f"server option {name!r}: not an option name")
    if value is True:
        return name  # a flag, e.g. skip-log-bin
    if value is False:
        return f"{name}=OFF"
    text = str(value)
    if line_break(text):
        raise ConfigError(f"server option {name}: {value!r} contains a line break")
    text = text.replace("\\", "\\\\")
    if not text or text != text.strip() or "#" in text or text[0] in "'\"":
        text = '"' + text.replace('"', '\\"') + '"'
    return f"{name}={text}"


def config_text(engine: str, memory: str | None, options: dict, datadir: Path, rundir: Path, port: int,
                basedir: Path | None = None, listen: str = "127.0.0.1", node_options: dict | None = None) -> str:
    """The complete my.cnf: where to listen (listen: a topology node's address) and log, the engine's base,
    then memory, then options, then node_options: what dbsweep sets for a node of a topology (server_id,
    replication), which the user's options cannot change."""
    if engine not in ENGINE_NAMES:
        raise ConfigError(f"engine: {engine!r} is not a MariaDB engine ({', '.join(ENGINE_NAMES)})")
    b = build(basedir) if basedir is not None else None
    if b is not None and not supports(engine, basedir):
        raise ConfigError(f"engine: {engine} does not apply to {b.family} {'.'.join(map(str, b.version))} in "
                          f"{b.basedir}: it has no ha_rocksdb.so plugin")
    settings: dict[str, tuple[str, object]] = {}
    for name, value in BASE[engine]:
        settings[_key(name)] = (name, value)
    if memory is not None:
        try:
            size = format_size(parse_size(memory))
        except ConfigError as error:
            raise ConfigError(f"memory: {error}") from None
        settings[_key(MEMORY_OPTION[engine])] = (MEMORY_OPTION[engine], size)
    if b is not None:
        settings = _adapt(b, settings, {_key(str(name)).removeprefix("loose_") for name in (options or {})})
    for name, value in (options or {}).items():
        name = str(name)
        why = refused(name, value)
        if why:
            raise ConfigError(f"server option {name}: {value!r} {why}; remove it")
        settings[_key(name)] = (name, value)
    for name, value in (node_options or {}).items():
        settings[_key(str(name))] = (str(name), value)
    rundir, datadir = Path(rundir).absolute(), Path(datadir).absolute()
    what = "MariaDB" if b is None else f"{b.family} {'.'.join(map(str, b.version))} from {b.basedir},"
    lines = [f"# dbsweep: {what} {engine}, memory {memory or 'base'}; written for one run, no passwords here",
             _group(b),
             f"datadir={datadir}",
             f"port={int(port)}",
             _line("bind-address", listen),
             f"socket={rundir / SOCKET_NAME}",
             f"pid-file={rundir / PID_NAME}",
             f"log-error={rundir / ERROR_LOG}",
             # Its own tmpdir: a starting server deletes every #sql* file in its tmpdir, so servers
             # sharing /tmp (a topology's nodes, parallel runs) would delete each other's temporary tables.
             f"tmpdir={rundir}",
             "skip-name-resolve"]
    if b is None or b.family == FAMILY:
        # Whole option names only: MariaDB takes any unambiguous prefix otherwise (datad for datadir), past the
        # names refused() knows; MySQL takes whole names only (since 5.7) and has no such option.
        lines.append("skip-getopt-prefix-matching")
    if b is not None:
        lines += _build_lines(b)
    lines += [_line(name, value) for name, value in settings.values()]
    return "\n".join(lines) + "\n"


def _group(b: Build | None) -> str:
    """[mariadbd] for MariaDB 10.5 and later (Debian's among them); [mysqld], which every server reads, before."""
    if b is None or (b.family == FAMILY and b.version >= (10, 5, 0)):
        return "[mariadbd]"
    return "[mysqld]"


def _build_lines(b: Build) -> list[str]:
    """Where a basedir build's files are, and for MySQL what keeps it to the socket and 127.0.0.1."""
    lines = [_line("basedir", b.basedir)]
    if b.plugin_dir is not None:
        lines.append(_line("plugin-dir", b.plugin_dir))
    if b.share_dir is not None:
        lines.append(_line("lc-messages-dir", b.share_dir))
        if (b.share_dir / "charsets").is_dir():
            lines.append(_line("character-sets-dir", b.share_dir / "charsets"))
    if b.family == FAMILY and b.version < (10, 4, 0):
        lines.append("plugin-load-add=auth_socket.so")  # unix_socket, root's login: a plugin before 10.4
    if b.family == FAMILY and b.version >= (11, 4, 0):
        # 11.4 makes a TLS key and certificate at every start (seconds to a minute of RSA key generation), and
        # clients that see TLS offered use it: off, as in Debian's 10.11 and every other version here.
        lines.append("skip-ssl")
    if b.family == "mysql":
        lines.append("plugin-load-add=auth_socket.so")  # root's login (see _install_mysql)
        if b.version >= (8, 0, 0):
            lines.append("mysqlx=OFF")  # the X Protocol plugin would listen on every address
        if b.version >= (8, 4, 0):
            lines.append("mysql-native-password=ON")  # off by default from 8.4; the benchmark user's plugin
    return lines


def _adapt(b: Build, settings: dict, chosen: set[str]) -> dict:
    """The base settings in the build's own words (chosen: the option names an option set gives itself)."""
    out = dict(settings)
    redo = out.get("innodb_log_file_size")
    if redo is not None and "innodb_log_file_size" not in chosen:
        total = parse_size(str(redo[1]))
        if b.family == FAMILY and b.version < (10, 5, 0) and "innodb_log_files_in_group" not in chosen:
            out["innodb_log_files_in_group"] = ("innodb_log_files_in_group", 1)  # one file, as from 10.5 on
        elif b.family == "mysql" and b.version >= (8, 0, 30) and "innodb_redo_log_capacity" not in chosen:
            del out["innodb_log_file_size"]
            out["innodb_redo_log_capacity"] = ("innodb_redo_log_capacity", format_size(total))
        elif b.family == "mysql" and "innodb_log_files_in_group" not in chosen:
            out["innodb_log_file_size"] = ("innodb_log_file_size", format_size(total // 2))
            out["innodb_log_files_in_group"] = ("innodb_log_files_in_group", 2)
    if b.family == "mysql" and b.version >= (8, 0, 0) and not (BINLOG_OPTIONS & chosen):
        out["disable_log_bin"] = ("disable-log-bin", True)  # MySQL 8 logs binary by default, MariaDB does not
    return out


def _pings(handle: Handle) -> bool:
    """root gets an answer on the socket: the server accepts connections.

    (A bare handshake probe would work too, but each one leaves an "Aborted
    connection" warning in the error log.)
    """
    if handle.basedir is None:
        admin, env = [binary("mariadb-admin", "/usr/bin"), "--no-defaults"], ENV
    else:
        b = build(handle.basedir)
        admin, env = b.tool(b.admin)
    done = subprocess.run([*admin, f"--socket={handle.socket}",
                           "--user=root", "--connect-timeout=2", "ping"],
                          capture_output=True, env=env, cwd="/", stdin=subprocess.DEVNULL)
    return done.returncode == 0


# What a Galera member writes when it will never get its state and aborts; the abort itself may then hang in
# gcomm's shutdown (seen with galera-4 26.4 on MariaDB 10.11: two threads closing gcomm, the process alive
# for ever), so its start is not waited for another 120 s.
GAVE_UP = re.compile(r"Will never receive state\. Need to abort|This is unrecoverable condition, restart required")


def _gave_up(lines: list[str]) -> str | None:
    return next((match.group(0) for line in lines if (match := GAVE_UP.search(line))), None)


def _error_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if "[ERROR]" in line or "Fatal" in line]


@contextmanager
def server(engine: str, datadir: Path, rundir: Path, config: str, log,
           cgroup: Callable[[int], None] | None = None, basedir: Path | None = None,
           netns: str | None = None) -> Iterator[Handle]:
    """mariadbd (or mysqld) on datadir with config, ready for connections; stopped (SIGTERM, then SIGKILL) on
    exit. netns: the network namespace it runs in (a topology node's), else the host's."""
    if engine not in ENGINE_NAMES:
        raise ConfigError(f"engine: {engine!r} is not a MariaDB engine ({', '.join(ENGINE_NAMES)})")
    b = build(basedir) if basedir is not None else None
    if b is not None:
        _check_build(b)
    datadir = Path(datadir).absolute()
    if not (datadir / "mysql").is_dir():
        raise RuntimeError(f"datadir {datadir}: not a MariaDB datadir (no mysql/ folder); initialize it first")
    check_reachable(datadir, SERVICE_USER, "datadir")
    rundir = prepare_rundir(rundir, SERVICE_USER)
    sock = rundir / SOCKET_NAME
    check_socket_path(sock)
    handle = Handle(engine=engine, port=config_port(config), socket=sock, rundir=rundir, datadir=datadir,
                    basedir=None if b is None else b.basedir)
    write_config(rundir / CONFIG_NAME, config)
    env = None if b is None else b.env
    argv = [*enter_argv(netns), _mariadbd() if b is None else str(b.server), f"--defaults-file={rundir / CONFIG_NAME}",
            f"--user={SERVICE_USER}"]
    if f"wsrep_sst_method={IST_ONLY}" in config.splitlines():  # a Galera member: its transfer method, on PATH
        script = rundir / f"wsrep_sst_{IST_ONLY}"
        shutil.copyfile(IST_ONLY_SCRIPT, script)
        script.chmod(0o755)
        env = (env or ENV) | {"PATH": f"{rundir}:{(env or ENV)['PATH']}"}
        recovered = recover_position(datadir, argv, env, rundir / ERROR_LOG, log)
        if recovered:
            log.write(f"Galera member on {datadir}: position {recovered} recovered from InnoDB\n")
    launch = Launch(name="mariadbd" if b is None else b.name,
                    argv=argv,
                    user=SERVICE_USER, drop_privileges=False, ready=_pings, stop_signal=STOP_SIGNAL,
                    logs=[rundir / ERROR_LOG], error_lines=_error_lines,
                    leftovers=[sock, rundir / f"{SOCKET_NAME}.lock", rundir / PID_NAME],
                    env=env, doomed=_gave_up)
    try:
        with supervise(launch, handle, log, cgroup) as running:
            yield running
    finally:
        _forget(handle.port, handle.socket)


def admin_sql(handle: Handle, sql: str, database: str | None = None) -> str:
    """Run sql as root over the socket (unix_socket / auth_socket authentication), in database when given;
    rows tab-separated, no header. The client is the build's own when it has one that runs here, else
    Debian's."""
    if handle.basedir is None:
        client, env = [binary("mariadb", "/usr/bin"), "--no-defaults"], ENV
    else:
        b = build(handle.basedir)
        client, env = b.tool(b.client)
    if database is not None:
        check_identifier("database", database)
    return run_client([*client, f"--socket={handle.socket}", "--user=root", "--batch", "--skip-column-names",
                       *([f"--database={database}"] if database else [])], sql, env=env)


def analyze(handle: Handle, database: str) -> list[str]:
    """The optimizer's statistics of every table in database, as a TPC-C kit takes them after its load:
    ANALYZE TABLE of them all, as root (InnoDB recalculates its persistent statistics only in the
    background, MyRocks at flushes and compactions). Raises on an error row of its result. Returns the
    statement as its command line, for the record ([] when the database has no table)."""
    check_identifier("database", database)
    tables = admin_sql(handle, "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
                               f"AND table_schema = '{database}'").splitlines()
    if not tables:
        return []
    statement = "ANALYZE TABLE " + ", ".join("`" + name.replace("`", "``") + "`" for name in sorted(tables))
    said = [line.split("\t") for line in admin_sql(handle, statement, database=database).splitlines()]
    failed = [row for row in said if len(row) >= 4 and row[2].lower() == "error"]
    if failed:
        raise RuntimeError("ANALYZE TABLE failed: " + "; ".join(f"{row[0]}: {row[3]}" for row in failed))
    return ["mariadb", f"--database={database}", f"--execute={statement}"]


def admin_sql_rows(handle: Handle, sql: str, timeout: float | None = None) -> list[dict[str, str]]:
    """Like admin_sql, the rows of its last result set by column name (NULL as "NULL"), each value as the
    server sent it (batch_rows). timeout: seconds before the client is killed (and TimeoutExpired raised)."""
    if handle.basedir is None:
        client, env = [binary("mariadb", "/usr/bin"), "--no-defaults"], ENV
    else:
        b = build(handle.basedir)
        client, env = b.tool(b.client)
    return batch_rows(run_client([*client, f"--socket={handle.socket}", "--user=root", "--batch"], sql, env=env,
                                 timeout=timeout))


_BATCH_ESCAPES = {"n": "\n", "t": "\t", "0": "\0", "\\": "\\"}


def batch_rows(out: str) -> list[dict[str, str]]:
    """The rows of the client's --batch output by column name: one line a row, tab between values, and in a
    value a line break, tab, NUL and backslash written as \\n, \\t, \\0 and \\\\ (undone here)."""
    lines = out.removesuffix("\n").split("\n") if out else []  # not splitlines: a value may hold a \r
    if not lines:
        return []
    names = lines[0].split("\t")
    return [dict(zip(names, (re.sub(r"\\(.)", lambda m: _BATCH_ESCAPES.get(m[1], m[0]), value)
                             for value in line.split("\t")), strict=False))
            for line in lines[1:]]


def user_sql(handle: Handle, conn: Conn, sql: str) -> str:
    """Run sql (e.g. a study's setup file) with the client, as the benchmark user in its database; the
    password goes through a 0600 option file that is removed afterwards. Raises with the server's error
    ("ERROR 1064 (42000) at line 3: ...")."""
    if handle.basedir is None:
        client, env = [binary("mariadb", "/usr/bin")], ENV
    else:
        b = build(handle.basedir)
        client, env = b.tool(b.client)
    options = handle.rundir / "client.secret"
    write_private(options, "[client]\n" + "\n".join([
        sysbench_line("user", conn.user), sysbench_line("password", conn.password),
        sysbench_line("host", conn.host), sysbench_line("port", conn.port),
        sysbench_line("database", conn.database)]) + "\n")
    try:
        return run_client([client[0], f"--defaults-file={options}", *client[1:], "--batch"], sql, env=env)
    finally:
        options.unlink(missing_ok=True)


def _native_hash(password: str) -> str:
    """What mysql_native_password stores: the server never sees the password itself."""
    return "*" + hashlib.sha1(hashlib.sha1(password.encode()).digest()).hexdigest().upper()


def create_user(handle: Handle, user: str, password: str, database: str,
                hosts: tuple[str, ...] = ("127.0.0.1", "localhost"), binlog: bool = True) -> None:
    """user@host for each of hosts (IP addresses, or localhost) with all privileges on database (created if
    missing). binlog=False: the statements stay out of the binary log (each node of a topology runs them)."""
    check_identifier("user", user)
    check_identifier("database", database)
    for host in hosts:
        if host != "localhost" and not re.fullmatch(r"[0-9A-Fa-f.:]+", host):
            raise ConfigError(f"client address: {host!r} is not an IP address")
    secret = _native_hash(password)
    mysql = handle.basedir is not None and build(handle.basedir).family == "mysql"
    # MySQL has no IDENTIFIED BY PASSWORD; both take the hash as mysql_native_password's AS.
    identified = (f"IDENTIFIED WITH mysql_native_password AS '{secret}'" if mysql
                  else f"IDENTIFIED BY PASSWORD '{secret}'")
    sql = [] if binlog else ["SET SESSION sql_log_bin = 0;"]
    sql.append(f"CREATE DATABASE IF NOT EXISTS `{database}`;")
    for host in hosts:
        account = f"'{user}'@'{host}'"
        sql += [f"CREATE USER IF NOT EXISTS {account} {identified};",
                f"ALTER USER {account} {identified};",
                f"GRANT ALL PRIVILEGES ON `{database}`.* TO {account};"]
    admin_sql(handle, "\n".join(sql) + "\n")


def connect(conn: Conn):
    """A PyMySQL connection over TCP (over the socket when conn.host is None), autocommit."""
    where = {"host": conn.host, "port": conn.port} if conn.host is not None else {"unix_socket": str(conn.socket)}
    return pymysql.connect(**where, user=conn.user, password=conn.password, database=conn.database,
                           autocommit=True, connect_timeout=10)


def sysbench_options(conn: Conn, engine: str) -> list[str]:
    """Lines for sysbench --config-file: the driver and the connection (it holds the password: write it
    with engines.write_private, mode 0600).

    sysbench 1.0.20 reads only its own and the drivers' options from that file;
    a Lua script's options there (mysql_storage_engine, tables, ...) are reset
    to the script's defaults, so they go on the command line: sysbench_args().
    """
    return ["db-driver=mysql",
            sysbench_line("mysql-host", conn.host),
            sysbench_line("mysql-port", conn.port),
            sysbench_line("mysql-user", conn.user),
            sysbench_line("mysql-password", conn.password),
            sysbench_line("mysql-db", conn.database)]


def sysbench_args(engine: str) -> list[str]:
    """sysbench command-line options the engine needs (none secret): MyRocks tables need ENGINE=ROCKSDB."""
    return ["--mysql-storage-engine=rocksdb"] if engine == "myrocks" else []


# One cached session per server, user and thread (a sampler thread has its own), so sampling counters
# every second costs a query, not a login.
_sessions: dict[tuple, object] = {}


def _query(conn: Conn, sql: str, by_name: bool = False) -> list:
    """The rows of sql (tuples, or dicts by column name) in the cached session."""
    # A session through the socket is the socket's: nodes in namespaces may all listen on one port.
    key = (conn.host, conn.port, str(conn.socket) if conn.host is None else None, conn.user, conn.database,
           threading.get_ident())
    for attempt in (1, 2):
        session = _sessions.get(key)
        if session is None:
            session = _sessions[key] = connect(conn)
        try:
            with session.cursor(pymysql.cursors.DictCursor if by_name else None) as cursor:
                cursor.execute(sql)
                return list(cursor.fetchall())
        except (pymysql.err.OperationalError, pymysql.err.InterfaceError):
            _sessions.pop(key, None)
            with suppress(pymysql.err.Error):
                session.close()
            if attempt == 2:
                raise
    return []


def _forget(port: int, socket: Path) -> None:
    """Close the cached sessions of the server on port and socket (it is stopping); forget it was a replica."""
    _replicas.difference_update({key for key in _replicas if key[1] == port and key[2] == socket})
    for key in [key for key in list(_sessions) if key[1] == port and key[2] in (None, str(socket))]:
        session = _sessions.pop(key, None)
        try:
            if session is not None:
                session.close()
        except pymysql.err.Error:  # the server is gone; nothing to close politely
            pass


def variables(conn: Conn) -> list[tuple[str, ...]]:
    return [(name, "" if value is None else str(value)) for name, value in _query(conn, "SHOW GLOBAL VARIABLES")]


def version(conn: Conn) -> str:
    return str(_query(conn, "SELECT version()")[0][0])


# The dataset as the server's catalog reports it, in two queries: the database's defaults and the datadir's
# fixed settings, then each base table's engine, collation, approximate rows (InnoDB's estimate) and indexes.
SCHEMA_FACTS = ("SELECT default_character_set_name, default_collation_name, @@innodb_page_size, "
                "@@lower_case_table_names FROM information_schema.schemata WHERE schema_name = DATABASE()")
TABLE_FACTS = ("SELECT t.table_name, t.engine, t.table_collation, t.table_rows, "
               "(SELECT COUNT(DISTINCT s.index_name) FROM information_schema.statistics s "
               "WHERE s.table_schema = t.table_schema AND s.table_name = t.table_name) "
               "FROM information_schema.tables t WHERE t.table_schema = DATABASE() AND t.table_type = 'BASE TABLE' "
               "ORDER BY t.table_name")


def dataset_facts(conn: Conn) -> dict[str, str]:
    """What the benchmark database holds, as the server's catalog reports it, flat: schema.charset,
    schema.collation, innodb_page_size, lower_case_table_names, and per base table
    table.<name>.engine|collation|rows|indexes (rows: the engine's estimate). For comparing what ran with what
    was declared (the dataset-shaping settings, DATASET_SETTINGS)."""
    facts = {}
    for charset, collation, page_size, lower_case in _query(conn, SCHEMA_FACTS):
        facts |= {"schema.charset": str(charset), "schema.collation": str(collation),
                  "innodb_page_size": str(page_size), "lower_case_table_names": str(lower_case)}
    for name, engine, collation, rows, indexes in _query(conn, TABLE_FACTS):
        facts |= {f"table.{name}.engine": str(engine), f"table.{name}.collation": str(collation),
                  f"table.{name}.rows": str(rows), f"table.{name}.indexes": str(indexes)}
    return facts


ENGINE_STATUS = {"innodb": "SHOW ENGINE INNODB STATUS", "myrocks": "SHOW ENGINE ROCKSDB STATUS"}
STATUS_TIMEOUT_S = 30  # a server stuck on a latch may not answer: the run goes on without its text


def engine_status(handle: Handle, engine: str) -> str:
    """The engine's own status text, which performance engineers keep from before and after each measured
    step: SHOW ENGINE INNODB STATUS or SHOW ENGINE ROCKSDB STATUS, as status_text. As root through the
    socket (admin_sql_rows), since the statement needs the PROCESS privilege, which the benchmark user
    lacks. Raises when the server does not answer within STATUS_TIMEOUT_S."""
    return status_text(admin_sql_rows(handle, ENGINE_STATUS[engine] + ";\n", timeout=STATUS_TIMEOUT_S))


def status_text(rows: list[dict[str, str]]) -> str:
    """SHOW ENGINE ... STATUS's rows (Type, Name, Status) as one text: one row's Status as it is (InnoDB's);
    several rows (RocksDB's: its statistics, DB stats, each column family's compaction stats, memory, each
    background thread), each after a line `=== <Type> <Name> ===` and ending with a line break."""
    if len(rows) == 1:
        return rows[0]["Status"]
    return "".join(f"=== {row['Type']} {row['Name']} ===\n{row['Status']}"
                   + ("" if row["Status"].endswith("\n") else "\n") for row in rows)


def counters(conn: Conn) -> dict[str, float]:
    """One sample of SHOW GLOBAL STATUS, numeric values only (ON/OFF as 1/0), names as the server gives them,
    plus, where the server replicates, with one more query at most:

    - replication_position: a number that grows with every transaction: wsrep_last_committed on a Galera
      member (from the status: no query); on a replica the seq_no of the domain-0 GTID of @@gtid_slave_pos;
      else the seq_no of the domain-0 GTID of @@gtid_binlog_pos (absent without a binary log);
    - replication_lag_s, on a replica only: Seconds_Behind_Master of its default connection, -1 when the
      server reports NULL (its threads do not run).

    A server is a replica once its status counts a running replica thread (Slaves_running); it stays one
    (a stopped replica reports lag -1) until SHOW ALL SLAVES STATUS has no connection left. The benchmark
    user reads that with SLAVE MONITOR, which start_cluster grants on replicated nodes."""
    sample = {}
    for name, value in _query(conn, "SHOW GLOBAL STATUS"):
        number = status_number(value)
        if number is not None:
            sample[name] = number
    key = (conn.host, conn.port, conn.socket)
    if "wsrep_last_committed" in sample:
        sample["replication_position"] = sample["wsrep_last_committed"]
    elif sample.get("Slaves_running", 0) > 0 or key in _replicas:
        rows = _query(conn, "SHOW ALL SLAVES STATUS", by_name=True)
        default = [row for row in rows if not row.get("Connection_name")]
        if default:
            _replicas.add(key)
            row = default[0]
            position = gtid_seq_no(row.get("Gtid_Slave_Pos"))
            if position is not None:
                sample["replication_position"] = float(position)
            lag = row.get("Seconds_Behind_Master")
            sample["replication_lag_s"] = -1.0 if lag is None else float(lag)
        else:
            _replicas.discard(key)
    else:
        position = gtid_seq_no(_query(conn, "SELECT @@global.gtid_binlog_pos")[0][0])
        if position is not None:
            sample["replication_position"] = float(position)
    return sample


_replicas: set[tuple] = set()  # servers (host, port, socket) counters() has seen replicating


def gtid_seq_no(text, domain: int = 0) -> int | None:
    """The seq_no of domain's GTID in a GTID list ("0-1-42,1-2-7" -> 42), None when it has none."""
    for gtid in str(text or "").split(","):
        parts = gtid.strip().split("-")
        if len(parts) == 3 and parts[0].isdigit() and int(parts[0]) == domain and parts[2].isdigit():
            return int(parts[2])
    return None


def status_number(value) -> float | None:
    """A status variable's value as a number: ON/OFF (e.g. Rpl_semi_sync_master_status) as 1/0, None for
    text (e.g. Ssl_cipher)."""
    if isinstance(value, str) and value.strip().upper() in ("ON", "OFF"):
        return 1.0 if value.strip().upper() == "ON" else 0.0
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def table_counters(conn: Conn) -> dict[str, float]:
    """Per-table counters beyond counters(): none (SHOW GLOBAL STATUS has the handler and buffer pool ones)."""
    return {}


def set_session(cursor, name: str, value) -> None:
    """A session setting of a client session (a name checked by the caller, the value as a parameter)."""
    cursor.execute(f"SET SESSION {name} = %s", (int(value) if str(value).isdigit() else value,))


def session_value(cursor, name: str) -> str:
    """A session setting as the session reports it (a name checked by the caller: an option name)."""
    cursor.execute(f"SELECT @@SESSION.{name}")
    return str(cursor.fetchone()[0])


def flush_statistics(session) -> None:
    """SHOW GLOBAL STATUS counts a statement when it ends: nothing to flush."""


PLAN = "ANALYZE FORMAT=JSON"  # runs the statement and says what each step did
PLAN_NOT_RUN = "EXPLAIN FORMAT=JSON"  # the plan alone, the statement not run


def explain(session, sql: str) -> tuple[str, str]:
    """The plan the server chooses for sql in session (with its settings): (the statement used, the server's
    JSON text). ANALYZE runs sql, so it runs in a read-only transaction that is rolled back; where the server
    refuses it there (a statement that writes or locks rows; MySQL, which has no ANALYZE FORMAT=JSON), the
    plan comes from EXPLAIN, which does not run the statement."""
    with session.cursor() as cursor:
        try:
            cursor.execute("START TRANSACTION READ ONLY")
            cursor.execute(f"{PLAN} {sql}")
            return PLAN, cursor.fetchone()[0]
        except pymysql.MySQLError:
            pass
        finally:
            cursor.execute("ROLLBACK")
        cursor.execute(f"{PLAN_NOT_RUN} {sql}")
        return PLAN_NOT_RUN, cursor.fetchone()[0]


def server_binary(basedir: Path | None = None) -> Path:
    return build(basedir).server


def build_family(basedir: Path) -> str | None:
    """"mariadb" or "mysql" (MySQL 8.x / 5.7, Percona Server) for a build in basedir, None if not one of ours."""
    folder = Path(basedir) / "bin"
    if (folder / "mariadbd").is_file():
        return FAMILY
    if (folder / "mysqld").is_file():  # MySQL, Percona Server, or MariaDB before 10.5: its --version says
        return build(basedir).family
    return None


def client(name: str, basedir: Path | None) -> tuple[str, dict]:
    """A client program of the build (mariadb-dump …): its own when it has it, else Debian's; its environment."""
    b = build(basedir)
    if b.basedir is not None and (b.basedir / "bin" / name).is_file():
        return str(b.basedir / "bin" / name), b.env
    return binary(name, "/usr/bin"), dict(ENV)


@contextmanager
def client_env(conn: Conn, rundir: Path) -> Iterator[dict]:
    """The environment of a client program reaching the benchmark database; the password in a 0600
    option file (MYSQL_HOME/my.cnf, read by the clients' default groups), removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix="client-", dir=rundir))
    write_private(home / "my.cnf", "[client]\n" + "".join(
        f"{k}={v}\n" for k, v in (("host", conn.host), ("port", conn.port), ("user", conn.user),
                                  ("password", conn.password), ("database", conn.database))))
    try:
        yield {"MYSQL_HOME": str(home)}
    finally:
        shutil.rmtree(home, ignore_errors=True)


# Status variables that are levels, not running totals (everything else only grows while the server runs).
_GAUGE = re.compile(
    r"^(acl_|aria_pagecache_blocks_|binlog_snapshot_|delayed_insert_threads$|"
    r"innodb_buffer_pool_(pages_(data|dirty|free|misc|old|total)$|bytes_)|innodb_checkpoint_|"
    r"innodb_data_pending_|innodb_history_list_length$|innodb_ibuf_(free_list|segment_size|size)$|innodb_mem_|"
    r"innodb_page_size$|innodb_row_lock_(current_waits|time_avg|time_max)$|innodb_num_open_files$|"
    r"innodb_available_undo_logs$|innodb_onlineddl_|innodb_encryption_rotation_estimated_iops$|"
    r"innodb_have_|key_blocks_(not_flushed|unused|used|warm)$|last_query_cost$|max_used_connections$|"
    r"memory_used|max_memory_used$|not_flushed_delayed_rows$|open_|prepared_stmt_count$|"
    r"qcache_(free_blocks|free_memory|queries_in_cache|total_blocks)$|rpl_semi_sync_\w*(clients|status|avg_\w*|"
    r"wait_sessions)$|slave_(heartbeat_period|open_temp_tables|running)$|slaves_|ssl_|"
    r"table_open_cache_active_instances$|tc_log_(max_pages_used|page_size)$|threadpool_|"
    r"threads_(cached|connected|running)$|replication_lag_s$|"
    # every wsrep_ status but the running totals: bytes, write sets, flow control events and pause time,
    # certification failures, aborts and replays, last committed seqno
    r"wsrep_(?!(replicated(_bytes)?|received(_bytes)?|repl_\w+|local_(commits|cert_failures|bf_aborts|replays)|"
    r"flow_control_(paused_ns|sent|recv)|last_committed)$)\w*$|"
    r"rocksdb_(memtable_(total|unflushed)|num_iterators|manual_compactions_running|block_cache_usage|"
    r"block_cache_pinned_usage|estimate_\w+|num_running_\w+|cur_size_\w+|size_all_mem_tables|"
    r"actual_delayed_write_rate|is_write_stopped|num_snapshots|oldest_snapshot_time|\w*_pending\w*)$)",
    re.IGNORECASE)


def CUMULATIVE(name: str) -> bool:  # noqa: N802 - the interface's name
    """Whether a status variable is a running total (per-second deltas make sense) or a level."""
    return not _GAUGE.match(name)


def _delta(first: dict, last: dict, name: str) -> float | None:
    lowered = {key.lower(): key for key in last}
    key = lowered.get(name.lower())
    if key is None or key not in first:
        return None
    return last[key] - first[key]


def hit_ratio(engine: str, first: dict, last: dict) -> float | None:
    """Share of page/block requests served from memory between two counters() samples; None without requests."""
    if engine == "innodb":
        reads = _delta(first, last, "Innodb_buffer_pool_reads")
        requests = _delta(first, last, "Innodb_buffer_pool_read_requests")
        if reads is None or not requests:
            return None
        return 1 - reads / requests
    if engine == "myrocks":
        hit = _delta(first, last, "Rocksdb_block_cache_hit")
        miss = _delta(first, last, "Rocksdb_block_cache_miss")
        if hit is None or miss is None or hit + miss <= 0:
            return None
        return hit / (hit + miss)
    raise ConfigError(f"engine: {engine!r} is not a MariaDB engine ({', '.join(ENGINE_NAMES)})")


LOG_WRITTEN = {"innodb": "Innodb_os_log_written", "myrocks": "Rocksdb_wal_bytes"}
# The counters the query workload reports per execution (a regular expression, case-insensitive): rows
# the handlers read, pages and blocks read from memory and from disk.
QUERY_COUNTERS = (r"handler_read_\w+|innodb_buffer_pool_reads|innodb_buffer_pool_read_requests|innodb_data_read|"
                  r"innodb_data_reads|rocksdb_block_cache_(hit|miss)|rocksdb_bytes_read")


def logs_written(engine: str, first: dict, last: dict) -> dict[str, float | None]:
    """Bytes the engine wrote to its own log (InnoDB's redo log, MyRocks' WAL) and to the binary log
    between two counters() samples; None where a counter is missing."""
    if engine not in LOG_WRITTEN:
        raise ConfigError(f"engine: {engine!r} is not a MariaDB engine ({', '.join(ENGINE_NAMES)})")
    return {"log": _delta(first, last, LOG_WRITTEN[engine]), "binlog": _delta(first, last, "Binlog_bytes_written")}



def check_replication(engine: str, kind: str | None, basedir: Path | None = None) -> None:
    """ConfigError (one line) when engine, on the build in basedir (None: Debian's), cannot run kind:
    replication is MariaDB's (GTID, semi-sync built in from 10.3); Galera needs Debian's MariaDB with
    galera-4 (a fetched or user's build has no wsrep library to match)."""
    if kind is None:
        return
    if kind not in REPLICATION.get(engine, ()):
        raise ConfigError(f"replication: {kind!r} is not applicable to engine {engine} "
                          f"(it runs {', '.join(REPLICATION.get(engine, ())) or 'none'})")
    if basedir is None:
        return
    b = build(basedir)
    if b.family != FAMILY or b.version < (10, 3, 0):
        raise ConfigError(f"replication: {kind!r} needs MariaDB 10.3 or later, not {b.family} "
                          f"{'.'.join(map(str, b.version))} in {b.basedir}")
    if kind == "galera":
        raise ConfigError(f"replication: 'galera' runs only on Debian's MariaDB (with galera-4), not on the build "
                          f"in {b.basedir}")


def monitor_privilege(basedir: Path | None = None) -> str:
    """The privilege that lets a user read SHOW SLAVE STATUS: SLAVE MONITOR from 10.5.9, REPLICATION CLIENT
    before."""
    b = build(basedir) if basedir is not None else None
    return "SLAVE MONITOR" if b is None or b.version >= (10, 5, 9) else "REPLICATION CLIENT"


def write_grastate(datadir: Path, uuid: str, seqno: int) -> None:
    """The saved state of a Galera member: the cluster's uuid and the last seqno its data holds."""
    path = Path(datadir) / "grastate.dat"
    write_config(path, f"# GALERA saved state\nversion: 2.1\nuuid:    {uuid}\nseqno:   {int(seqno)}\n"
                       f"safe_to_bootstrap: 0\n")
    chown_tree(path, SERVICE_USER)


def recover_position(datadir: Path, argv: list[str], env: dict, error_log: Path, log) -> str | None:
    """A Galera member that was killed has seqno -1 in its grastate.dat; started so, it would ask for a full
    copy. Its last committed writeset is in InnoDB: `mariadbd --wsrep-recover` (argv: the server's command
    line) says it in the error log ("Recovered position: uuid:seqno"), written back into grastate.dat so
    that the member asks for an IST. Returns that position, or None when there was nothing to recover."""
    path = Path(datadir) / "grastate.dat"
    state = path.read_text(errors="replace") if path.is_file() else ""
    if not re.search(r"^seqno:\s*-1\s*$", state, re.M):
        return None
    before = error_log.stat().st_size if error_log.is_file() else 0
    run_logged([*argv, "--wsrep-recover"], log, env=env)
    said = error_log.read_text(errors="replace")[before:] if error_log.is_file() else ""
    found = re.findall(r"WSREP: Recovered position: ([0-9a-f-]{36}):(-?\d+)", said)
    if not found or int(found[-1][1]) < 0:
        return None  # nothing committed through the cluster: it will need a copy, which is refused
    uuid, seqno = found[-1]
    write_grastate(datadir, uuid, int(seqno))
    return f"{uuid}:{seqno}"
