"""The insert benchmark's phases through the real workflow, on a tiny table, with InnoDB and PostgreSQL."""
import csv
import gzip
import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from dbsweep.config import load
from dbsweep.errors import ConfigError
from dbsweep.workloads import insert_bench
from conftest import leftovers
from page_check import check_page
from test_database_workflow import db_study, servers_in, workdir  # noqa: F401 - the fixture

RATE = 50  # rows/s per client


def insert_study(engines=("innodb", "postgresql"), **options) -> dict:
    config = db_study(engines=list(engines), workload=["ib"])
    config["axes"]["threads"] = [1]
    config["filesystems"]["ext4"]["size"] = "512M"
    config["workloads"] = {"ib": {"tool": "insert", "options": {
        "tables": 2, "table_size": 30000, "load_batch": 100, "insert_batch": 5, "insert_rate": RATE,
        "time": 3} | options}}
    config["baseline"] = {"engine": engines[0]}
    return config


def rows(path):
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.workflow
def test_phases_on_innodb_and_postgresql(study_factory, workdir):  # noqa: F811
    study = study_factory(insert_study())
    study.run()
    assert servers_in(workdir) == []
    phases = rows(study.path("results/tables/phases.csv.gz"))
    got = {(r["engine"], r["phase"]): r for r in phases}
    assert sorted(got) == [(e, p) for e in ("innodb", "postgresql") for p in ("index", "load", "qp", "qr")]
    for engine in ("innodb", "postgresql"):
        load_, index, qr, qp = (got[engine, p] for p in ("load", "index", "qr", "qp"))
        assert float(load_["inserts"]) == 2 * 30000, engine  # every row, in batches of 100
        assert float(load_["ops"]) == 60000 and load_["op"] == "row"
        assert float(load_["cpu_us_per_op"]) > 0, engine
        assert 0 < float(load_["cs_per_op"]) < 50, engine  # an INSERT of 100 rows wakes a few threads, not 5,000
        # the server's own accounting, read at the phase's start and end: CPU and pages written for every
        # phase that does work (reads may be 0: the data is in the page cache)
        for phase in (load_, index, qr, qp):
            assert float(phase["server_cpu_us_per_op"]) > 0, (engine, phase["phase"])
            assert float(phase["server_kb_read_per_op"]) >= 0, (engine, phase["phase"])
        assert float(load_["server_kb_written_per_op"]) > 0, engine
        # KB written per inserted row: the same as per operation where an operation is a row inserted (load),
        # the per-query figure times queries / inserts in qr and qp, none where nothing is inserted (index)
        assert float(load_["server_kb_written_per_insert"]) == pytest.approx(
            float(load_["server_kb_written_per_op"]))
        assert index["server_kb_written_per_insert"] == index["kb_written_per_insert"] == "", engine
        for phase in (qr, qp):
            per_query = float(phase["server_kb_written_per_op"])
            assert float(phase["server_kb_written_per_insert"]) == pytest.approx(
                per_query * float(phase["ops"]) / float(phase["inserts"]), rel=1e-6)
        # the server is one of several processes: its CPU per row is less than the host's, within reason
        assert float(load_["server_cpu_us_per_op"]) < 3 * float(load_["cpu_us_per_op"]), engine
        assert float(index["db_mb"]) > float(load_["db_mb"]) * 0.99, engine
        for phase in (qr, qp):
            target = float(phase["target_inserts_s"])
            assert target == RATE  # one client
            assert 0.7 * target < float(phase["inserts_s"]) < 1.2 * target, (engine, phase)
            assert float(phase["queries_s"]) > 10 * target, (engine, phase)  # queries run flat out
            assert phase["op"] == "query"
    run = next(study.path("results/runs").glob("engine~postgresql/**/rep~1/run.json"))
    record = json.loads(run.read_text())
    assert [c[-2] for c in record["commands"] if "--phase=" in " ".join(c)] == [
        "--events=0", "--events=0", "--time=3", "--time=3"]
    raw = run.parent / record["attempt"] / "raw"
    assert {p.name for p in raw.iterdir() if p.is_dir()} == {"load", "index", "qr", "qp"}
    for phase in json.loads((raw / "phases.json").read_text()):  # readings at the phase's exact ends
        start, end = phase["server"]["start"], phase["server"]["end"]
        assert start["roots"] == end["roots"] and len(start["roots"]) == 1
        assert start["time"] <= phase["start"] and phase["end"] <= end["time"] < phase["end"] + 1
        assert end["cpu_s"] > start["cpu_s"] and end["write_bytes"] >= start["write_bytes"]
    # InnoDB's status text between phases too: its log sequence number grows through every phase
    run = next(study.path("results/runs").glob("engine~innodb/**/rep~1/run.json"))
    record = json.loads(run.read_text())
    moments = ["start", "after-load", "after-index", "after-qr", "end"]
    assert list(record["engine_status"]) == moments
    raw = run.parent / record["attempt"] / "raw"
    lsn = [int(re.search(r"^Log sequence number\s+(\d+)", (raw / f"engine_status.{m}.txt").read_text(), re.M)[1])
           for m in moments]
    assert lsn == sorted(set(lsn)), lsn
    samples = rows(study.path("results/tables/samples.csv.gz"))
    assert {r["phase"] for r in samples if r["engine"] == "innodb"} >= {"qr", "qp"}  # load: under a second
    with open(study.path("results/tables/insert_benchmark.csv"), newline="") as f:
        table = {(r["engine"], r["phase"], r["metric"]): r for r in csv.DictReader(f)}
    for phase in ("qr", "qp"):  # relative to the baseline engine, innodb (= 1.0)
        pg, innodb = (table[e, phase, "queries_s"] for e in ("postgresql", "innodb"))
        assert float(innodb["relative"]) == 1.0 and innodb["baseline"] == "TRUE"
        assert float(pg["relative"]) == pytest.approx(float(pg["value"]) / float(innodb["value"]), rel=1e-6)
        assert float(pg["value"]) == pytest.approx(float(got["postgresql", phase]["queries_s"]), rel=1e-6)
    assert study.path("results/plots/insert_benchmark.png").stat().st_size > 1000
    # its page in Chromium answers with each phase's rates against the baseline engine's
    check_page(study.path("results/index.html"), r"qr phase, engine=postgresql: [\d,.]+ queries/s; [\d.]+ of the "
               r"baseline's \(one repetition: no interval or verdict\)", "the insert benchmark")


