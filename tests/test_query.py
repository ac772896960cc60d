"""The query workload through the real workflow: a setup file, a join run cold and warm on InnoDB and
PostgreSQL, counters per execution, the plan of each cell and its fingerprint; bad setup and missing files."""
import csv
import gzip
import json
import shutil
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


# Session settings that change the join's plan (MariaDB: a hash join, BNLH, instead of eq_ref on customers'
# primary key; PostgreSQL: nested loops instead of a hash join), each run warm beside the plain join.
PLAN_CHANGES = {"innodb": ("join_hash", {"session.join_cache_level": 4}),
                "postgresql": ("join_nohash", {"session.enable_hashjoin": "off"})}


def plan_study() -> dict:
    """query_study's four cells and, per engine, the join under its PLAN_CHANGES setting (warm): six cells,
    compared with the warm plain join."""
    config = query_study()
    for engine, (name, session) in PLAN_CHANGES.items():
        config["workloads"][name] = {"tool": "query", "options": config["workloads"]["join"]["options"] | session}
        config["axes"]["workload"].append(name)
        config.setdefault("exclude", []).append({"workload": name, "cache": "cold"})
        config["exclude"] += [{"workload": name, "engine": other} for other in PLAN_CHANGES if other != engine]
    config["baseline"] = {"cache": "warm", "workload": "join"}
    return config


def rows(path):
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.workflow
def test_cold_reads_from_disk_and_warm_does_not(study_factory, workdir):  # noqa: F811
    study = study_factory(plan_study())
    study.run()
    assert servers_in(workdir) == []
    got = {}
    for r in rows(study.path("results/tables/executions.csv.gz")):
        if r["workload"] == "join":
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
    check_plans(study)


def check_plans(study):
    """Each cell kept its plan (the server's JSON, listed in run.json); cold and warm ran one plan, the
    PLAN_CHANGES settings another, and the table and the page say which."""
    plans = {(r["engine"], r["cache"], r["workload"]): r for r in rows(study.path("results/tables/plans.csv.gz"))}
    assert len(plans) == 6
    for (engine, _cache, _workload), plan in plans.items():
        path = study.path("results") / plan["file"]
        json.loads(path.read_text())  # the server's JSON
        record = json.loads(next(path.parents[2].glob("run.json")).read_text())
        assert record["checksums"]["plans/join.json"]
        assert plan["statement"] == ("ANALYZE FORMAT=JSON" if engine == "innodb" else
                                     "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)")
        assert 0 < float(plan["seconds"]) < 5
    for engine, (changed, _) in PLAN_CHANGES.items():
        assert plans[engine, "cold", "join"]["fingerprint"] == plans[engine, "warm", "join"]["fingerprint"]
        assert plans[engine, "warm", changed]["fingerprint"] != plans[engine, "warm", "join"]["fingerprint"]
    hashed = json.loads((study.path("results") / plans["innodb", "warm", "join_hash"]["file"]).read_text())
    assert "BNLH" in json.dumps(hashed)  # the session's join_cache_level reached the plan's session
    sessions = {(r["engine"], r["workload"], r["key"]): (r["declared"], r["delivered"], r["verdict"])
                for r in rows(study.path("results/tables/delivered.csv.gz")) if r["kind"] == "session setting"}
    assert sessions == {("innodb", "join_hash", "join_cache_level"): ("4", "4", "equal"),  # read back from the session
                        ("postgresql", "join_nohash", "enable_hashjoin"): ("off", "off", "equal")}
    with open(study.path("results/tables/query_timing.csv"), newline="") as f:
        table = {(r["engine"], r["cache"], r["workload"], r["name"]): r for r in csv.DictReader(f)}
    for engine, (changed, _) in PLAN_CHANGES.items():
        assert table[engine, "warm", "join", "ms"]["plan_vs_baseline"] == "baseline"
        assert table[engine, "cold", "join", "ms"]["plan_vs_baseline"] == "same plan"
        assert table[engine, "warm", changed, "ms"]["plan_vs_baseline"] == "other plan"
        assert table[engine, "cold", "join", "ms"]["plan_fingerprint"] == plans[engine, "cold", "join"]["fingerprint"]
    page = study.path("results/index.html").read_text()
    assert 'id="query-plans"' in page
    assert page.count("<details><summary>Plan <code>") == len({p["fingerprint"] for p in plans.values()}) == 4
    for plan in plans.values():
        assert f'href="{plan["file"]}"' in page


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
    with pytest.raises(ConfigError,
                       match=rf"^workloads\.join\.options\.{key}: '{tmp_path}/nowhere.sql' does not exist$"):
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


