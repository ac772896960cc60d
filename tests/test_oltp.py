"""The sysbench OLTP adapter against output captured from sysbench 1.0.20 with MariaDB 10.11
(InnoDB, MyRocks) and PostgreSQL 15.

The oltp_* fixtures are real runs (see capture_oltp.py there); the expected numbers below are
copied from those files as sysbench wrote them.
"""
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from dbsweep import workloads
from dbsweep.errors import ConfigError
from dbsweep.workloads import sysbench_oltp as oltp
from test_database_workflow import workdir  # noqa: F401 - servers reach it
import contextlib

FIXTURES = Path(__file__).parent / "fixtures"
USER_SCRIPT = FIXTURES / "oltp_report_default" / "read_write_report_default.lua"
RUNS = sorted(p.name for p in FIXTURES.glob("oltp_*") if p.is_dir())
needs_sysbench = pytest.mark.skipif(shutil.which("sysbench") is None, reason="sysbench not installed")


def start(name):
    return float((FIXTURES / name / "start.txt").read_text())


def stdout(name):
    return (FIXTURES / name / "stdout.txt").read_text()


def digests():
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in FIXTURES.glob("oltp_*/*") if p.is_file()}


@pytest.fixture
def config_file(tmp_path):
    """A config file as the pipeline writes it: the connection, mode 0600."""
    path = tmp_path / "sysbench.cfg"
    path.write_text("db-driver=mysql\nmysql-host=127.0.0.1\nmysql-port=3306\nmysql-user=dbsweep\n"
                    "mysql-password=s3cret-pw\nmysql-db=dbsweep\n")
    path.chmod(0o600)
    return path


def copy_with(tmp_path, name, old, new):
    """A fixture's stdout with one change, in a folder of its own."""
    text = stdout(name)
    assert old in text
    raw = tmp_path / name
    raw.mkdir()
    (raw / "stdout.txt").write_text(text.replace(old, new))
    return raw


# --- config --------------------------------------------------------------------

@pytest.mark.parametrize("key, value", [
    ("threads", 8), ("report-interval", 10), ("report_interval", 10), ("percentile", 99), ("verbosity", 0),
    ("config-file", "/etc/x.cfg"), ("config_file", "/etc/x.cfg"), ("db-driver", "pgsql"), ("mysql-host", "db1"),
    ("mysql_host", "db1"), ("mysql-port", 3307), ("mysql-socket", "/run/m.sock"), ("mysql-user", "root"),
    ("mysql-db", "test"), ("mysql-ssl", True), ("pgsql-host", "db1"), ("pgsql-port", 5433), ("pgsql-user", "pg"),
    ("pgsql-db", "test"), ("debug", True), ("db-debug", True), ("mysql-debug", True), ("report-checkpoints", "10"),
])
def test_check_refuses_keys_the_pipeline_sets(key, value):
    with pytest.raises(ConfigError) as err:
        oltp.check({"script": "oltp_read_write", key: value}, "workloads.rw.options")
    message = str(err.value)
    assert message.startswith(f"workloads.rw.options.{key}: {value!r} is set by dbsweep")
    assert "\n" not in message


@pytest.mark.parametrize("key", ["luajit-cmd", "luajit_cmd"])
def test_check_refuses_luajit_commands(key):
    """sysbench 1.1's --luajit-cmd: `v=FILE` writes LuaJIT's trace where it says."""
    with pytest.raises(ConfigError) as err:
        oltp.check({"script": "oltp_read_write", key: "v=/tmp/outside.txt"}, "w")
    assert str(err.value) == f"w.{key}: 'v=/tmp/outside.txt' runs a command; remove it"


@pytest.mark.parametrize("key", ["mysql-password", "pgsql_password"])
def test_check_names_a_password_key_but_not_its_value(key):
    with pytest.raises(ConfigError) as err:
        oltp.check({"script": "oltp_read_write", key: "hunter2"}, "w")
    assert str(err.value).startswith(f"w.{key}: '***' is set by dbsweep")
    assert "hunter2" not in str(err.value)


@pytest.mark.parametrize("key, use", [("max-time", "time"), ("max_requests", "events"), ("tx-rate", "rate"),
                                      ("num-threads", "threads")])
def test_check_refuses_deprecated_aliases(key, use):
    with pytest.raises(ConfigError, match=rf"^w\.{key}: 5 is a deprecated alias; use {use}$"):
        oltp.check({"script": "oltp_read_write", key: 5}, "w")


def test_check_refuses_a_dry_run():
    with pytest.raises(ConfigError, match=r"^w\.mysql-dry-run: True would measure no database"):
        oltp.check({"script": "oltp_read_write", "mysql-dry-run": True}, "w")