def test_options_are_checked_before_any_work():
    config = insert_study(insert_rate=0)
    with pytest.raises(ConfigError, match=r"^workloads\.ib\.options\.insert_rate: 0 is not a whole number"):
        load(config)
    with pytest.raises(ConfigError, match=r"^workloads\.ib\.options\.rate: 5 is not an option"):
        load(insert_study(rate=5))
    config = insert_study()
    config["workloads"]["ib"]["warmup"] = 5
    with pytest.raises(ConfigError, match=r"^workloads\.ib\.warmup: 5: the insert workload has no warm-up"):
        load(config)


def test_dataset_is_the_empty_tables_only():
    a = insert_bench.dataset({"tables": 2, "table_size": 10, "insert_rate": 5})
    b = insert_bench.dataset({"tables": 2, "table_size": 99999, "insert_rate": 1000})
    assert a == b and a["tables"] == 2
    assert insert_bench.dataset({"tables": 3}) != a


# A real captured run (tests/fixtures/capture_insert_query.py): the InnoDB cell of insert_study().
FIXTURE = Path(__file__).parent / "fixtures" / "insert_innodb"


def test_summary_of_a_real_run():
    phases = {p["phase"]: p for p in insert_bench.summary(FIXTURE)["phases"]}
    assert list(phases) == ["load", "index", "qr", "qp"]
    assert phases["load"]["inserts"] == phases["load"]["ops"] == 60000 and phases["load"]["op"] == "row"
    assert phases["index"]["inserts"] == 0 and phases["index"]["ops"] == 60000
    for name in ("qr", "qp"):
        p = phases[name]
        assert p["target_inserts_s"] == RATE and p["op"] == "query" and p["ops"] == p["queries"] > 1000
        assert p["inserts"] % 5 == 0  # insert_batch rows per INSERT
        assert p["inserts_s"] == pytest.approx(p["inserts"] / p["seconds"])
    assert phases["load"]["db_mb"] <= phases["index"]["db_mb"] <= phases["qp"]["db_mb"]


def test_samples_carry_their_phase_on_one_clock():
    start = json.loads((FIXTURE / "phases.json").read_text())[0]["start"]
    rows = insert_bench.samples(FIXTURE, start)
    assert {r["phase"] for r in rows} <= {"load", "index", "qr", "qp"} and {"qr", "qp"} <= {r["phase"] for r in rows}
    seconds = [r["second"] for r in rows]
    assert seconds == sorted(seconds) and len(set(seconds)) == len(seconds)


