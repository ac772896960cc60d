"""Declared vs delivered (dbsweep/delivered.py): each setting kind's check, given what ran, with a planted
mismatch that it must call deviated, and the readings it must not call equal."""
import gzip
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from dbsweep import delivered, storage
from dbsweep.delivered import DEVIATED, EQUAL, NOT_READ, WITHIN
from dbsweep.recipe import Recipe

MB = 1 << 20


def recipe(**kw) -> Recipe:
    base = {"tool": "sysbench", "options": {}, "threads": 4, "filesystem": {"type": "ext4"}, "dataset": {},
            "duration_s": 5, "engine": "innodb", "memory": "256M", "server_options": {}}
    return Recipe(**(base | kw))


def verdicts(checks) -> dict:
    return {(c.kind, c.key): c.verdict for c in checks}


def server(tmp_path: Path, rows: list[tuple], **kw):
    (tmp_path / "variables.tsv").write_text("".join("\t".join(map(str, r)) + "\n" for r in rows))
    return verdicts(delivered.server_settings(recipe(**kw), tmp_path / "variables.tsv"))


# --- server options and memory ---------------------------------------------------------------------------

def test_mariadb_options_compare_sizes_flags_and_file_names_in_the_variables_terms(tmp_path):
    got = server(tmp_path, [("innodb_buffer_pool_size", 256 * MB), ("log_bin", "ON"), ("sync_binlog", 1),
                            ("innodb_flush_method", "O_DIRECT"), ("tx_isolation", "READ-COMMITTED"),
                            ("innodb_log_file_size", 64 * MB), ("general_log_file", "/x/data/general.log"),
                            ("optimizer_switch", "index_merge=off,index_merge_union=on,mrr=off")],
                 server_options={"log_bin": "binlog", "sync-binlog": 1, "innodb_flush_method": "o_direct",
                                 "transaction-isolation": "READ-COMMITTED", "innodb_log_file_size": "64M",
                                 "general_log_file": "general.log", "optimizer_switch": "mrr=off,index_merge=off"})
    assert set(got.values()) == {EQUAL}, got
    assert got[("memory", "innodb_buffer_pool_size")] == EQUAL


def test_a_mariadb_option_the_server_ran_otherwise_is_deviated(tmp_path):
    got = server(tmp_path, [("innodb_buffer_pool_size", 256 * MB), ("sync_binlog", 0), ("log_bin", "ON"),
                            ("optimizer_switch", "index_merge=on,mrr=off")],
                 server_options={"sync_binlog": 1, "skip-log-bin": True, "optimizer_switch": "index_merge=off"})
    assert got[("server option", "sync_binlog")] == DEVIATED
    assert got[("server option", "skip-log-bin")] == DEVIATED  # the binary log was on after all
    assert got[("server option", "optimizer_switch")] == DEVIATED


def test_a_loose_option_the_server_does_not_have_is_deviated_and_a_known_non_variable_is_not_read(tmp_path):
    if delivered.settings.family("innodb").known("sync_binlog") is None:
        pytest.skip("mariadbd is not installed: its options cannot be listed")
    got = server(tmp_path, [("innodb_buffer_pool_size", 256 * MB)],
                 server_options={"loose-no_such_option_here": 1, "plugin-load-add": "ha_example.so"})
    assert got[("server option", "loose-no_such_option_here")] == DEVIATED
    assert got[("server option", "plugin-load-add")] == NOT_READ


def test_a_buffer_pool_rounded_up_to_its_chunk_is_within_tolerance_and_one_far_off_is_deviated(tmp_path):
    assert server(tmp_path, [("innodb_buffer_pool_size", 24 * MB)], memory="16M")[
        ("memory", "innodb_buffer_pool_size")] == WITHIN
    assert server(tmp_path, [("innodb_buffer_pool_size", 128 * MB)], memory="100M")[
        ("memory", "innodb_buffer_pool_size")] == DEVIATED
    assert server(tmp_path, [("innodb_buffer_pool_size", 8 * MB)], memory="16M")[
        ("memory", "innodb_buffer_pool_size")] == DEVIATED  # less than declared is never tolerated