def test_check_requires_a_script():
    with pytest.raises(ConfigError, match=r"^workloads\.rw\.options\.script: missing \(one of oltp_read_write, "):
        oltp.check({"tables": 2}, "workloads.rw.options")


@pytest.mark.parametrize("script, error", [
    ("oltp_readwrite", r"'oltp_readwrite' is neither a sysbench OLTP script"),
    ("oltp_read_write.lua", r"'oltp_read_write.lua' is neither"),
    ("my/script.lua", r"'my/script.lua' is neither"),
    ("/usr/share/sysbench/oltp_common", r"'/usr/share/sysbench/oltp_common' is neither"),
    ("/nonexistent/mine.lua", r"'/nonexistent/mine.lua' does not exist"),
    (7, r"7 is neither"),
])
def test_check_script(script, error):
    with pytest.raises(ConfigError, match=rf"^w\.script: {error}"):
        oltp.check({"script": script}, "w")


def test_check_accepts_builtin_and_user_scripts():
    for script in oltp.BUILTIN:
        oltp.check({"script": script}, "w")
    oltp.check({"script": str(USER_SCRIPT), "my_own_option": 3}, "w")


def test_check_accepts_ordinary_options():
    oltp.check({"script": "oltp_read_write", "tables": 8, "table-size": 100000, "time": 60, "rate": 100,
                "histogram": True, "mysql-ignore-errors": "all", "mysql_storage_engine": "rocksdb",
                "point_selects": 5, "skip_trx": "on", "rand-type": "uniform", "events": 0, "db-ps-mode": "disable",
                "forced-shutdown": 5, "range_size": "{range}"}, "w")
    oltp.check({"script": "select_random_points", "random_points": 20}, "w")
    oltp.check({"script": "select_random_ranges", "number_of_ranges": 5, "delta": 10}, "w")


def test_check_accepts_axis_placeholders():
    oltp.check({"script": "oltp_read_write", "tables": "{tables}", "table_size": "{rows}",
                "create_secondary": "{index}"}, "w")


@pytest.mark.parametrize("options, error", [
    ({"table_sise": 100}, r"table_sise: 100 is not an option of sysbench oltp_read_write"),
    ({"random_points": 5}, r"random_points: 5 is not an option of sysbench oltp_read_write"),
    ({"tables": 0}, r"tables: 0 is not a positive integer"),
    ({"tables": "two"}, r"tables: 'two' is not a positive integer"),
    ({"table_size": -1}, r"table_size: -1 is not a whole number of rows"),
    ({"table-size": "10k"}, r"table-size: '10k' is not a whole number of rows"),
    ({"create_secondary": "maybe"}, r"create_secondary: 'maybe' is not on/off"),
    ({"histogram": "yes"}, r"histogram: 'yes' is not on/off"),
    ({"rate": None}, r"rate: None is not a single value"),
    ({"tables": [1, 2]}, r"tables: \[1, 2\] is not a single value"),
])
def test_check_refuses_bad_options(options, error):
    with pytest.raises(ConfigError) as err:
        oltp.check({"script": "oltp_read_write"} | options, "workloads.rw.options")
    assert err.match(rf"^workloads\.rw\.options\.{error}")
    assert "\n" not in str(err.value)


# --- dataset and prepare -------------------------------------------------------

def test_dataset_is_shared_by_the_builtin_scripts():
    datasets = [oltp.dataset({"script": script, "tables": 2, "table_size": 10000, "time": 30, "rate": 10,
                              "point_selects": 3, "mysql-ignore-errors": "all"})
                for script in oltp.BUILTIN]
    assert all(d == datasets[0] for d in datasets)
    assert datasets[0] == {"tables": 2, "table_size": 10000, "create_secondary": True, "auto_inc": True,
                           "secondary": False}


def test_dataset_fills_in_sysbench_defaults():
    implicit = oltp.dataset({"script": "oltp_point_select"})
    # spelled out, with dashes, as on/off strings, or as an axis placeholder leaves them (strings)
    explicit = oltp.dataset({"script": "oltp_read_only", "tables": "1", "table-size": 10000,
                             "create-secondary": "on", "auto_inc": "True", "secondary": False})
    assert implicit == explicit == {"tables": 1, "table_size": 10000, "create_secondary": True, "auto_inc": True,
                                    "secondary": False}


@pytest.mark.parametrize("change", [{"table_size": 10001}, {"tables": 2}, {"create_secondary": False},
                                    {"auto_inc": "off"}, {"secondary": True}, {"mysql_storage_engine": "rocksdb"}])
def test_dataset_changes_with_what_prepare_writes(change):
    base = {"script": "oltp_read_write", "tables": 1, "table_size": 10000}
    assert oltp.dataset(base | change) != oltp.dataset(base)