# Real captured plans (tests/fixtures/capture_plans.py): the join, cold and warm, and under a setting that
# changes its plan; EXPLAIN's plan of the same join, not run.
PLANS = FIXTURES / "plans"
CHANGED = {"innodb": "innodb_warm_join_hash", "postgresql": "postgresql_warm_join_nohash"}


@pytest.mark.parametrize("engine", ["innodb", "postgresql"])
def test_one_plan_run_twice_has_one_fingerprint_and_another_plan_another(engine):
    from dbsweep.plans import fingerprint
    cold, warm = (PLANS / f"{engine}_{cache}_join.json" for cache in ("cold", "warm"))
    assert cold.read_text() != warm.read_text()  # the timings (and PostgreSQL's buffers) differ
    assert fingerprint(cold.read_text()) == fingerprint(warm.read_text())
    assert fingerprint((PLANS / f"{engine}_explain.json").read_text()) == fingerprint(warm.read_text())
    assert fingerprint((PLANS / f"{CHANGED[engine]}.json").read_text()) != fingerprint(warm.read_text())


def _edited(name: str, path: tuple, value) -> str:
    """A captured plan with the value at path (keys and list indexes) replaced."""
    plan = json.loads((PLANS / name).read_text())
    node = plan
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value(node[path[-1]]) if callable(value) else value
    return json.dumps(plan)


MARIADB_C = ("query_block", "filesort", "temporary_table", "nested_loop", 1, "table")
PG_SCAN = (0, "Plan", "Plans", 0, "Plans", 0, "Plans", 0)  # Sort > Aggregate > Hash Join > Seq Scan of orders


@pytest.mark.parametrize("name, path, value, same", [
    ("innodb_warm_join.json", MARIADB_C + ("r_rows",), 7, True),
    ("innodb_warm_join.json", MARIADB_C + ("rows",), 999, True),
    ("innodb_warm_join.json", MARIADB_C + ("r_table_time_ms",), 1e6, True),
    ("innodb_warm_join.json", MARIADB_C + ("r_engine_stats",), {"pages_read_count": 5}, True),
    ("innodb_warm_join.json", ("query_block", "r_total_time_ms"), 0.5, True),
    ("innodb_warm_join.json", MARIADB_C + ("access_type",), "ref", False),
    ("innodb_warm_join.json", MARIADB_C + ("key",), "customers_region", False),
    ("innodb_warm_join.json", ("query_block", "filesort", "temporary_table", "nested_loop"), lambda t: t[::-1], False),
    ("postgresql_warm_join.json", PG_SCAN + ("Actual Total Time",), 99.0, True),
    ("postgresql_warm_join.json", PG_SCAN + ("Total Cost",), 1.0, True),
    ("postgresql_warm_join.json", PG_SCAN + ("Shared Read Blocks",), 900, True),
    ("postgresql_warm_join.json", PG_SCAN + ("Actual Loops",), 4, True),
    ("postgresql_warm_join.json", (0, "Execution Time"), 1.0, True),
    ("postgresql_warm_join.json", PG_SCAN + ("Node Type",), "Index Scan", False),
    ("postgresql_warm_join.json", PG_SCAN + ("Index Name",), "orders_pkey", False),
    ("postgresql_warm_join.json", (0, "Plan", "Plans", 0, "Plans", 0, "Plans"), lambda p: p[::-1], False),
])
def test_a_fingerprint_leaves_out_figures_and_keeps_the_plans_shape(name, path, value, same):
    from dbsweep.plans import fingerprint
    assert (fingerprint(_edited(name, path, value)) == fingerprint((PLANS / name).read_text())) is same