def test_summary_refuses_a_run_cut_short(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "raw")
    phases = json.loads((tmp_path / "raw" / "phases.json").read_text())
    (tmp_path / "raw" / "phases.json").write_text(json.dumps(phases[:2]))
    with pytest.raises(ValueError, match="phases qr, qp did not run"):
        insert_bench.summary(tmp_path / "raw")


def test_per_op_takes_the_system_rows_within_the_phase():
    from dbsweep.workloads.insert_bench import per_op
    phase = {"start": 100.0, "end": 102.0, "ops": 1000}
    system = [{"time": t, "us": 10, "sy": 10, "rkb_s": 100, "wkb_s": 200, "cs": 3000 + t}
              for t in (100.0, 101.0, 102.0, 103.0)]
    got = per_op(phase, system, cpus=2)
    assert got["system_seconds"] == 2  # the rows at 101 and 102 cover the phase's two seconds
    assert got["cpu_us_per_op"] == pytest.approx(2 * 0.2 * 2 * 1e6 / 1000)
    assert got["kb_read_per_op"] == pytest.approx(0.2) and got["kb_written_per_op"] == pytest.approx(0.4)
    assert got["cs_per_op"] == pytest.approx((3101 + 3102) / 1000)


@pytest.mark.workflow
def test_a_server_killed_in_a_phase_is_named_as_the_cause_and_the_earlier_phases_are_kept(study_factory,
                                                                                          workdir):  # noqa: F811
    study = study_factory(insert_study(engines=("innodb",), time=60))
    proc = subprocess.Popen(study.argv(), cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180

    def in_qr() -> bool:  # this study's own client (the other test worker may run an insert benchmark too)
        try:
            return any("--phase=qr" in " ".join(p.cmdline()) for p in psutil.Process(proc.pid).children(recursive=True))
        except psutil.Error:
            return False
    while not in_qr():
        assert time.monotonic() < deadline, "the qr phase never started"
        time.sleep(0.2)
    (server,) = servers_in(workdir)
    server.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=120) != 0
    assert servers_in(workdir) == [] and leftovers(workdir) == []
    rep = next(study.path("results/runs").glob("engine~innodb/*/*/*/*/rep~1"))
    (attempt,) = rep.glob("attempt~*")
    error = json.loads((attempt / "run.json").read_text())["error"]
    # the cause first, then what the client saw of it
    assert error.startswith(f"mariadbd (pid {server.pid}) was killed by signal 9 (SIGKILL)")
    assert "phase qr: sysbench exited" in error
    log = study.path("results/logs/run", rep.relative_to(study.path("results/runs")).as_posix() + ".log")
    assert log.read_text().splitlines()[-1].split(": ", 2)[2].startswith(f"mariadbd (pid {server.pid}) was killed")
    # nothing measured is lost: the phases before it, with their figures
    done = json.loads((attempt / "raw/phases.json").read_text())
    assert [p["phase"] for p in done] == ["load", "index", "qr"] and done[0]["exit_status"] == 0


def test_kb_written_per_insert_divides_the_writes_by_the_rows_inserted():
    from dbsweep.workloads.insert_bench import per_insert
    figures = {"kb_written_per_op": 0.5, "server_kb_written_per_op": 0.25}
    qr = {"ops": 20000, "inserts": 1000}  # 20 queries per inserted row
    assert per_insert(qr, figures) == {"kb_written_per_insert": 10.0, "server_kb_written_per_insert": 5.0}
    assert per_insert({"ops": 1000, "inserts": 1000}, figures) == {
        "kb_written_per_insert": 0.5, "server_kb_written_per_insert": 0.25}  # load: an operation is a row inserted
    assert set(per_insert({"ops": 1000, "inserts": 0}, figures).values()) == {None}  # index
    assert per_insert(qr, figures | {"kb_written_per_op": None})["kb_written_per_insert"] is None


def test_module_contracts():
    from dbsweep import workloads
    from dbsweep.workloads import query
    insert, timed = workloads.get("insert"), workloads.get("query")
    assert insert is insert_bench.WORKLOAD and timed is query.WORKLOAD
    assert insert.phases is insert_bench.phases and insert.measure is None
    assert timed.measure is query.measure and timed.load is query.load and timed.phases is None
    assert insert.database and timed.database and not insert.per_second and not timed.per_second
    assert list(insert.tables) == ["phases"] and list(timed.tables) == ["executions", "plans"]