def test_dataset_engine_only_when_given():
    assert "mysql_storage_engine" not in oltp.dataset({"script": "oltp_read_write"})
    assert oltp.dataset({"script": "oltp_read_write", "mysql-storage-engine": "RocksDB"})["mysql_storage_engine"] \
        == "rocksdb"


def test_dataset_oltp_insert_without_auto_inc_starts_empty():
    # oltp_insert's own prepare sets table_size=0 then: its ids would collide with 1..table_size
    insert = oltp.dataset({"script": "oltp_insert", "auto_inc": False, "table_size": 5000})
    assert insert["table_size"] == 0
    assert insert == oltp.dataset({"script": "oltp_read_write", "auto_inc": "off", "table_size": 0})
    assert oltp.dataset({"script": "oltp_insert", "table_size": 5000})["table_size"] == 5000


def test_dataset_of_a_user_script_names_it_and_its_content(tmp_path):
    data = oltp.dataset({"script": str(USER_SCRIPT), "tables": 1, "table_size": 10, "time": 2,
                         "point_selects": 4, "my_rows": 7})
    assert data == {"script": str(USER_SCRIPT), "sha256": hashlib.sha256(USER_SCRIPT.read_bytes()).hexdigest(),
                    "tables": 1, "table_size": 10, "my_rows": 7, "prepare_threads": 1}
    # its own options may shape what it prepares; oltp_common's run options do not, and nothing of oltp_common's
    # is added to what the user wrote
    copy = tmp_path / "copy.lua"
    copy.write_bytes(USER_SCRIPT.read_bytes())
    assert oltp.dataset({"script": str(copy)})["sha256"] == data["sha256"]
    copy.write_text(USER_SCRIPT.read_text() + "-- changed\n")
    assert oltp.dataset({"script": str(copy)})["sha256"] != data["sha256"]


def test_prepare(config_file):
    argv = oltp.prepare({"script": "oltp_point_select", "tables": 4, "table_size": 1000, "time": 9}, config_file, 8)
    assert argv == [["sysbench", "oltp_read_write", f"--config-file={config_file}", "--tables=4",
                     "--table_size=1000", "--create_secondary=on", "--auto_inc=on", "--secondary=off",
                     "--threads=4", "prepare"]]  # parallel by tables: no more threads than tables


@pytest.mark.parametrize("script", ["select_random_points", "select_random_ranges", "oltp_insert"])
def test_prepare_builtin_scripts_through_oltp_common(script, config_file):
    # select_random_*'s own prepare() asserts tables == 1, but sysbench never calls it: oltp_common's
    # prepare command takes precedence (their cleanup() is the one that refuses tables > 1)
    argv = oltp.prepare({"script": script, "tables": 1}, config_file)[0]
    assert argv[1] == "oltp_read_write"
    assert argv[-2:] == ["--threads=1", "prepare"]


def test_prepare_needs_only_the_dataset(config_file):
    options = {"script": "oltp_update_index", "tables": 3, "table-size": 500, "time": 20, "index_updates": 4}
    assert oltp.prepare(oltp.dataset(options), config_file) == oltp.prepare(options, config_file)
    # what the pipeline passes: the dataset under the options
    assert oltp.prepare(oltp.dataset(options) | options, config_file) == oltp.prepare(options, config_file)
    user = {"script": str(USER_SCRIPT), "tables": 2, "my_rows": 7, "time": 5}
    argv = oltp.prepare(user, config_file)
    assert argv == oltp.prepare(oltp.dataset(user), config_file)
    assert argv[0][:3] == ["sysbench", str(USER_SCRIPT), f"--config-file={config_file}"]
    assert "--my_rows=7" in argv[0] and not [a for a in argv[0] if a.startswith(("--time", "--sha256"))]


def test_command(config_file):
    argv = oltp.command({"script": "oltp_read_write", "tables": 2, "table_size": 10000, "time": 60,
                         "skip_trx": True, "range_selects": False, "histogram": True, "rate": 50,
                         "mysql-ignore-errors": "all"}, 4, Path("/r/raw"), config_file)
    assert argv == ["sysbench", "oltp_read_write", f"--config-file={config_file}", "--threads=4",
                    "--report-interval=1", "--percentile=99", "--tables=2", "--table_size=10000", "--time=60",
                    "--skip_trx=on", "--range_selects=off", "--histogram=on", "--rate=50",
                    "--mysql-ignore-errors=all", "run"]
    assert not [a for a in argv if "s3cret" in a or "password" in a]


def test_command_time_s_overrides_time(config_file):
    options = {"script": "oltp_read_only", "time": 60, "tables": 2}
    argv = oltp.command(options, 2, Path("/r"), config_file, time_s=5)
    assert argv[-3:] == ["--time=5", "--tables=2", "run"]
    assert "--time=60" not in argv
    argv = oltp.command({"script": "oltp_read_only"}, 2, Path("/r"), config_file, time_s=5)
    assert argv[-2:] == ["--time=5", "run"]
    assert oltp.command(options, 2, Path("/r"), config_file)[-3:] == ["--time=60", "--tables=2", "run"]