def test_postgresql_settings_compare_through_pg_settings_units(tmp_path):
    rows = [("shared_buffers", 32768, "8kB"), ("checkpoint_timeout", 900, "s"), ("wal_buffers", 2048, "8kB"),
            ("max_wal_size", 2048, "MB"), ("synchronous_commit", "off", ""),
            ("checkpoint_completion_target", "0.9", ""), ("work_mem", 4096, "kB"),
            ("default_transaction_isolation", "repeatable read", "")]
    got = server(tmp_path, rows, engine="postgresql",
                 server_options={"checkpoint_timeout": "15min", "wal_buffers": "16MB", "max_wal_size": "2GB",
                                 "synchronous_commit": False, "checkpoint_completion_target": 0.9,
                                 "work_mem": 4096, "default_transaction_isolation": "repeatable read"})
    assert set(got.values()) == {EQUAL}, got
    got = server(tmp_path, [("shared_buffers", 16384, "8kB"), ("checkpoint_timeout", 300, "s")],
                 engine="postgresql", server_options={"checkpoint_timeout": "15min"})
    assert got == {("memory", "shared_buffers"): DEVIATED, ("server option", "checkpoint_timeout"): DEVIATED}


def test_postgresql_s_wal_compression_on_is_the_pglz_it_shows_and_another_method_is_deviated(tmp_path):
    """PostgreSQL 15 shows `wal_compression = on` as pglz (variables.tsv of a 2026-11-28 gallery run: the
    row `wal_compression<TAB>pglz<TAB>`); before 15 it shows on."""
    for declared, shown in (("on", "pglz"), (True, "pglz"), ("pglz", "pglz"), ("on", "on"), ("pglz", "on")):
        got = server(tmp_path, [("wal_compression", shown, "")], engine="postgresql", memory=None,
                     server_options={"wal_compression": declared})
        assert got == {("server option", "wal_compression"): EQUAL}, (declared, shown)
    for declared, shown in (("on", "lz4"), ("off", "pglz"), ("lz4", "pglz")):
        got = server(tmp_path, [("wal_compression", shown, "")], engine="postgresql", memory=None,
                     server_options={"wal_compression": declared})
        assert got == {("server option", "wal_compression"): DEVIATED}, (declared, shown)


def test_no_variables_file_gives_no_server_checks(tmp_path):
    assert delivered.server_settings(recipe(), tmp_path / "variables.tsv") == []


def test_a_value_comparison_is_not_fooled_by_case_order_or_number_spelling():
    assert delivered.same("ROW", "row") == EQUAL
    assert delivered.same("1", "1.000") == EQUAL
    assert delivered.same("ON", "1") == EQUAL
    assert delivered.same("a,b", "b,a") == EQUAL
    assert delivered.same("10", "100") == DEVIATED
    assert delivered.same("x=on", "x=off,y=on") == DEVIATED
    assert delivered.same("latin1", "utf8mb4") == DEVIATED


