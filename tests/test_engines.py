"""Real servers: MariaDB with InnoDB and MyRocks, and PostgreSQL.

Each engine's datadir is initialized once per module; every test starts and
stops its own server on it and checks that nothing is left behind: no server
process, no socket, no pid file.
"""
import io
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import psutil
import pytest

from dbsweep.runtime.memory import memory_cgroup
from dbsweep import engines
from dbsweep.engines import (CLUSTER_INTERFACE, ENGINES, INTERFACE, Handle, Launch, ServerExited, datadir_processes,
                             families, family, mariadb, option_sets, supervise, write_private)
from dbsweep.errors import ConfigError
from dbsweep.units import format_size, parse_size

MEMORY = "64M"
USER, DATABASE = "sbuser", "sbtest"
# Distinctive, and with the characters sysbench's config reader only takes quoted.
PASSWORD = "Kq7-vault #9,dbsweep'pw"
MEMORY_SETTING = {"innodb": ("innodb_buffer_pool_size", 64 << 20),
                  "myrocks": ("rocksdb_block_cache_size", 64 << 20),
                  "postgresql": ("shared_buffers", (64 << 20) // 8192)}  # pg_settings counts 8 kB pages
GROWS = {"innodb": "Com_insert", "myrocks": "Rocksdb_rows_inserted", "postgresql": "wal_lsn_bytes"}
MISSPELLED = {"innodb": ({"innodb_bufer_pool_size": "1"}, "unknown variable 'innodb_bufer_pool_size=1'"),
              "myrocks": ({"rocksdb_block_cache_sise": "1"}, "unknown variable 'rocksdb_block_cache_sise=1'"),
              "postgresql": ({"shared_bufers": "1"}, 'unrecognized configuration parameter "shared_bufers"')}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def tree_pids(pid: int) -> list[int]:
    return [pid] + [child.pid for child in psutil.Process(pid).children(recursive=True)]


def inet_sockets(pid: int) -> list:
    try:
        return psutil.Process(pid).net_connections(kind="inet")
    except psutil.NoSuchProcess:  # e.g. a backend that was just ending
        return []


def outside(pid: int, cgroup: Path) -> bool:
    """pid (if it still runs) is in another memory cgroup (v1 line "N:memory:/path", v2 line "0::/path")."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except (FileNotFoundError, ProcessLookupError):
        return False
    paths = [line.split(":", 2)[2] for line in lines if line.split(":", 2)[1] in ("memory", "")]
    return not any(path.endswith(f"/{cgroup.name}") for path in paths)


def rows(db, sql: str) -> list[tuple]:
    cursor = db.cursor()
    cursor.execute(sql)
    return [tuple(row) for row in cursor.fetchall()]


def execute(db, sql: str) -> None:
    db.cursor().execute(sql)


@dataclass
class Cluster:
    engine: str
    module: ModuleType
    base: Path

    @property
    def datadir(self) -> Path:
        return self.base / "data"

    @property
    def rundir(self) -> Path:
        return self.base / "run"

    def config(self, options=None, memory=MEMORY) -> str:
        return self.module.config_text(self.engine, memory, options or {}, self.datadir, self.rundir, free_port())

    @contextmanager
    def server(self, options=None, memory=MEMORY, cgroup=None):
        with open(self.base / "dbsweep.log", "a") as log:
            with self.module.server(self.engine, self.datadir, self.rundir, self.config(options, memory), log,
                                    cgroup) as handle:
                yield handle

    def conn(self, handle, password=PASSWORD):
        return self.module.Conn(host="127.0.0.1", port=handle.port, socket=handle.socket, user=USER,
                                password=password, database=DATABASE)

    def assert_nothing_left(self, pids=()) -> None:
        assert datadir_processes(self.datadir, self.module.SERVICE_USER) == {}
        assert [pid for pid in pids if alive(pid)] == []
        left = [path.name for path in self.rundir.iterdir()
                if stat.S_ISSOCK(path.lstat().st_mode) or path.suffix in (".pid", ".lock")]
        assert left == []
        assert not (self.datadir / "postmaster.pid").exists()


def own_tmp() -> Path:
    """A 0755 folder under /tmp. The servers run as mysql and postgres, who cannot enter pytest's 0700 tmp_path
    folders; chmod-ing those is not enough, as any other pytest run tightens /tmp/pytest-of-<user> again."""
    path = Path(tempfile.mkdtemp(prefix="dbsweep-engines-", dir="/tmp"))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def workdir():
    path = own_tmp()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def scratch():
    path = own_tmp()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module", params=list(ENGINES))
def cluster(request, workdir) -> Cluster:
    engine = request.param
    module = family(engine)
    base = workdir / engine
    base.mkdir(mode=0o755)
    with open(base / "initialize.log", "w") as log:
        commands = module.initialize(base / "data", log)
    assert commands and all(isinstance(arg, str) for argv in commands for arg in argv)
    assert (base / "data").stat().st_uid == pwd.getpwnam(module.SERVICE_USER).pw_uid
    return Cluster(engine, module, base)


# --- no server ----------------------------------------------------------------------------

def test_sizes():
    assert parse_size("256M") == 256 << 20
    assert parse_size("2G") == 2 << 30
    assert parse_size("512MiB") == 512 << 20
    assert parse_size(4096) == 4096
    assert format_size(256 << 20) == "256M"
    assert format_size(3 << 30, {"G": "GB"}) == "3GB"
    with pytest.raises(ConfigError, match="'lots' is not a size"):
        parse_size("lots")


@pytest.mark.parametrize("engine", list(ENGINES))
def test_config_text(engine, tmp_path):
    module = family(engine)
    text = module.config_text(engine, "256M", {}, tmp_path / "data", tmp_path / "run", 4321)
    assert "4321" in text and str(tmp_path / "run") in text and "127.0.0.1" in text
    assert {"innodb": "innodb_buffer_pool_size=256M", "myrocks": "rocksdb_block_cache_size=256M",
            "postgresql": "shared_buffers = '256MB'"}[engine] in text
    memory_option = MEMORY_SETTING[engine][0]
    overridden = module.config_text(engine, "256M", {memory_option: "1G"}, tmp_path / "data", tmp_path / "run", 1)
    assert [line for line in overridden.splitlines() if line.startswith(memory_option)] == \
        [f"{memory_option} = '1G'" if engine == "postgresql" else f"{memory_option}=1G"]
    listen = {"mariadb": {"bind-address": "0.0.0.0"}, "postgresql": {"listen_addresses": "*"}}[module.FAMILY]
    with pytest.raises(ConfigError, match="is set by dbsweep"):
        module.config_text(engine, None, listen, tmp_path / "data", tmp_path / "run", 1)
    with pytest.raises(ConfigError, match="memory: 'much' is not a size"):
        module.config_text(engine, "much", {}, tmp_path / "data", tmp_path / "run", 1)


def test_mariadb_flags_and_quoting(tmp_path):
    text = family("innodb").config_text("innodb", None, {"skip-log-bin": True, "innodb_doublewrite": False,
                                                         "init_connect": "SET @a = '#1'"},
                                        tmp_path, tmp_path, 1)
    assert "\nskip-log-bin\n" in text and "\ninnodb_doublewrite=OFF\n" in text
    assert "\ninit_connect=\"SET @a = '#1'\"\n" in text


# --- options a study may not set (hostile-input audit, /work/hostile/cases) -----------------------------------

# (family, option, value, what the one-line refusal says after the value)
REFUSED_OPTIONS = [
    ("mariadb", "general_log_file", "/work/hostile/outside.log", "names a path outside the cell's datadir"),
    ("mariadb", "log_bin", "/var/tmp/binlog", "names a path outside the cell's datadir"),
    ("mariadb", "slow-query-log-file", "../slow.log", "names a path outside the cell's datadir"),
    ("mariadb", "innodb_data_home_dir", "/elsewhere", "names a path outside the cell's datadir"),
    ("mariadb", "tmpdir", "/tmp", "is set by dbsweep"),
    ("mariadb", "plugin_dir", "/tmp", "is set by dbsweep"),
    ("mariadb", "getopt_prefix_matching", "ON", "is set by dbsweep"),
    ("mariadb", "init_file", "/work/hostile/files/evil.sql", "runs its SQL as the server's root"),
    ("mariadb", "init-slave", "SELECT 1", "runs its SQL as the server's root"),
    ("mariadb", "plugin_load_add", "server_audit", "loads a library into the server"),
    ("mariadb", "wsrep_provider", "/tmp/evil.so", "loads a library into the server"),
    ("mariadb", "wsrep_notify_cmd", "/bin/touch", "runs a command"),
    ("mariadb", "secure_file_priv", "/", "lets SQL read and write files in the folder it names"),
    ("mariadb", "loose_enable_skip_grant_tables", True, "lets every login in without a password"),
    ("mariadb", "Skip-Grant-Tables", True, "lets every login in without a password"),
    ("postgresql", "archive_command", "touch /work/hostile/PWNED", "runs a command"),
    ("postgresql", "ssl_passphrase_command", "sh -c id", "runs a command"),
    ("postgresql", "restore_command", "cp /x %p", "runs a command"),
    ("postgresql", "shared_preload_libraries", "auto_explain", "loads a library into the server"),
    ("postgresql", "archive_library", "basic_archive", "loads a library into the server"),
    ("postgresql", "include", "/etc/evil.conf", "reads settings from another file"),
    ("postgresql", "Include_Dir", "/etc", "reads settings from another file"),
    ("postgresql", "log_directory", "/tmp", "names a path outside the cell's datadir"),
    ("postgresql", "data_directory", "/tmp", "is set by dbsweep"),
]


@pytest.mark.parametrize("family_name, name, value, why", REFUSED_OPTIONS,
                         ids=[f"{r[0]}-{r[1]}" for r in REFUSED_OPTIONS])
def test_options_that_run_load_or_write_elsewhere_are_refused_at_load_and_in_the_job(family_name, name, value, why,
                                                                                     tmp_path):
    from dbsweep.engines import check_options
    with pytest.raises(ConfigError) as err:
        check_options(family_name, {name: value}, f"server.options.{family_name}")
    assert str(err.value) == f"server.options.{family_name}.{name}: {value!r} {why}; remove it" or \
        str(err.value).startswith(f"server.options.{family_name}.{name}: {value!r} {why} (")
    engine = {"mariadb": "innodb", "postgresql": "postgresql"}[family_name]
    with pytest.raises(ConfigError, match=re.escape(why)):
        family(engine).config_text(engine, None, {name: value}, tmp_path / "data", tmp_path / "run", 1)


# Names with what would end the option in the config file, or start another one there.
BAD_NAMES = ["innodb_io_capacity\n", "skip_grant_tables\n", "a=b", "x\nplugin_load_add", "#datadir", "max connections",
             "'port'", "\"port\"", "-datadir", "", 5]


@pytest.mark.parametrize("family_name", ["mariadb", "postgresql"])
@pytest.mark.parametrize("name", BAD_NAMES, ids=[repr(n) for n in BAD_NAMES])
def test_a_name_that_is_not_an_option_name_is_refused(family_name, name, tmp_path):
    from dbsweep.engines import check_options
    with pytest.raises(ConfigError) as err:
        check_options(family_name, {name: "1"}, f"server_options.log.a.{family_name}")
    message = str(err.value)
    assert message.startswith(f"server_options.log.a.{family_name}: {name!r} (set to '1') is not a {family_name} "
                              "option name (") and "\n" not in message
    engine = {"mariadb": "innodb", "postgresql": "postgresql"}[family_name]
    if isinstance(name, str):
        with pytest.raises(ConfigError, match="not an option name"):
            family(engine).config_text(engine, None, {name: "1"}, tmp_path / "data", tmp_path / "run", 1)


@pytest.mark.parametrize("family_name, value", [("mariadb", "SET @a = 1\ninit_file=/tmp/evil.sql"),
                                                ("postgresql", "x'\narchive_command = 'touch /tmp/x")])
def test_a_value_with_a_line_break_is_refused(family_name, value):
    from dbsweep.engines import check_options
    name = {"mariadb": "init_connect", "postgresql": "application_name"}[family_name]
    with pytest.raises(ConfigError) as err:
        check_options(family_name, {name: value}, "server.options.x")
    assert str(err.value) == f"server.options.x.{name}: {value!r} contains a line break"


@pytest.mark.parametrize("family_name, options", [
    ("mariadb", {"log_bin": "binlog", "binlog_format": "ROW", "sync_binlog": 1, "max_binlog_size": "64M"}),
    ("mariadb", {"log_bin": True}), ("mariadb", {"log_bin": 1}), ("mariadb", {"log-bin": "ON"}),
    ("mariadb", {"skip-log-bin": True}), ("mariadb", {"skip-log-bin": ""}), ("mariadb", {"disable_log_bin": True}),
    ("mariadb", {"general_log": 1, "general_log_file": "general.log"}), ("mariadb", {"init_connect": "SET @a = 1"}),
    ("mariadb", {"innodb_data_file_path": "ibdata1:64M:autoextend", "transaction-isolation": "READ-COMMITTED"}),
    ("postgresql", {"archive_mode": "on", "wal_compression": "on", "random_page_cost": 1.1}),
    ("postgresql", {"pg_stat_statements.max": 100, "default_transaction_isolation": "read committed"}),
])
def test_ordinary_options_pass(family_name, options, tmp_path):
    from dbsweep.engines import check_options
    check_options(family_name, options, "server.options.x")
    engine = {"mariadb": "innodb", "postgresql": "postgresql"}[family_name]
    family(engine).config_text(engine, None, options, tmp_path / "data", tmp_path / "run", 1)


@pytest.mark.skipif(shutil.which("mariadbd") is None, reason="no mariadbd")
def test_mariadb_takes_whole_option_names_only(tmp_path):
    """MariaDB takes an unambiguous prefix of a name by default (datad for datadir, init_f for init_file): my.cnf
    turns that off, so a prefix is an unknown option and the server refuses to start (its own --help parses
    the file as a start does, without starting)."""
    engine = family("innodb")
    config = tmp_path / "my.cnf"
    config.write_text(engine.config_text("innodb", None, {"datad": str(tmp_path / "elsewhere")}, tmp_path / "data",
                                         tmp_path / "run", 1))
    done = subprocess.run(["mariadbd", f"--defaults-file={config}", "--verbose", "--help"], capture_output=True,
                          text=True, cwd="/")
    assert done.returncode != 0 and f"unknown variable 'datad={tmp_path / 'elsewhere'}'" in done.stderr
    config.write_text(engine.config_text("innodb", None, {}, tmp_path / "data", tmp_path / "run", 1))
    done = subprocess.run(["mariadbd", f"--defaults-file={config}", "--verbose", "--help"], capture_output=True,
                          text=True, cwd="/")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^getopt-prefix-matching\s+FALSE$", done.stdout, re.M)


HELP_FIXTURE = Path(__file__).parent / "fixtures" / "mariadbd_help" / "verbose_help.txt.gz"
# `  -C, --character-set-server=name`: an option with a short alias (the alias may be a sign, -# or -?).
ALIASED = re.compile(r"^  -\S, --([A-Za-z0-9][A-Za-z0-9_-]*)", re.M)


def aliased_names(text: str) -> list[str]:
    return ALIASED.findall(text)


def test_options_with_a_short_alias_are_known_in_either_spelling():
    """mariadbd --verbose --help lists `-C, --character-set-server=name`: such names were missed, so a study
    setting character-set-server was refused as unknown (issue 32). Real output of Debian's 10.11."""
    import gzip
    from dbsweep.engines import _known
    text = gzip.decompress(HELP_FIXTURE.read_bytes()).decode()
    known = mariadb.help_option_names(text)
    aliased = aliased_names(text)
    assert len(aliased) >= 15 and "character-set-server" in aliased
    for name in aliased:
        for spelling in (name, name.replace("-", "_"), name.replace("_", "-"), "loose_" + name):
            assert _known(spelling, known), spelling
    assert {"collation_server", "innodb_page_size", "lower_case_table_names"} <= known  # no alias: known before
    assert not _known("character_set_servr", known)


@pytest.mark.skipif(shutil.which("mariadbd") is None, reason="no mariadbd")
def test_the_installed_server_knows_its_aliased_options_at_load():
    """The check at load (installed=True) against the installed mariadbd: every aliased option of its own help
    passes, in either spelling, unless dbsweep refuses it for another reason (datadir, port, user …)."""
    from dbsweep.engines import check_options
    done = subprocess.run(["mariadbd", "--no-defaults", "--verbose", "--help"], capture_output=True, text=True,
                          cwd="/")
    aliased = aliased_names(done.stdout)
    assert "character-set-server" in aliased
    for name in aliased:
        for spelling in (name, name.replace("-", "_")):
            if mariadb.refused(spelling, "x") is None:
                check_options("mariadb", {spelling: "x"}, "server.options.mariadb", installed=True)
    check_options("mariadb", {"character-set-server": "latin1", "collation-server": "latin1_swedish_ci"},
                  "server_options.charset.latin1.mariadb", installed=True)
    with pytest.raises(ConfigError, match="has no option 'character-set-servr'"):
        check_options("mariadb", {"character-set-servr": "latin1"}, "server.options.mariadb", installed=True)


@pytest.mark.skipif(not list(Path("/usr/lib/postgresql").glob("*/bin/postgres")), reason="no postgres")
def test_postgresql_knows_the_settings_initdb_fixes_at_load():
    """`postgres --describe-config` leaves out read-only parameters, among them those initdb fixes
    (data_checksums, wal_segment_size, server_encoding, lc_collate, lc_ctype): a study sets those as options
    (initdb gets them), so the check at load knows them; another read-only one (block_size) is still refused."""
    from dbsweep.engines import check_options, postgresql
    described = subprocess.run([str(postgresql.bindir() / "postgres"), "--describe-config"], capture_output=True,
                               text=True, cwd="/").stdout
    listed = {line.split("\t", 1)[0] for line in described.splitlines()}
    assert not listed & set(postgresql.INITDB)  # the gap: none of them is described
    check_options("postgresql", {"data_checksums": "on", "wal_segment_size": "64MB", "server_encoding": "UTF8",
                                 "lc_collate": "C", "lc_ctype": "C"}, "server.options.postgresql", installed=True)
    with pytest.raises(ConfigError, match="has no option 'block_size'"):
        check_options("postgresql", {"block_size": 16384}, "server.options.postgresql", installed=True)


def test_option_sets_shape():
    sets = option_sets()
    assert set(sets) == {"binlog", "durability", "isolation"}
    assert list(sets["binlog"]) == ["off", "sync0", "sync1", "sync1000", "sync10000"]
    for value, by_family in sets["binlog"].items():
        assert set(by_family) == {"mariadb"}
        if value != "off":
            assert by_family["mariadb"]["sync_binlog"] == int(value.removeprefix("sync"))
    assert all(set(families) == {"postgresql"} for families in sets["durability"].values())
    tuned, unsafe = sets["durability"]["tuned"]["postgresql"], sets["durability"]["unsafe"]["postgresql"]
    assert unsafe == tuned | {"fsync": False, "full_page_writes": False, "synchronous_commit": False}
    assert all(set(families) == {"mariadb", "postgresql"} for families in sets["isolation"].values())


def test_every_family_offers_the_whole_interface():
    for module in families():
        missing = [name for name in INTERFACE if not hasattr(module, name)]
        assert not missing, f"{module.__name__} lacks {missing}"
        assert callable(module.check_replication) and isinstance(module.SYNC_KINDS, tuple)


def test_every_family_has_a_cluster_module_below_which_it_stays():
    for engine in ENGINES:
        module = engines.cluster(engine)
        missing = [name for name in CLUSTER_INTERFACE if not callable(getattr(module, name, None))]
        assert not missing, f"{module.__name__} lacks {missing}"


def test_hit_ratio_formulas():
    mariadb, postgresql = family("innodb"), family("postgresql")
    first = {"Innodb_buffer_pool_reads": 10.0, "Innodb_buffer_pool_read_requests": 100.0,
             "Rocksdb_block_cache_hit": 0.0, "Rocksdb_block_cache_miss": 0.0}
    last = {"Innodb_buffer_pool_reads": 20.0, "Innodb_buffer_pool_read_requests": 500.0,
            "Rocksdb_block_cache_hit": 90.0, "Rocksdb_block_cache_miss": 10.0}
    assert mariadb.hit_ratio("innodb", first, last) == pytest.approx(1 - 10 / 400)
    assert mariadb.hit_ratio("myrocks", first, last) == pytest.approx(0.9)
    assert mariadb.hit_ratio("innodb", first, first) is None
    assert postgresql.hit_ratio("postgresql", {"db.blks_hit": 0.0, "db.blks_read": 0.0},
                                {"db.blks_hit": 75.0, "db.blks_read": 25.0}) == pytest.approx(0.75)
    # the engine's own log and the binary log, in bytes between the two samples
    first |= {"Innodb_os_log_written": 1000.0, "Rocksdb_wal_bytes": 50.0, "Binlog_bytes_written": 0.0}
    last |= {"Innodb_os_log_written": 9192.0, "Rocksdb_wal_bytes": 4146.0, "Binlog_bytes_written": 2048.0}
    assert mariadb.logs_written("innodb", first, last) == {"log": 8192.0, "binlog": 2048.0}
    assert mariadb.logs_written("myrocks", first, last) == {"log": 4096.0, "binlog": 2048.0}
    assert mariadb.logs_written("innodb", {}, last) == {"log": None, "binlog": None}
    # how far the written WAL position moved (pg_stat_wal's wal_bytes lags: tests/test_collect.py)
    assert postgresql.logs_written("postgresql", {"wal.wal_bytes": 10.0, "wal_lsn_bytes": 0.0},
                                   {"wal.wal_bytes": 110.0, "wal_lsn_bytes": 500.0}) == {"log": 500.0, "binlog": None}
    assert postgresql.logs_written("postgresql", {"wal_lsn_bytes": 0.0}, {"wal_lsn_bytes": 500.0})["log"] == 500.0
    assert not mariadb.CUMULATIVE("Threads_connected") and not mariadb.CUMULATIVE("Innodb_buffer_pool_pages_free")
    assert mariadb.CUMULATIVE("Innodb_buffer_pool_reads") and mariadb.CUMULATIVE("Rocksdb_block_cache_hit")
    assert not postgresql.CUMULATIVE("db.numbackends") and postgresql.CUMULATIVE("db.blks_hit")


@pytest.mark.workflow
@pytest.mark.parametrize("name", ["mariadb", "postgresql"])
def test_unreachable_datadir_fails_early(name, scratch):
    engine = {"mariadb": "innodb", "postgresql": "postgresql"}[name]
    module = family(engine)
    locked = scratch / "locked"
    locked.mkdir(mode=0o700)
    with pytest.raises(RuntimeError, match=f"cannot reach it: {re.escape(str(locked))} is mode 0700"):
        module.initialize(locked / "data", io.StringIO())
    datadir = locked / "made"
    (datadir / "mysql").mkdir(parents=True)
    (datadir / "PG_VERSION").write_text("15\n")
    config = module.config_text(engine, None, {}, datadir, scratch / "run", free_port())
    with pytest.raises(RuntimeError, match=f"cannot reach it: {re.escape(str(locked))}"):
        with module.server(engine, datadir, scratch / "run", config, io.StringIO()):
            pytest.fail("the server started")


def test_memory_cgroup_caps_a_process_and_a_death_by_its_oom_killer_is_named(tmp_path):
    from types import SimpleNamespace
    from dbsweep.measure import server_gone
    hog = ("import sys; sys.stdin.readline(); block = bytearray(256 << 20); "
           "block[::4096] = b'x' * len(block[::4096]); print('not capped')")
    with memory_cgroup(f"dbsweep-test-hog-{os.getpid()}", 64 << 20) as add:
        assert add.limit_file.read_text().strip() == str(64 << 20)
        assert add.oom_kills() == 0
        proc = subprocess.Popen([sys.executable, "-c", hog], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        add(proc.pid)
        assert str(proc.pid) in (add.path / "cgroup.procs").read_text().split()
        out, _ = proc.communicate("go\n", timeout=60)
        path = add.path
        assert add.oom_kills() == 1
        (tmp_path / "server.log").write_text("[Note] serving\n")
        gone = server_gone(SimpleNamespace(handle=SimpleNamespace(pid=proc.pid, rundir=tmp_path), memory_cgroup=add))
        assert gone == (f"the server (pid {proc.pid}) was killed by the OOM killer of its memory cgroup (limit 64 MB: "
                        "the memory axis plus server.cgroup_overhead); its last words: [Note] serving")
    assert proc.returncode == -signal.SIGKILL and "not capped" not in out  # the OOM killer, inside the cgroup
    assert not path.exists()


# --- real servers -------------------------------------------------------------------------

@pytest.mark.workflow
def test_lifecycle(cluster):
    module, engine = cluster.module, cluster.engine
    assert re.search(r"\d+\.\d+", module.server_version())
    with cluster.server() as handle:
        first_pid = handle.pid
        assert handle.rundir == cluster.rundir and handle.socket.exists() and 0 < handle.ready_seconds < 120
        module.create_user(handle, USER, PASSWORD, DATABASE)
        conn = cluster.conn(handle)
        db = module.connect(conn)
        try:
            execute(db, "CREATE TABLE t1 (id INT PRIMARY KEY, note VARCHAR(20))")
            first = module.counters(conn)
            execute(db, "INSERT INTO t1 VALUES (1, 'one'), (2, 'two'), (3, 'three')")
            assert rows(db, "SELECT note FROM t1 WHERE id = 2") == [("two",)]
            if engine == "myrocks":
                assert rows(db, "SELECT engine FROM information_schema.tables "
                                f"WHERE table_schema = '{DATABASE}' AND table_name = 't1'") == [("ROCKSDB",)]
            last = module.counters(conn)
        finally:
            db.close()
        assert len(first) > 20 and all(isinstance(value, float) for value in first.values())
        if module.FAMILY == "mariadb":  # an ON/OFF status is a 1/0 counter, not dropped
            assert first["Rpl_semi_sync_master_status"] == 0.0
        sampled = []  # a sampler thread gets its own cached session
        sampler = threading.Thread(target=lambda: sampled.append(module.counters(conn)))
        sampler.start()
        sampler.join()
        assert sampled and sampled[0][GROWS[engine]] >= last[GROWS[engine]]
        assert last[GROWS[engine]] > first[GROWS[engine]]
        ratio = module.hit_ratio(engine, first, last)
        assert ratio is None or 0 <= ratio <= 1
        name, expected = MEMORY_SETTING[engine]
        assert int({row[0]: row[1] for row in module.variables(conn)}[name]) == expected
        assert {"mariadb": "MariaDB", "postgresql": "PostgreSQL"}[module.FAMILY] in module.version(conn)
    cluster.assert_nothing_left([first_pid])

    with cluster.server() as handle:  # again on the same datadir, as after restoring an image
        db = module.connect(cluster.conn(handle))
        try:
            assert rows(db, "SELECT count(*) FROM t1") == [(3,)]
        finally:
            db.close()
    cluster.assert_nothing_left([first_pid, handle.pid])


@pytest.mark.workflow
def test_misspelled_option_fails_with_the_servers_message(cluster):
    options, message = MISSPELLED[cluster.engine]
    with pytest.raises(RuntimeError, match=re.escape(message)), cluster.server(options):
        pytest.fail("the server started")
    cluster.assert_nothing_left()


@pytest.mark.workflow
def test_error_in_the_body_still_stops_the_server(cluster):
    with pytest.raises(KeyError, match="from the body"), cluster.server() as handle:
        pids = tree_pids(handle.pid)
        raise KeyError("from the body")
    cluster.assert_nothing_left(pids)


@pytest.mark.workflow
def test_localhost_only_and_password_hidden(cluster):
    module, engine = cluster.module, cluster.engine
    with cluster.server() as handle:
        module.create_user(handle, USER, PASSWORD, DATABASE)
        conn = cluster.conn(handle)
        assert PASSWORD not in repr(conn)

        listening = [connection.laddr for pid in tree_pids(handle.pid) for connection in inet_sockets(pid)
                     if connection.status == psutil.CONN_LISTEN]
        assert {(address.ip, address.port) for address in listening} == {("127.0.0.1", handle.port)}

        with pytest.raises(Exception):  # noqa: B017 - the engine's own driver error (pymysql's or psycopg's)
            module.connect(cluster.conn(handle, password="not the password")).close()

        # sysbench takes the connection from a 0600 file, never from its command line.
        options = cluster.base / "sysbench.cfg"
        write_private(options, "\n".join(module.sysbench_options(conn, engine)) + "\n")
        assert stat.S_IMODE(options.stat().st_mode) == 0o600
        argv = ["sysbench", f"--config-file={options}", "oltp_read_only", "--tables=1", "--table-size=50",
                *module.sysbench_args(engine), "prepare"]
        done = subprocess.run(argv, capture_output=True, text=True, cwd=cluster.base, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Unknown argument" not in done.stdout + done.stderr
        db = module.connect(conn)
        try:
            assert rows(db, "SELECT count(*) FROM sbtest1") == [(50,)]
            if module.FAMILY == "mariadb":
                assert rows(db, "SELECT engine FROM information_schema.tables "
                                f"WHERE table_schema = '{DATABASE}' AND table_name = 'sbtest1'") == \
                    [({"innodb": "InnoDB", "myrocks": "ROCKSDB"}[engine],)]
            for proc in psutil.process_iter(["cmdline"]):
                assert PASSWORD not in " ".join(proc.info["cmdline"] or [])
        finally:
            db.close()
        config = next(cluster.rundir.glob("*.conf")) if engine == "postgresql" else cluster.rundir / "my.cnf"
        assert stat.S_IMODE(config.stat().st_mode) == 0o644 and PASSWORD not in config.read_text()
    cluster.assert_nothing_left([handle.pid])
    logs = [*cluster.rundir.iterdir(), cluster.base / "dbsweep.log", cluster.base / "initialize.log"]
    assert [path for path in logs if path.is_file() and PASSWORD in path.read_text(errors="replace")] == []


EXPECTED_SETTINGS = {
    "mariadb": {("binlog", "off"): {"log_bin": "OFF"},
                **{("binlog", f"sync{n}"): {"log_bin": "ON", "binlog_format": "ROW", "sync_binlog": str(n)}
                   for n in (0, 1, 1000, 10000)},
                ("isolation", "RR"): {"tx_isolation": "REPEATABLE-READ"},
                ("isolation", "RC"): {"tx_isolation": "READ-COMMITTED"}},
    "postgresql": {("durability", "default"): {"fsync": "on", "checkpoint_timeout": "300"},
                   ("durability", "tuned"): {"fsync": "on", "checkpoint_timeout": "900", "random_page_cost": "1.1"},
                   ("durability", "unsafe"): {"fsync": "off", "full_page_writes": "off", "synchronous_commit": "off"},
                   ("isolation", "RR"): {"default_transaction_isolation": "repeatable read"},
                   ("isolation", "RC"): {"default_transaction_isolation": "read committed"}},
}


@pytest.mark.workflow
def test_builtin_option_sets_start(cluster):
    """Every built-in option set is accepted by the real server and takes effect."""
    module = cluster.module
    expected = EXPECTED_SETTINGS[module.FAMILY]
    checked = set()
    for axis, values in option_sets().items():
        for value, by_family in values.items():
            if module.FAMILY not in by_family:
                continue
            with cluster.server(by_family[module.FAMILY]) as handle:
                module.create_user(handle, USER, PASSWORD, DATABASE)
                settings = {row[0]: row[1] for row in module.variables(cluster.conn(handle))}
            assert {name: settings[name] for name in expected[axis, value]} == expected[axis, value], (axis, value)
            checked.add((axis, value))
    assert checked == set(expected)
    cluster.assert_nothing_left()


@pytest.mark.workflow
def test_memory_cgroup_holds_the_server(cluster):
    limit = 512 << 20
    with memory_cgroup(f"dbsweep-test-{cluster.engine}-{os.getpid()}", limit) as add:
        with cluster.server(cgroup=add) as handle:
            assert add.limit_file.read_text().strip() == str(limit)
            assert str(handle.pid) in (add.path / "cgroup.procs").read_text().split()
            assert [pid for pid in tree_pids(handle.pid) if outside(pid, add.path)] == []  # children follow
        path = add.path
    assert not path.exists()
    cluster.assert_nothing_left([handle.pid])


@pytest.mark.workflow  # starts a server (its datadir's initialize, 3-4 s an engine, is the fast tier's no more)
def test_a_starting_server_leaves_other_servers_temporary_tables_alone(cluster):
    """A starting MariaDB deletes every #sql* file in its tmpdir: with /tmp shared, a topology's second node
    (or a parallel bootstrap) deleted the first's temporary tables. Each server has a tmpdir of its own."""
    if cluster.module.FAMILY != "mariadb":
        pytest.skip("PostgreSQL keeps its temporary files in its datadir")
    planted = Path(tempfile.gettempdir()) / f"#sql-dbsweep-{os.getpid()}-{cluster.engine}.frm"
    planted.write_text("another server's temporary table\n")
    shutil.chown(planted, cluster.module.SERVICE_USER)  # /tmp is sticky: only its owner could delete it
    try:
        with cluster.server() as handle:
            pids = tree_pids(handle.pid)
        assert planted.exists()
    finally:
        planted.unlink(missing_ok=True)
    cluster.assert_nothing_left(pids)


@pytest.mark.workflow
def test_sigkill_mid_run_leaves_nothing(cluster):
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"exited \(code -9\) while the run was using it"):
        with cluster.server() as handle:
            pids = tree_pids(handle.pid)
            for child in pids[1:]:  # stopped children cannot notice their parent died: cleanup must kill them
                os.kill(child, signal.SIGSTOP)
            os.kill(handle.pid, signal.SIGKILL)
            # until it can be reaped (left for the supervisor to reap: WNOWAIT): a killed server's threads take
            # a moment to end, and /proc says zombie once its first thread has
            deadline = time.monotonic() + 30
            while os.waitid(os.P_PID, handle.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                assert time.monotonic() < deadline, "the killed server did not end"
                time.sleep(0.05)
    assert time.monotonic() - started < 60
    cluster.assert_nothing_left(pids)
    with cluster.server() as handle:  # the datadir recovers and no stale file blocks the next start
        pids = tree_pids(handle.pid)
    cluster.assert_nothing_left(pids)


def test_on_off_status_values_are_one_and_zero():
    from dbsweep.engines import mariadb
    assert [mariadb.status_number(v) for v in ("ON", "OFF", "on", "12", "0.5", "", "TLSv1.3", None)] == [
        1.0, 0.0, 1.0, 12.0, 0.5, None, None, None]


def test_engine_status_texts_from_the_clients_batch_output():
    """SHOW ENGINE ... STATUS as MariaDB 10.11's client printed it (--batch: a row a line, its line breaks
    written as \\n; tests/fixtures/engine_status_*): InnoDB's one row is its Status as it is; RocksDB's rows
    each follow a line naming their Type and Name."""
    from dbsweep.engines import mariadb
    fixtures = Path(__file__).parent / "fixtures"
    (innodb,) = mariadb.batch_rows((fixtures / "engine_status_innodb/stdout.txt").read_text())
    text = mariadb.status_text([innodb])
    assert text == innodb["Status"] and text.startswith("\n=====") and "\\n" not in text
    assert "\nBUFFER POOL AND MEMORY\n" in text
    assert text.endswith("END OF INNODB MONITOR OUTPUT\n============================\n")
    rows = mariadb.batch_rows((fixtures / "engine_status_myrocks/stdout.txt").read_text())
    assert [(row["Type"], row["Name"]) for row in rows][:5] == [
        ("STATISTICS", "rocksdb"), ("DBSTATS", "rocksdb"), ("CF_COMPACTION", "__system__"),
        ("CF_COMPACTION", "default"), ("MEMORY_STATS", "rocksdb")]
    text = mariadb.status_text(rows)
    assert text.startswith("=== STATISTICS rocksdb ===\nrocksdb.block.cache.miss COUNT : ")
    assert "=== DBSTATS rocksdb ===\n\n** DB Stats **\nUptime(secs): " in text
    assert "=== CF_COMPACTION default ===\n\n** Compaction Stats [default] **\n" in text
    assert text.count("\n=== ") == len(rows) - 1 and text.endswith("\n") and "\\n" not in text
    # the client's other escapes: a tab, a NUL, a backslash; a carriage return is not escaped
    assert mariadb.batch_rows("Type\tName\tStatus\nx\t\ta\\tb\\0c\\\\n\rd\\q\n") == [
        {"Type": "x", "Name": "", "Status": "a\tb\0c\\n\rd\\q"}]


def test_a_server_that_gave_up_without_exiting_is_killed_at_once(tmp_path):
    """A Galera joiner whose state transfer failed writes that it must abort, and may then hang in the abort
    (seen: the rejoin test waited 120 s for it to get ready and 120 s more for it to stop). The supervisor
    reads the server's own log while it waits: such a line ends the wait and the process is killed, not asked
    to stop. The server here is a real process that writes MariaDB's line and then sleeps."""
    error_log = tmp_path / "error.log"
    line = "2026-11-27  7:11:31 0 [ERROR] WSREP: ./gcs/src/gcs_group.cpp:gcs_group_handle_join_msg():1225: " \
           "Will never receive state. Need to abort."
    script = f"sleep 1; echo {shlex.quote(line)} >> {shlex.quote(str(error_log))}; exec sleep 300"
    handle = Handle(engine="innodb", port=0, socket=tmp_path / "no.sock", rundir=tmp_path, datadir=tmp_path / "data")
    launch = Launch(name="mariadbd", argv=["sh", "-c", script], user="root", drop_privileges=False,
                    ready=lambda h: False, stop_signal=signal.SIGTERM, logs=[error_log],
                    error_lines=lambda lines: lines, doomed=mariadb._gave_up)
    log = io.StringIO()
    started = time.monotonic()
    with pytest.raises(ServerExited, match=r"gave up before it accepted connections \(Will never receive state"):
        with supervise(launch, handle, log):
            pass
    assert time.monotonic() - started < 10  # not READY_TIMEOUT_S + STOP_TIMEOUT_S
    assert not psutil.pid_exists(handle.pid) or psutil.Process(handle.pid).status() == psutil.STATUS_ZOMBIE
    assert "gave up without exiting; killing its process tree" in log.getvalue()
    assert mariadb._gave_up(["[Note] WSREP: SST received", "[ERROR] WSREP: Application state transfer failed. "
                             "This is unrecoverable condition, restart required."]) == \
        "This is unrecoverable condition, restart required"
    assert mariadb._gave_up(["[Note] WSREP: Synchronized with group, ready for connections"]) is None