def test_command_user_script_and_placeholder_booleans(config_file):
    argv = oltp.command({"script": str(USER_SCRIPT), "skip_trx": "True", "my_rows": 7}, 1, Path("/r"), config_file)
    assert argv[:3] == ["sysbench", str(USER_SCRIPT), f"--config-file={config_file}"]
    assert argv[-3:] == ["--skip_trx=on", "--my_rows=7", "run"]


@pytest.mark.parametrize("name", RUNS)
def test_fixture_commands_hold_no_password(name):
    text = (FIXTURES / name / "argv.json").read_text()
    argv = json.loads(text)
    assert argv[0] == "sysbench" and argv[2].startswith("--config-file=") and argv[-1] == "run"
    assert "password" not in text
    assert "--threads=2" in argv and "--report-interval=1" in argv
    # the 99th percentile in an open loop (--rate), the 95th otherwise
    assert ("--percentile=99" if any(a.startswith("--rate=") for a in argv) else "--percentile=95") in argv


# --- per-second rows -----------------------------------------------------------

def test_samples_read_write_innodb():
    t0 = start("oltp_read_write_innodb")
    rows = oltp.samples(FIXTURES / "oltp_read_write_innodb", t0)
    # "[ 1s ] thds: 2 tps: 829.35 qps: 16618.97 (r/w/o: 11638.88/3319.40/1660.70) lat (ms,95%): 2.86 err/s: 0.00
    #  reconn/s: 0.00" (one line)
    assert rows == [
        {"time": t0 + 1, "second": 1, "threads": 2, "tps": 829.35, "qps": 16618.97, "reads": 11638.88,
         "writes": 3319.40, "other": 1660.70, "lat_pct_ms": 2.86, "lat_p99_ms": None, "err_s": 0.00,
             "reconn_s": 0.00, "queue": None},
        {"time": t0 + 2, "second": 2, "threads": 2, "tps": 895.20, "qps": 17900.97, "reads": 12530.78,
         "writes": 3579.79, "other": 1790.40, "lat_pct_ms": 3.25, "lat_p99_ms": None, "err_s": 1.00,
             "reconn_s": 0.00, "queue": None},
    ]


def test_samples_both_interval_formats():
    # the C reporter prints "err/s: 5.99"; sysbench.report_default, which a script's report hook
    # calls, prints "err/s 13.99" (sysbench 1.0.20's src/lua/internal/sysbench.lua)
    assert "lat (ms,95%): 2.86 err/s: 5.99 reconn/s: 0.00" in stdout("oltp_errors")
    assert "lat (ms,95%): 1.73 err/s 13.99 reconn/s: 0.00" in stdout("oltp_report_default")
    c = oltp.samples(FIXTURES / "oltp_errors", start("oltp_errors"))
    lua = oltp.samples(FIXTURES / "oltp_report_default", start("oltp_report_default"))
    assert [r["err_s"] for r in c] == [5.99, 13.01]
    assert [r["err_s"] for r in lua] == [13.99, 15.00]
    assert lua[0] | {"time": 0} == {"time": 0, "second": 1, "threads": 2, "tps": 1365.94, "qps": 27565.70,
                                    "reads": 19335.06, "writes": 5482.76, "other": 2747.88, "lat_pct_ms": 1.73,
                                    "lat_p99_ms": None, "err_s": 13.99, "reconn_s": 0.00, "queue": None}
    assert set(c[0]) == set(lua[0])


def test_samples_rate_has_a_queue():
    rows = oltp.samples(FIXTURES / "oltp_point_select_rate", start("oltp_point_select_rate"))
    # "[ 1s ] queue length: 0, concurrency: 0" follows each interval line with --rate
    assert [(r["second"], r["tps"], r["queue"]) for r in rows] == [(1, 47.93, 0), (2, 37.03, 0)]
    # an open loop asks for the 99th percentile
    assert [(r["lat_pct_ms"], r["lat_p99_ms"]) for r in rows] == [(None, 0.50), (None, 3.96)]


def test_samples_and_summary_of_an_overloaded_open_loop():
    """5000 arrivals/s against 2 threads doing about 450 tps: the queue grows every second, and the
    latency, measured from arrival, grows with it (its minimum is far above one transaction)."""
    rows = oltp.samples(FIXTURES / "oltp_read_write_overload", 0.0)
    assert [(r["second"], r["tps"], r["queue"], r["lat_p99_ms"]) for r in rows] == [
        (1, 390.46, 4380, 909.80), (2, 510.37, 8884, 1771.29), (3, 472.01, 13388, 2680.11)]
    s = oltp.summary(FIXTURES / "oltp_read_write_overload")
    assert (s["events"], s["time_s"], s["lat_pct_ms"], s["lat_p99_ms"], s["lat_min_ms"]) == (
        1375, 3.0055, None, 2680.11, 259.41)