def write_facts(tmp_path: Path, facts: dict) -> Path:
    (tmp_path / "dataset.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in facts.items()))
    return tmp_path / "dataset.tsv"


def dataset_checks(tmp_path: Path, facts: dict, **kw) -> dict:
    return verdicts(delivered.dataset(recipe(**kw), write_facts(tmp_path, facts)))


MARIADB_FACTS = {"schema.charset": "latin1", "schema.collation": "latin1_swedish_ci", "innodb_page_size": "8192",
                 "lower_case_table_names": "0", "table.sbtest1.engine": "InnoDB",
                 "table.sbtest1.collation": "latin1_swedish_ci", "table.sbtest1.rows": "1987",
                 "table.sbtest1.indexes": "2", "table.sbtest2.engine": "InnoDB",
                 "table.sbtest2.collation": "latin1_swedish_ci", "table.sbtest2.rows": "2000",
                 "table.sbtest2.indexes": "2"}


def test_the_dataset_s_tables_carry_the_declared_charset_page_size_engine_tables_and_rows(tmp_path):
    got = dataset_checks(tmp_path, MARIADB_FACTS, dataset={"tables": 2, "table_size": 2000},
                         server_options={"character-set-server": "latin1", "innodb_page_size": "8k"})
    assert got == {("dataset", "engine"): EQUAL, ("dataset", "character_set_server"): EQUAL,
                   ("dataset", "innodb_page_size"): EQUAL, ("dataset", "tables"): EQUAL,
                   ("dataset", "sbtest1 rows"): WITHIN, ("dataset", "sbtest2 rows"): EQUAL}


def test_a_tpcc_dataset_s_tables_are_its_sets_of_nine(tmp_path):
    """tpcc's `tables` counts sets of nine tables: 2 sets are 18 tables (a gallery run's catalog, 2 sets x 2
    warehouses on InnoDB); every tpcc cell was deviated, and so left out of every comparison, before."""
    catalog = ROOT / "tests" / "fixtures" / "tpcc_innodb" / "dataset.tsv"
    facts = dict(line.split("\t", 1) for line in catalog.read_text().splitlines())
    tpcc = {"tool": "tpcc", "dataset": {"tables": 2, "scale": 2, "foreign_keys": False}}
    checks = delivered.dataset(recipe(**tpcc), write_facts(tmp_path, facts))
    assert [(c.declared, c.delivered, c.verdict) for c in checks if c.key == "tables"] == [("18", "18", EQUAL)]
    one_set_short = {k: v for k, v in facts.items() if not k.startswith("table.stock2.")}
    assert dataset_checks(tmp_path, one_set_short, **tpcc)[("dataset", "tables")] == DEVIATED
    assert dataset_checks(tmp_path, facts, tool="tpcc", dataset={"tables": 3, "scale": 2})[("dataset", "tables")] == \
        DEVIATED


def test_a_latin1_cell_measuring_utf8mb4_tables_is_deviated(tmp_path):
    """The issue's case: one image for both cells, so the latin1 cell's tables were utf8mb4."""
    facts = {k: v.replace("latin1_swedish_ci", "utf8mb4_general_ci").replace("latin1", "utf8mb4")
             for k, v in MARIADB_FACTS.items()}
    got = dataset_checks(tmp_path, facts, engine="myrocks", dataset={"tables": 3, "table_size": 9000},
                         server_options={"character_set_server": "latin1", "collation-server": "latin1_swedish_ci"})
    assert got == {("dataset", "engine"): DEVIATED, ("dataset", "character_set_server"): DEVIATED,
                   ("dataset", "collation_server"): DEVIATED, ("dataset", "tables"): DEVIATED,
                   ("dataset", "sbtest1 rows"): DEVIATED, ("dataset", "sbtest2 rows"): DEVIATED}


def test_postgresql_s_initdb_settings_against_its_database(tmp_path):
    facts = {"database.encoding": "UTF8", "database.collate": "C", "database.ctype": "C",
             "data_checksums": "off", "wal_segment_size": "16MB", "table.sbtest1.rows": "-1"}
    got = dataset_checks(tmp_path, facts, engine="postgresql", dataset={"tables": 1, "table_size": 100},
                         server_options={"server_encoding": "utf8", "lc_collate": "POSIX", "data_checksums": "on",
                                         "wal_segment_size": 32})
    assert got == {("dataset", "server_encoding"): EQUAL, ("dataset", "lc_collate"): EQUAL,
                   ("dataset", "data_checksums"): DEVIATED, ("dataset", "wal_segment_size"): DEVIATED,
                   ("dataset", "tables"): EQUAL, ("dataset", "sbtest1 rows"): NOT_READ}  # never analyzed: -1


def test_a_session_setting_the_session_did_not_run_with_is_deviated(tmp_path):
    (tmp_path / "session.tsv").write_text("optimizer_switch\tindex_merge=on,mrr=off,join_cache_hashed=on\n"
                                          "join_cache_level\t2\n")
    got = verdicts(delivered.session(recipe(options={"session.optimizer_switch": "mrr=off", "session.join_cache_level":
                                                     4, "session.sort_buffer_size": "1M", "query": "q.sql"}),
                                     tmp_path / "session.tsv"))
    assert got == {("session setting", "optimizer_switch"): EQUAL, ("session setting", "join_cache_level"): DEVIATED,
                   ("session setting", "sort_buffer_size"): NOT_READ}
    (tmp_path / "session.tsv").write_text("work_mem\t64MB\nenable_hashjoin\toff\n")
    got = verdicts(delivered.session(recipe(engine="postgresql", options={"session.work_mem": "64MB",
                                                                          "session.enable_hashjoin": False}),
                                     tmp_path / "session.tsv"))
    assert got == {("session setting", "work_mem"): EQUAL, ("session setting", "enable_hashjoin"): EQUAL}
    assert delivered.session(recipe(), tmp_path / "none.tsv") == []


# --- version, memory cap ---------------------------------------------------------------------------------

def test_the_server_version_is_a_prefix_match_on_whole_components():
    assert verdicts(delivered.version("10.6", "10.6.21-MariaDB")) == {("server version", "version"): EQUAL}
    assert verdicts(delivered.version("10.1", "10.11.19-MariaDB-0+deb12u1")) == {
        ("server version", "version"): DEVIATED}
    assert delivered.version("debian", "10.11.19") == [] and delivered.version(None, "16.4") == []


def test_a_memory_cap_rewritten_during_the_window_is_deviated_and_a_missing_reading_not_read():
    cap = 320 * MB
    got = verdicts(delivered.memory_cap(cap, {"primary": {"start": cap, "end": cap - 4096 * 1000}}))
    assert got == {("memory cap", "memory_limit (window start)"): EQUAL,
                   ("memory cap", "memory_limit (window end)"): DEVIATED}
    assert verdicts(delivered.memory_cap(cap, None)) == {("memory cap", "memory_limit"): NOT_READ}
    assert delivered.memory_cap(None, {"primary": {"start": 1}}) == []


# --- filesystem -------------------------------------------------------------------------------------------

def test_filesystem_type_and_mount_options_against_proc_mounts():
    spec = {"type": "ext4", "mount_options": ["noatime", "data=writeback", "barrier=1"], "mkfs_options": []}
    facts = {"fstype": "xfs", "mount_options": "rw,noatime,data=ordered"}
    assert verdicts(delivered.filesystem(spec, facts)) == {
        ("filesystem", "type"): DEVIATED, ("mount option", "noatime"): EQUAL,
        ("mount option", "data"): DEVIATED, ("mount option", "barrier"): NOT_READ}
    tmpfs = delivered.filesystem({"type": "tmpfs", "size": "1G", "mount_options": []},
                                 {"fstype": "tmpfs", "mount_options": "rw,relatime,size=524288k"})
    assert verdicts(tmpfs)[("mount option", "size")] == DEVIATED
    assert delivered.filesystem({"type": "dir", "path": "/x"}, {"fstype": "ext4"}) == []


def test_mkfs_options_against_a_real_ext4_superblock(tmp_path):
    image = tmp_path / "fs.img"
    image.write_bytes(b"")
    subprocess.run(["truncate", "-s", "16M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-b", "1024", "-O", "^has_journal", str(image)], check=True)
    block = storage.superblock("ext4", str(image), tmp_path)
    assert block["block_size"] == "1024" and "feature has_journal" not in block
    assert verdicts(delivered.mkfs("ext4", ["-b", "1024", "-O", "^has_journal,extent", "-E", "x=1"], block)) == {
        ("mkfs option", "block_size"): EQUAL, ("mkfs option", "feature has_journal"): EQUAL,
        ("mkfs option", "feature extent"): EQUAL, ("mkfs option", "-E"): NOT_READ}
    planted = verdicts(delivered.mkfs("ext4", ["-b4096", "-O", "has_journal"], block))
    assert planted == {("mkfs option", "block_size"): DEVIATED, ("mkfs option", "feature has_journal"): DEVIATED}


def test_mkfs_options_against_a_real_xfs_superblock(tmp_path):
    image = tmp_path / "fs.img"
    subprocess.run(["truncate", "-s", "320M", str(image)], check=True)
    subprocess.run(["mkfs.xfs", "-q", "-f", "-m", "crc=1,reflink=0", str(image)], check=True)
    block = storage.superblock("xfs", "", image)
    assert block["block_size"] == "4096" and block["feature reflink"] == "off"
    assert verdicts(delivered.mkfs("xfs", ["-m", "crc=1,reflink=0", "-b", "size=4096"], block)) == {
        ("mkfs option", "feature crc"): EQUAL, ("mkfs option", "feature reflink"): EQUAL,
        ("mkfs option", "block_size"): EQUAL}
    assert verdicts(delivered.mkfs("xfs", ["-m", "reflink=1"], block)) == {
        ("mkfs option", "feature reflink"): DEVIATED}


def test_a_device_class_rule_changed_during_the_repetition_is_deviated():
    facts = {"name": "hdd", "declared": {"read_iops": 150, "write_iops": 150},
             "delivered": {"read_iops": 150, "write_iops": 150}, "delivered_at_end": {"read_iops": 150}}
    got = verdicts(delivered.device_class({"name": "hdd", "read_iops": 150, "write_iops": 150}, facts))
    assert got == {("device class", "hdd read_iops (set)"): EQUAL, ("device class", "hdd write_iops (set)"): EQUAL,
                   ("device class", "hdd read_iops (end)"): EQUAL, ("device class", "hdd write_iops (end)"): DEVIATED}
    assert verdicts(delivered.device_class({"name": "hdd"}, None)) == {("device class", "hdd"): NOT_READ}
    assert delivered.device_class(None, facts) == []


# --- topology -------------------------------------------------------------------------------------------

def topology_recipe() -> Recipe:
    return recipe(topology={"name": "pair"}, network={"client_latency_ms": 0.1, "node_latency_ms": 2})


def link_facts(start: dict, end: dict | None = None, nodes=()) -> dict:
    links = [{"a": "client", "b": "primary", "latency_ms": 0.1}, {"a": "primary", "b": "replica1", "latency_ms": 2}]
    return {"network": {"links": links, "rtt_ms": start}, "nodes": list(nodes)} | (
        {"rtt_end_ms": end} if end is not None else {})


def test_a_link_delivered_three_times_over_is_deviated_and_one_within_its_margin_equal():
    got = verdicts(delivered.topology(topology_recipe(), link_facts({"client-primary": 0.3,
                                                                     "primary-replica1": 2.2}), {}))
    assert got == {("link", "client-primary round trip ms (window start)"): DEVIATED,
                   ("link", "primary-replica1 round trip ms (window start)"): EQUAL}


def test_a_link_changed_under_the_run_is_deviated_at_the_window_s_end_and_a_cut_one_not_read():
    facts = link_facts({"client-primary": 0.15, "primary-replica1": 2.1},
                       {"client-primary": float("nan"), "primary-replica1": 5.0})
    got = verdicts(delivered.topology(topology_recipe(), facts, {}))
    assert got[("link", "primary-replica1 round trip ms (window end)")] == DEVIATED
    assert got[("link", "client-primary round trip ms (window end)")] == NOT_READ
    assert got[("link", "client-primary round trip ms (window start)")] == EQUAL


def test_a_placed_link_is_checked_beyond_the_hosts_own_round_trip_measured_before_its_delay():
    # hosts 0.35 ms apart on their network: no delay added on the client's link, 2 ms on the nodes'
    facts = link_facts({"client-primary": 0.42, "primary-replica1": 2.4})
    facts["network"]["links"][0]["latency_ms"] = 0
    facts["network"]["base_rtt_ms"] = {"client-primary": 0.35, "primary-replica1": 0.36}
    checks = {(c.kind, c.key): c for c in delivered.topology(topology_recipe(), facts, {})}
    assert {key: c.verdict for key, c in checks.items()} == {
        ("link", "client-primary round trip ms (window start)"): EQUAL,
        ("link", "primary-replica1 round trip ms (window start)"): EQUAL}
    assert checks[("link", "primary-replica1 round trip ms (window start)")].delivered == "2.04"
    # without the hosts' own, the same pings read as a link 4x its declared (on one host the floor covers it)
    del facts["network"]["base_rtt_ms"]
    got = verdicts(delivered.topology(topology_recipe(), facts, {}))
    assert got[("link", "client-primary round trip ms (window start)")] == DEVIATED
    facts["network"]["base_rtt_ms"] = {"client-primary": float("nan")}
    got = verdicts(delivered.topology(topology_recipe(), facts, {}))
    assert got[("link", "client-primary round trip ms (window start)")] == NOT_READ


def test_a_node_started_on_another_host_than_declared_is_deviated():
    nodes = [{"name": "primary", "host": "db1", "declared_host": "db1"},
             {"name": "replica1", "host": "db1", "declared_host": "db2"}]
    got = verdicts(delivered.topology(topology_recipe(), link_facts({}, None, nodes), {"hostname": "db1"}))
    assert got[("host", "primary")] == EQUAL and got[("host", "replica1")] == DEVIATED


# --- connections and rate ------------------------------------------------------------------------------

def counter_rows(values: list[int]) -> list[dict]:
    return [{"second": i + 1, "name": "Threads_connected", "value": v, "node": ""} for i, v in enumerate(values)]


def test_fewer_connections_than_threads_is_deviated_and_too_few_samples_not_read():
    assert verdicts(delivered.connections(recipe(threads=4), counter_rows([5, 5, 5]))) == {
        ("connections", "threads"): EQUAL}
    assert verdicts(delivered.connections(recipe(threads=8), counter_rows([5, 5, 5, 5]))) == {
        ("connections", "threads"): DEVIATED}
    assert verdicts(delivered.connections(recipe(threads=4), counter_rows([5, 5]))) == {
        ("connections", "threads"): NOT_READ}


def test_an_open_loop_short_of_its_rate_is_deviated():
    assert verdicts(delivered.rate({"rate": 100, "rate_achieved": 99.5, "rate_short": 0})) == {
        ("rate", "rate"): WITHIN}
    assert verdicts(delivered.rate({"rate": 100, "rate_achieved": 60.0, "rate_short": 1})) == {
        ("rate", "rate"): DEVIATED}
    assert verdicts(delivered.rate({"rate": 100, "rate_achieved": None})) == {("rate", "rate"): NOT_READ}


def proxy_rows(values: list[int]) -> list[dict]:
    return [{"second": i + 1, "name": "dbsweep.sessions_current", "value": v, "node": "proxy"}
            for i, v in enumerate(values)]


def test_a_client_that_did_not_go_through_its_proxy_is_deviated():
    through = recipe(threads=4, topology={"name": "pair"}, network={"client_latency_ms": 0, "node_latency_ms": 0},
                     proxy={"name": "lb", "type": "haproxy"})
    assert verdicts(delivered.proxy(through, proxy_rows([4, 4, 4]))) == {("proxy", "lb"): EQUAL}
    assert verdicts(delivered.proxy(through, proxy_rows([0, 1, 1]))) == {("proxy", "lb"): DEVIATED}
    assert verdicts(delivered.proxy(through, [])) == {("proxy", "lb"): NOT_READ}


def test_a_host_setting_read_back_otherwise_is_deviated_and_one_the_host_lacks_not_read():
    from dbsweep.noise import NoiseControl

    control = NoiseControl(thp="never", governor="performance", halt_poll_ns=0)
    facts = {"thp": {"before": "madvise", "set": "always"}, "governor": "not available: no cpufreq scaling_governor",
             "halt_poll_ns": {"before": 200000, "set": 0}}
    assert verdicts(delivered.host_settings(control, facts)) == {
        ("host setting", "thp"): DEVIATED, ("host setting", "governor"): NOT_READ,
        ("host setting", "halt_poll_ns"): EQUAL}
    assert delivered.host_settings(None, facts) == []


# --- the page's report ---------------------------------------------------------------------------------

def test_the_report_names_each_deviation_with_its_cell_and_counts_what_was_verified(tmp_path):
    path = tmp_path / "delivered.csv.gz"
    header = ["engine", "threads", "rep", "host"] + delivered.COLUMNS
    rows = [["innodb", "4", "1", "h", "memory", "innodb_buffer_pool_size", "16M", "16777216", "s", "t", EQUAL],
            ["innodb", "4", "2", "h", "server option", "loose-x", "1", "", "s", "t", DEVIATED],
            ["myrocks", "4", "1", "h", "mount option", "barrier", "barrier=1", "", "s", "t", NOT_READ]]
    with gzip.open(path, "wt") as f:
        f.write("\n".join(",".join(r) for r in [header, *rows]) + "\n")
    report = delivered.report(path, ["engine", "threads"])
    assert report.deviations == ["engine innodb, repetition 2: server option loose-x: declared 1, "  # what varies
                                 "delivered (absent)"]
    assert report.deviated_reps == 1 and "left out of the comparisons" in report.lines[0]
    assert report.verified == [("server option", 0, 1), ("memory", 1, 1)]  # KINDS order; not read apart
    assert "mount option 1 (barrier)" in report.verified_line()
    assert delivered.report(tmp_path / "none.csv.gz", []) is None