def test_the_plans_table_gives_each_plan_its_fingerprint_and_file(tmp_path):
    from dbsweep.plans import fingerprint
    from dbsweep.workloads import query
    raw = tmp_path / "results" / "runs" / "engine~postgresql" / "rep~1" / "attempt~1" / "raw"
    (raw / "plans").mkdir(parents=True)
    shutil.copyfile(PLANS / "postgresql_warm_join.executions.jsonl", raw / "executions.jsonl")
    shutil.copyfile(PLANS / "postgresql_warm_join.json", raw / "plans" / "join.json")
    [row] = query.WORKLOAD.tables["plans"].rows(raw, None)
    assert row["fingerprint"] == fingerprint((PLANS / "postgresql_warm_join.json").read_text())
    assert row["file"] == "runs/engine~postgresql/rep~1/attempt~1/raw/plans/join.json"
    assert row["statement"] == "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)" and row["query"] == "join"
    assert 0 < row["seconds"] < 1
    assert [e["execution"] for e in query.executions(raw)] == [1, 2]  # the plan's pass is no execution
    assert query.WORKLOAD.tables["plans"].rows(FIXTURES / "query_innodb_warm", None) == []  # kept before plans


def _timing_row(configuration, fingerprint, versus, verdict="", relative="1", name="ms", files=""):
    return {"name": name, "configuration": configuration, "plan_fingerprint": fingerprint,
            "plan_vs_baseline": versus, "relative": relative, "verdict": verdict, "plan_files": files}


def test_the_page_lists_each_configurations_plan_and_links_its_json(tmp_path):
    from dbsweep import summary
    results = tmp_path / "results"
    (results / "tables").mkdir(parents=True)
    rows = [_timing_row("plan=default", "aaaa11112222", "baseline", files="runs/plan~default/rep~1/a/raw/plans/q.json "
                                                                          "runs/plan~default/rep~2/b/raw/plans/q.json"),
            _timing_row("plan=nested", "aaaa11112222", "same plan", "higher (same plan: not an optimizer effect)",
                        "1.28", files="runs/plan~nested/rep~1/c/raw/plans/q.json"),
            _timing_row("plan=hash", "bbbb33334444", "other plan", "lower", "0.5",
                        files="runs/plan~hash/rep~1/d/raw/plans/q.json"),
            _timing_row("plan=hash", "bbbb33334444", "other plan", "lower", "0.5", name="rows")]
    for name, file in (("postgresql_warm_join", rows[0]["plan_files"].split()[0]),
                       ("postgresql_warm_join_nohash", rows[2]["plan_files"])):
        (results / file).parent.mkdir(parents=True)
        shutil.copyfile(PLANS / f"{name}.json", results / file)
    with open(results / "tables" / "query_timing.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    page = {"complete": True}
    html = summary._query_plans_html(page, results)
    assert html.count("<tr>") == 4  # the header and one row per configuration (ms only)
    # each plan's shape once, side by side: the hash join and the nested loops, without their figures
    assert html.count("<details>") == 2
    assert "Plan <code>aaaa11112222</code>, as in plan=default" in html and "&quot;Hash Join&quot;" in html
    assert "Plan <code>bbbb33334444</code>, as in plan=hash" in html and "&quot;Nested Loop&quot;" in html
    assert "Actual Total Time" not in html and "Total Cost" not in html
    assert "1 of 2 compared configurations ran their baseline&#x27;s plan: what differs there is not" in html
    assert '<a href="runs/plan~default/rep~2/b/raw/plans/q.json">rep 2</a>' in html
    assert "higher (same plan: not an optimizer effect)" in html and "<td>1.28</td>" in html
    assert summary._query_plans_html({"complete": False}, results) == ""
    (results / "tables" / "query_timing.csv").write_text("name,configuration,value\nms,plan=default,3\n")
    assert summary._query_plans_html(page, results) == ""  # results without plans