def test_samples_rate_queue_values(tmp_path):
    raw = copy_with(tmp_path, "oltp_point_select_rate", "[ 2s ] queue length: 0, concurrency: 0",
                    "[ 2s ] queue length: 17, concurrency: 2")
    assert [r["queue"] for r in oltp.samples(raw, 0.0)] == [0, 17]


def test_samples_pgsql_point_select():
    rows = oltp.samples(FIXTURES / "oltp_point_select_pgsql", start("oltp_point_select_pgsql"))
    # one thread had already stopped when the last line was printed
    assert [(r["threads"], r["tps"], r["qps"], r["reads"], r["lat_pct_ms"]) for r in rows] == [
        (2, 49061.92, 49061.92, 49061.92, 0.06), (1, 51005.28, 51005.28, 51005.28, 0.05)]


def test_samples_idle_interval_has_no_latency(tmp_path):
    line = "[ 2s ] thds: 2 tps: 895.20 qps: 17900.97 (r/w/o: 12530.78/3579.79/1790.40) lat (ms,95%): 3.25 err/s: 1.00"
    idle = "[ 2s ] thds: 2 tps: 0.00 qps: 0.00 (r/w/o: 0.00/0.00/0.00) lat (ms,95%): 0.00 err/s: 0.00"
    rows = oltp.samples(copy_with(tmp_path, "oltp_read_write_innodb", line, idle), 0.0)
    assert rows[1]["tps"] == 0 and rows[1]["lat_pct_ms"] is None
    assert rows[0]["lat_pct_ms"] == 2.86


def test_samples_refuse_other_lines_and_percentiles(tmp_path):
    raw = copy_with(tmp_path, "oltp_read_write_innodb", "[ 1s ] thds: 2 tps: 829.35 qps: 16618.97 (r/w/o: 11638.88/"
                    "3319.40/1660.70) lat (ms,95%)", "[ 1s ] thds: 2 tps: 829.35 qps: 16618.97 (r/w/o: 11638.88/"
                    "3319.40/1660.70) lat (ms,90%)")
    with pytest.raises(ValueError, match="90th percentile"):
        oltp.samples(raw, 0.0)
    raw = copy_with(tmp_path, "oltp_errors", "[ 2s ] thds: 2 tps:", "[ 2s ] thds: 2 eps:")
    with pytest.raises(ValueError, match="not a sysbench OLTP interval line: '\\[ 2s \\] thds: 2 eps:"):
        oltp.samples(raw, 0.0)
    raw = copy_with(tmp_path, "oltp_report_default", "[ 2s ] thds", "[ 1s ] thds")
    with pytest.raises(ValueError, match=r"not in increasing seconds: \[1, 1\]"):
        oltp.samples(raw, 0.0)


def test_samples_refuse_a_queue_line_without_its_interval(tmp_path):
    raw = copy_with(tmp_path, "oltp_point_select_rate", "[ 2s ] queue length", "[ 3s ] queue length")
    with pytest.raises(ValueError, match="queue line without its interval line"):
        oltp.samples(raw, 0.0)


def test_samples_and_summary_read_another_stdout(tmp_path):
    shutil.copyfile(FIXTURES / "oltp_errors" / "stdout.txt", tmp_path / "warmup.stdout.txt")
    assert len(oltp.samples(tmp_path, 0.0, stdout="warmup.stdout.txt")) == 2
    assert oltp.summary(tmp_path, stdout="warmup.stdout.txt")["transactions"] == 1998
    with pytest.raises(ValueError, match="stdout.txt: missing"):
        oltp.samples(tmp_path, 0.0)


# --- final report --------------------------------------------------------------

def test_summary_read_write_innodb():
    assert oltp.summary(FIXTURES / "oltp_read_write_innodb") == {
        "transactions": 1726, "tps": 862.02, "queries": 34536, "qps": 17248.43,
        "reads": 24178, "writes": 6905, "other": 3453, "ignored_errors": 1, "reconnects": 0,
        "lat_min_ms": 1.47, "lat_mean_ms": 2.32, "lat_pct_ms": 3.02, "lat_p99_ms": None, "lat_max_ms": 9.54,
        "lat_sum_ms": 3999.14,
        "time_s": 2.0019, "events": 1726,
    }


