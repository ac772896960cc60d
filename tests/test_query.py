"""The query workload through the real workflow: a setup file, a join run cold and warm on InnoDB and
PostgreSQL, counters per execution; bad setup and missing files."""
import csv
import gzip
import json
from pathlib import Path

import pytest

from dbsweep.config import load
from dbsweep.errors import ConfigError
from test_database_workflow import db_study, servers_in, workdir  # noqa: F401 - the fixture

SQL = Path(__file__).parent / "fixtures" / "query"


def query_study(engines=("innodb", "postgresql"), setup="setup.sql", **options) -> dict:
    config = db_study(engines=list(engines), workload=["join"], cache=["cold", "warm"])
    config["axes"]["threads"] = [1]
    config["filesystems"]["ext4"]["size"] = "512M"
    config["workloads"] = {"join": {"tool": "query", "options": {
        "setup": str(SQL / setup), "query": str(SQL / "join.sql"), "executions": 2, "cache": "{cache}"} | options}}
    config["baseline"] = {"cache": "warm"}
    return config


def rows(path):
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.workflow
def test_cold_reads_from_disk_and_warm_does_not(study_factory, workdir):  # noqa: F811
    study = study_factory(query_study())
    study.run()
    assert servers_in(workdir) == []
    got = {}
    for r in rows(study.path("results/tables/executions.csv.gz")):
        got.setdefault((r["engine"], r["cache"], r["name"]), []).append(float(r["value"]))
    for engine, reads in (("innodb", "Innodb_buffer_pool_reads"), ("postgresql", "statio.heap_blks_read")):
        assert len(got[engine, "cold", "ms"]) == 2 and len(got[engine, "warm", "ms"]) == 2
        assert got[engine, "cold", "rows"] == [10.0, 10.0]  # ten regions
        assert min(got[engine, "cold", reads]) > 50, engine  # ~8 MB of orders from disk, every execution
        assert max(got[engine, "warm", reads]) <= 1, engine
    assert min(got["innodb", "cold", "Innodb_data_read"]) > 1e6
    assert min(got["innodb", "warm", "Handler_read_rnd_next"]) >= 40000  # the orders scanned
    assert max(got["innodb", "warm", "Innodb_data_read"]) == 0
    table = study.path("results/tables/query_timing.md").read_text()
    assert "Innodb_buffer_pool_reads" in table and "statio.heap_blks_read" in table
    assert study.path("results/plots/query_timing.png").stat().st_size > 1000


@pytest.mark.workflow
def test_sql_error_in_setup_names_the_file_and_the_error(study_factory, workdir):  # noqa: F811
    study = study_factory(query_study(engines=["innodb", "postgresql"], setup="broken_setup.sql"))
    done = study.run("--keep-going", check=False)
    assert done.returncode != 0
    logs = done.stdout + done.stderr
    assert f"setup {SQL / 'broken_setup.sql'}" in logs
    assert "ERROR 1146 (42S02) at line 2: Table 'dbsweep.no_such_table' doesn't exist" in logs
    assert 'relation "no_such_table" does not exist' in logs
    assert not list(study.path("results/runs").rglob("run.json"))
    assert servers_in(workdir) == []


@pytest.mark.parametrize("key", ["setup", "query"])
def test_a_missing_file_stops_before_any_work(key, tmp_path):
    config = query_study(**{key: str(tmp_path / "nowhere.sql")})
    with pytest.raises(ConfigError, match=rf"^workloads\.join\.options\.{key}: '{tmp_path}/nowhere.sql' does not exist$"):
        load(config)


def test_options_are_checked():
    with pytest.raises(ConfigError, match=r"^workloads\.join\.options\.cache: 'hot' is not one of cold, warm$"):
        load(query_study(cache="hot"))
    with pytest.raises(ConfigError, match=r"^workloads\.join\.options\.executions: 0 is not a whole number"):
        load(query_study(executions=0))
    with pytest.raises(ConfigError, match=r"^workloads\.join\.options\.session\.a;b: 'a;b' is not a setting name"):
        load(query_study(**{"session.a;b": 1}))


# Real captured executions (tests/fixtures/capture_insert_query.py): the join above, 2 executions.
FIXTURES = Path(__file__).parent / "fixtures"


def test_executions_subtract_what_reading_the_counters_costs():
    from dbsweep.workloads import query
    raw = FIXTURES / "query_innodb_warm"
    passes = [json.loads(line) for line in (raw / "executions.jsonl").read_text().splitlines()]
    assert [p["pass"] for p in passes] == ["warmup", "idle", "measured", "idle", "measured"]
    idle = passes[1]["after"]["Handler_read_rnd_next"] - passes[1]["before"]["Handler_read_rnd_next"]
    measured = passes[2]["after"]["Handler_read_rnd_next"] - passes[2]["before"]["Handler_read_rnd_next"]
    assert idle > 100  # SHOW GLOBAL STATUS scans its own rows
    first = query.executions(raw)[0]
    assert first["Handler_read_rnd_next"] == measured - idle
    assert first["ms"] == pytest.approx(passes[2]["seconds"] * 1000)
    assert "Com_select" not in first  # only the reported counters


@pytest.mark.parametrize("engine, reads", [("innodb", "Innodb_buffer_pool_reads"),
                                           ("postgresql", "statio.heap_blks_read")])
def test_cold_executions_read_blocks_and_warm_ones_do_not(engine, reads):
    from dbsweep.workloads import query
    cold = query.summary(FIXTURES / f"query_{engine}_cold")
    warm = query.summary(FIXTURES / f"query_{engine}_warm")
    cold_rows = query.executions(FIXTURES / f"query_{engine}_cold")
    assert [e["rows"] for e in cold_rows] == [10, 10]
    assert all(e[reads] > 50 for e in cold_rows)
    assert all(e[reads] == 0 for e in query.executions(FIXTURES / f"query_{engine}_warm"))
    assert cold["transactions"] == 2 and cold["lat_mean_ms"] > warm["lat_mean_ms"]
    # the executions table, long, as collect writes it
    long = query.WORKLOAD.tables["executions"].rows(FIXTURES / f"query_{engine}_cold", None)
    assert {(r["execution"], r["value"]) for r in long if r["name"] == "rows"} == {(1, 10), (2, 10)}


def test_summary_refuses_a_run_without_measured_executions(tmp_path):
    from dbsweep.workloads import query
    lines = (FIXTURES / "query_innodb_warm" / "executions.jsonl").read_text().splitlines()
    (tmp_path / "executions.jsonl").write_text(lines[0] + "\n")  # killed after the warm-up
    with pytest.raises(ValueError, match="no measured execution"):
        query.summary(tmp_path)
    with pytest.raises(ValueError, match="missing"):
        query.summary(tmp_path / "nowhere")