def test_summary_point_select_pgsql_seven_digit_counts():
    # "transactions:                        100196 (50016.54 per sec.)": one space once the count fills %-6lu
    s = oltp.summary(FIXTURES / "oltp_point_select_pgsql")
    assert (s["transactions"], s["tps"], s["queries"], s["qps"]) == (100196, 50016.54, 100196, 50016.54)
    assert (s["reads"], s["writes"], s["other"], s["events"]) == (100196, 0, 0, 100196)
    assert (s["lat_min_ms"], s["lat_mean_ms"], s["lat_pct_ms"], s["lat_max_ms"]) == (0.04, 0.04, 0.05, 1.24)


def test_summary_myrocks():
    assert (FIXTURES / "oltp_read_write_rocksdb" / "server.txt").read_text().splitlines()[1:] == [
        "sbtest1 ROCKSDB", "sbtest2 ROCKSDB"]
    argv = json.loads((FIXTURES / "oltp_read_write_rocksdb" / "argv.json").read_text())
    assert argv[3] == "--mysql_storage_engine=rocksdb"  # copied from the config file
    # sysbench's complaint about that line of the config file, without a newline, then its header
    assert stdout("oltp_read_write_rocksdb").startswith("Unknown argument type: 0sysbench 1.0.20 (using")
    s = oltp.summary(FIXTURES / "oltp_read_write_rocksdb")
    assert (s["transactions"], s["tps"], s["ignored_errors"], s["lat_pct_ms"]) == (1289, 643.28, 42, 4.10)


def test_summary_counts_ignored_errors():
    s = oltp.summary(FIXTURES / "oltp_errors")
    assert (s["transactions"], s["ignored_errors"], s["other"]) == (1998, 19, 4015)
    # each ignored error cost a ROLLBACK, counted as "other" beside each transaction's BEGIN and COMMIT
    assert s["other"] == 2 * s["transactions"] + s["ignored_errors"]
    rows = oltp.samples(FIXTURES / "oltp_errors", 0.0)
    assert sum(r["err_s"] for r in rows) == pytest.approx(19, abs=0.1)


def test_summary_pgsql_deadlocks_are_ignored_without_being_asked():
    # no --pgsql-ignore-errors: the pgsql driver ignores deadlocks itself, each one after
    # PostgreSQL's deadlock_timeout (1 s), which also stretched the 2 s run
    s = oltp.summary(FIXTURES / "oltp_errors_pgsql")
    assert (s["ignored_errors"], s["lat_max_ms"], s["time_s"], s["tps"]) == (6, 1002.52, 2.2599, 1030.39)
    assert [r["err_s"] for r in oltp.samples(FIXTURES / "oltp_errors_pgsql", 0.0)] == [4.00, 1.00]


def test_summary_rate():
    s = oltp.summary(FIXTURES / "oltp_point_select_rate")
    assert (s["transactions"], s["tps"], s["lat_sum_ms"], s["time_s"]) == (85, 41.18, 43.18, 2.0635)


def test_killed_run():
    raw = FIXTURES / "oltp_killed"
    assert json.loads((raw / "argv.json").read_text())[-2] == "--time=30"
    # the per-second lines up to the kill are real and parse ...
    assert [r["tps"] for r in oltp.samples(raw, start("oltp_killed"))] == [942.26, 942.27]
    # ... but there is no final report to summarise
    with pytest.raises(ValueError, match="no final report"):
        oltp.summary(raw)


def test_fatal_run():
    raw = FIXTURES / "oltp_fatal"
    # --mysql-ignore-errors=none: the first deadlock stops sysbench (exit 1) before any report
    with pytest.raises(ValueError, match=r"sysbench reported an error: FATAL: mysql_stmt_execute\(\) returned "
                                         r"error 1213 \(Deadlock found"):
        oltp.summary(raw)
    with pytest.raises(ValueError, match="no per-second lines"):
        oltp.samples(raw, start("oltp_fatal"))


def test_summary_refuses_a_report_after_a_fatal_error(tmp_path):
    # e.g. --forced-shutdown: sysbench prints FATAL, then a report of the unfinished run
    raw = copy_with(tmp_path, "oltp_read_write_innodb", "SQL statistics:",
                    "FATAL: The --max-time limit has expired, forcing shutdown...\nSQL statistics:")
    with pytest.raises(ValueError, match="FATAL: The --max-time limit has expired"):
        oltp.summary(raw)


@pytest.mark.parametrize("cut_at", ["Threads fairness:", "    execution time", "Latency (ms):", "General statistics:"])
def test_summary_refuses_a_cut_report(tmp_path, cut_at):
    text = stdout("oltp_read_write_innodb")
    (tmp_path / "stdout.txt").write_text(text[: text.index(cut_at)])
    with pytest.raises(ValueError, match="no final report"):
        oltp.summary(tmp_path)


def test_summary_refuses_counts_that_do_not_add_up(tmp_path):
    raw = copy_with(tmp_path, "oltp_read_write_innodb", "        write:                           6905",
                    "        write:                           6906")
    with pytest.raises(ValueError, match="query counts do not add up"):
        oltp.summary(raw)


def test_summary_missing_stdout(tmp_path):
    with pytest.raises(ValueError, match="missing"):
        oltp.summary(tmp_path)


# --- histogram -----------------------------------------------------------------

def test_histogram():
    raw = FIXTURES / "oltp_read_only_histogram"
    rows = oltp.histogram(raw)
    assert len(rows) == 36
    assert rows[:3] == [(1.082, 1338), (1.102, 1386), (1.122, 643)]
    assert rows[-1] == (5.090, 1)
    # over the whole run: the counts add up to its events
    assert sum(n for _, n in rows) == oltp.summary(raw)["events"] == 3588
    assert [ms for ms, _ in rows] == sorted(ms for ms, _ in rows)
    assert [r["tps"] for r in oltp.samples(raw, start("oltp_read_only_histogram"))] == [1776.71, 1808.86]


def test_percentiles_from_the_histogram():
    raw = FIXTURES / "oltp_read_only_histogram"
    pct = oltp.percentiles(raw)
    assert len(pct) == 36
    assert pct[0] == (100 * 1338 / 3588, 1.082)
    assert pct[1] == (100 * (1338 + 1386) / 3588, 1.102)
    assert pct[-1] == (100.0, 5.090)
    assert [p for p, _ in pct] == sorted(p for p, _ in pct)
    assert oltp.percentiles(FIXTURES / "oltp_read_write_innodb") == []


def test_histogram_absent():
    assert oltp.histogram(FIXTURES / "oltp_read_write_innodb") == []
    assert oltp.histogram(FIXTURES / "oltp_killed") == []


def test_histogram_cut(tmp_path):
    text = stdout("oltp_read_only_histogram")
    (tmp_path / "stdout.txt").write_text(text[: text.index("       2.032 |")])
    with pytest.raises(ValueError, match="histogram cut off after 29 rows"):
        oltp.histogram(tmp_path)


# --- module --------------------------------------------------------------------

def test_parsing_leaves_raw_output_untouched():
    before = digests()
    for name in RUNS:
        for parse in (lambda raw, name=name: oltp.samples(raw, start(name)), oltp.summary, oltp.histogram):
            with contextlib.suppress(ValueError):
                parse(FIXTURES / name)
    assert digests() == before


@pytest.mark.parametrize("name", RUNS)
def test_fixtures_are_small_and_complete(name):
    for file in ("stdout.txt", "stderr.txt", "start.txt", "argv.json"):
        assert (FIXTURES / name / file).stat().st_size < 20_000
    # the MyRocks run's stdout starts with "Unknown argument type: 0" (see test_summary_myrocks)
    assert stdout(name).removeprefix("Unknown argument type: 0").startswith("sysbench 1.0.20 ")


def test_module_contract():
    declared = workloads.get("sysbench")
    assert declared is oltp.WORKLOAD and declared.database and declared.takes_rate
    assert (declared.samples, declared.percentiles, declared.client) == (oltp.samples, oltp.percentiles, oltp.client)


@needs_sysbench
def test_version():
    assert oltp.version().startswith("sysbench 1.")


def test_open_loop_summary_marks_a_run_short_of_its_rate():
    from dbsweep.collect import open_loop

    def judge(name, target):
        raw = FIXTURES / name
        return open_loop(target, oltp.summary(raw), oltp.samples(raw, 0.0))

    over = judge("oltp_read_write_overload", 5000)
    assert over == {"rate": 5000, "rate_achieved": pytest.approx(1375 / 3.0055), "queue_max": 13388,
                    "queue_end": 13388, "rate_short": 1}
    # 85 arrivals in 2.06 s at 50/s is 17% below the target, yet within 3 sd of Poisson arrivals
    # (sysbench draws exponential gaps), and the queue stayed empty: not short
    kept = judge("oltp_point_select_rate", 50)
    assert (kept["rate_achieved"], kept["queue_end"], kept["rate_short"]) == (pytest.approx(85 / 2.0635), 0, 0)
    # the same run judged against a rate 4 times higher falls short
    assert judge("oltp_point_select_rate", 200)["rate_short"] == 1


# --- a user's own script gets only the user's options -----------------------------------------

KV = FIXTURES / "lua" / "kv.lua"  # declares rows and reads, none of oltp_common's options


def kv_study(engines=("innodb", "postgresql"), **workload) -> dict:
    return {
        "study": "kv",
        "axes": {"engine": list(engines), "memory": ["64M"], "filesystem": ["ext4"], "threads": [2],
                 "workload": ["kv"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "512M"}},
        "workloads": {"kv": {"tool": "sysbench", "options": {"script": str(KV), "rows": 50, "reads": 2, "time": 2}}
                      | workload},
    }


def test_user_script_prepare_gets_only_its_declared_dataset_options(config_file):
    from dbsweep.config import load
    study = load(kv_study(dataset_options=["rows"], prepare_threads=2))
    data = study.recipe(study.cells[0]).dataset
    assert data == {"script": str(KV), "sha256": hashlib.sha256(KV.read_bytes()).hexdigest(), "rows": 50,
                    "prepare_threads": 2}
    assert oltp.prepare(data, config_file) == [
        ["sysbench", str(KV), f"--config-file={config_file}", "--rows=50", "--threads=2", "prepare"]]
    # reads shapes only the run: another value shares the image
    other = load(kv_study(dataset_options=["rows"], prepare_threads=2) | {"workloads": {"kv": {
        "tool": "sysbench", "dataset_options": ["rows"], "prepare_threads": 2,
        "options": {"script": str(KV), "rows": 50, "reads": 9, "time": 2}}}})
    assert other.image(other.cells[0]) == study.image(study.cells[0])
    argv = oltp.command(study.recipe(study.cells[0]).options, 2, Path("/r"), config_file)
    assert [a for a in argv if a.startswith("--") and not a.startswith(("--config-file", "--threads", "--report",
                                                                         "--percentile"))] == [
        "--rows=50", "--reads=2", "--time=2"]


def test_user_script_without_declaration_prepares_with_all_its_options(config_file):
    data = oltp.dataset({"script": str(KV), "rows": 50, "reads": 2, "time": 2})
    assert oltp.prepare(data, config_file)[0][3:] == ["--rows=50", "--reads=2", "--threads=1", "prepare"]


@pytest.mark.parametrize("workload, message", [
    ({"dataset_options": ["size"]}, r"^workloads\.kv\.dataset_options\[0\]: 'size' is not one of the script's "
                                    r"options given under options \(rows, reads\)$"),
    ({"prepare_threads": 0}, r"^workloads\.kv\.prepare_threads: 0 is below the minimum of 1$"),
])
def test_user_script_settings_are_checked(workload, message):
    from dbsweep.config import load
    with pytest.raises(ConfigError, match=message):
        load(kv_study(**workload))


def test_settings_only_for_a_script_of_ones_own():
    from dbsweep.config import load
    config = kv_study()
    config["workloads"]["kv"] = {"tool": "sysbench", "prepare_threads": 2,
                                 "options": {"script": "oltp_read_only", "time": 2}}
    with pytest.raises(ConfigError, match=r"^workloads\.kv\.prepare_threads: 2 is for a script of your own"):
        load(config)
    config["workloads"]["kv"] = {"tool": "fio", "dataset_options": ["size"], "options": {"size": "1M"}}
    with pytest.raises(ConfigError, match=r"^workloads\.kv\.dataset_options: \['size'\]: the fio workload does not "
                                          r"take dataset_options"):
        load(config)


@pytest.mark.workflow
def test_user_script_runs_on_mariadb_and_postgresql(study_factory, workdir):  # noqa: F811
    """sysbench 1.0.20 refuses options a script does not declare ("invalid option: --tables=1"): the script
    gets what the user wrote, and the connection."""
    import csv
    import gzip
    study = study_factory(kv_study(dataset_options=["rows"]))
    study.run("--until", "aggregate")
    with gzip.open(study.path("results/tables/summary.csv.gz"), "rt") as f:
        summary = {r["engine"]: r for r in csv.DictReader(f)}
    assert set(summary) == {"innodb", "postgresql"}
    for engine, r in summary.items():
        assert float(r["qps"]) > 0 and float(r["transactions"]) > 0, engine
    for run in study.path("results/runs").rglob("run.json"):
        for argv in json.loads(run.read_text())["commands"]:
            if argv[0] == "sysbench":
                assert not [a for a in argv if a.startswith(("--tables", "--table_size", "--mysql-storage-engine"))]


def test_the_statements_whose_plans_are_kept_are_those_the_script_runs():
    """oltp_common.lua's statements each built-in script runs, without those its options turn off (a count of
    0, range_selects off); none for a user's own script, whose statements are not known."""
    from dbsweep.workloads import sysbench_oltp
    assert list(sysbench_oltp.statements({"script": "oltp_read_write"})) == [
        "point_select", "simple_range", "sum_range", "order_range", "distinct_range", "index_update",
        "non_index_update", "delete", "insert"]
    read_only = sysbench_oltp.statements({"script": "oltp_read_only", "range_size": 10, "sum_ranges": 0})
    assert read_only["order_range"] == "SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 10 ORDER BY c"
    assert "sum_range" not in read_only
    assert list(sysbench_oltp.statements({"script": "oltp_read_only", "range_selects": "off"})) == ["point_select"]
    assert sysbench_oltp.statements({"script": "/home/me/my.lua"}) == {}
    assert sysbench_oltp.statements({"script": "select_random_points"}) == {}
