"""pgbench through the workload contract: options, commands, parsers on real captured output
(tests/fixtures/capture_pgbench.py), and one real workflow run on Debian's PostgreSQL 15."""
import csv
import gzip
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from dbsweep import workloads
from dbsweep.config import load
from dbsweep.errors import ConfigError
from dbsweep.workloads import pgbench
from conftest import Study, leftovers
from test_database_workflow import servers_in, workdir  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
SCRIPT = FIXTURES / "pgbench_script" / "deposit.sql"


def start(name: str) -> float:
    return float((FIXTURES / name / "start.txt").read_text())


def pgbench_study(engines=("postgresql",), **options) -> dict:
    return {
        "study": "pgbench",
        "axes": {"engine": list(engines), "memory": ["64M"], "filesystem": ["ext4"], "threads": [2],
                 "workload": ["tpcb"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "512M"}},
        "workloads": {"tpcb": {"tool": "pgbench", "options": {"scale": 1, "time": 3} | options}},
    }


def test_declared_as_a_database_workload_on_postgresql_only():
    declared = workloads.get("pgbench")
    assert declared is pgbench.WORKLOAD and declared.database and declared.families == ("postgresql",)
    assert declared.dataset_options == ("scale", "fillfactor") and declared.takes_rate


def test_dataset_is_scale_and_fillfactor():
    assert pgbench.dataset({"time": 5, "script": "select-only"}) == {"scale": 1, "fillfactor": 100}
    assert pgbench.dataset({"scale": "3", "fillfactor": 90, "rate": 5}) == {"scale": 3, "fillfactor": 90}
    assert pgbench.prepare({"scale": 3, "fillfactor": 90}) == [
        ["pgbench", "-i", "-q", "--scale=3", "--fillfactor=90"]]


def test_command():
    assert pgbench.command({"scale": 2, "time": 7}, 4, Path("/r")) == [
        "pgbench", "-n", "--client=4", "--jobs=4", "--progress=1", "--time=7", "--protocol=simple",
        "--builtin=tpcb-like"]
    argv = pgbench.command({"script": str(SCRIPT), "rate": 50, "per_statement": True, "protocol": "prepared"}, 2,
                           Path("/r"), time_s=3)
    assert argv[5:] == ["--time=3", "--protocol=prepared", f"--file={SCRIPT}", "--rate=50", "--report-per-command"]
    assert not [a for a in argv if "password" in a or a.startswith(("-h", "-U", "--host", "--username"))]


@pytest.mark.parametrize("key, value, message", [
    ("script", "tpcc", "is neither a pgbench built-in"),
    ("script", "/nonexistent/x.sql", "does not exist"),
    ("scale", 0, "is not a positive integer"),
    ("fillfactor", 5, "is not a whole number from 10 to 100"),
    ("rate", 0, "is not a positive whole number"),
    ("protocol", "fast", "is not one of simple, extended, prepared"),
    ("clients", 4, "is not an option of pgbench here"),
])
def test_check_refuses(key, value, message):
    with pytest.raises(ConfigError, match=rf"^workloads\.tpcb\.options\.{key}: {value!r} {message}"):
        pgbench.check({key: value}, "workloads.tpcb.options")


def test_a_missing_script_stops_before_any_job():
    with pytest.raises(ConfigError, match=r"^workloads\.tpcb\.options\.script: '/nowhere\.sql' does not exist$"):
        load(pgbench_study(script="/nowhere.sql"))


def test_not_applicable_on_mariadb_engines():
    study = load(pgbench_study(engines=("innodb", "postgresql")))
    assert [c["engine"] for c in study.cells] == ["postgresql"]
    assert study.not_applicable == [("engine~innodb/memory~64M/filesystem~ext4/threads~2/workload~tpcb",
                                     "pgbench runs on postgresql, not mariadb (innodb)")]


def test_samples_tpcb():
    rows = pgbench.samples(FIXTURES / "pgbench_tpcb", start("pgbench_tpcb"))
    assert [(r["second"], r["tps"], r["lat_ms"], r["lat_sd_ms"], r["err_s"], r["lag_ms"]) for r in rows] == [
        (1, 51.6, 34.617, 19.956, 0.0, None), (2, 57.4, 34.381, 23.829, 0.0, None),
        (3, 70.8, 28.353, 21.306, 0.0, None)]
    assert rows[0]["time"] == start("pgbench_tpcb") + 1


def test_samples_with_a_rate_have_the_lag():
    rows = pgbench.samples(FIXTURES / "pgbench_select_rate", 0.0)
    assert [(r["tps"], r["lag_ms"]) for r in rows] == [(173.0, 0.76), (176.5, 0.99)]


def test_summary_and_statements():
    s = pgbench.summary(FIXTURES / "pgbench_tpcb")
    assert (s["transactions"], s["tps"], s["lat_mean_ms"], s["lat_sd_ms"], s["ignored_errors"], s["time_s"]) == (
        181, 61.948284, 32.044, 21.918, 0, 3.0)
    assert s["connection_ms"] == 90.427 and s["lag_mean_ms"] is None
    assert len(s["statements"]) == 11 and s["statements"][5] == {
        "statement": "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;",
        "lat_mean_ms": 3.358, "failures": 0}
    rate = pgbench.summary(FIXTURES / "pgbench_select_rate")
    assert (rate["lag_mean_ms"], rate["lag_max_ms"], rate["statements"]) == (3.313, 86.836, [])


def test_summary_of_a_user_script():
    # captured with this repository's script (the path it had in the capturing checkout)
    assert json.loads((FIXTURES / "pgbench_script" / "argv.json").read_text())[-1].endswith(
        f"/{SCRIPT.relative_to(ROOT)}")
    s = pgbench.summary(FIXTURES / "pgbench_script")
    assert s["transactions"] > 0 and s["tps"] > 0
    assert len(pgbench.samples(FIXTURES / "pgbench_script", 0.0)) >= 2


def test_open_loop_against_its_rate():
    from dbsweep.collect import open_loop
    raw = FIXTURES / "pgbench_select_rate"
    got = open_loop(200, pgbench.summary(raw), pgbench.samples(raw, 0.0))
    assert got["rate_achieved"] == pytest.approx(573 / 3) and got["rate_short"] == 0


def test_a_stalled_second_carries_its_wait_from_the_transaction_log(tmp_path):
    """Captured from test_a_paused_server_s_stall_carries_its_wait_from_the_transaction_log: the server
    paused at 2.0 s for 2.5 s; pgbench says 0.0 tps for seconds 3 and 4."""
    raw = FIXTURES / "pgbench_pause"
    rows = {r["second"]: r for r in pgbench.samples(raw, start("pgbench_pause"))}
    assert [rows[k]["tps"] for k in (3, 4)] == [0.0, 0.0]
    assert 900 < rows[3]["wait_ms"] < 1100 and 1900 < rows[4]["wait_ms"] < 2100  # waiting since the pause
    assert rows[4]["lat_max_ms"] is None and rows[5]["lat_max_ms"] > 2400  # held through it, done after
    assert all(rows[k]["wait_ms"] == rows[k]["lat_max_ms"] < 100 for k in (1, 2, 6, 7))  # no long ones
    for name in ("stderr.txt", "stdout.txt"):
        (tmp_path / name).write_text((raw / name).read_text())
    (tmp_path / "pgbench_log.1").write_text("0 1 failed 0 1795681175 100000\n1 1 1500000 0 1795681175 600000\n")
    assert pgbench.transactions([tmp_path / "pgbench_log.1"], 0.0) == [(1795681174.1, 1795681175.6)]
    (tmp_path / "pgbench_log.1").write_text("0 1 2000\n")
    with pytest.raises(ValueError, match="not a pgbench transaction log line"):
        pgbench.samples(tmp_path, 0.0)


def test_a_failed_run_is_an_error(tmp_path):
    (tmp_path / "stdout.txt").write_text("pgbench (15.18)\n")
    (tmp_path / "stderr.txt").write_text('pgbench: error: connection to server failed\n')
    with pytest.raises(ValueError, match="no progress lines"):
        pgbench.samples(tmp_path, 0.0)
    with pytest.raises(ValueError, match="final report has no line"):
        pgbench.summary(tmp_path)


def rows(path):
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def debian_15():
    """One study on Debian's PostgreSQL 15 for the two tests below (each ran a study of its own on the same
    image): a cell with per-statement latencies, and the same cell with the server paused for 2.5 s (a
    window of 7 s for it)."""
    folder = Path(tempfile.mkdtemp(prefix="dbsweep-test-", dir="/var/tmp"))
    folder.chmod(0o755)  # the server runs as postgres
    config = pgbench_study(per_statement=True, time=7)
    config["axes"]["events"] = ["none", "pause"]
    config["events"] = {"pause": [{"at": 2, "for": 2.5, "action": "pause"}]}
    study = Study(folder, config)
    study.run("results/tables/engine_memory.md")  # with aggregate and statistics: not the plots and the page
    yield study
    if not leftovers(folder) and not servers_in(folder):
        shutil.rmtree(folder, ignore_errors=True)


def cell_rows(study, table: str, events: str) -> list[dict]:
    """The rows of one of the study's two cells (its events value) in a gzipped table."""
    return [r for r in rows(study.path("results/tables", table)) if r["events"] == events]


@pytest.mark.workflow
def test_pgbench_on_postgresql_15(debian_15):
    study = debian_15
    assert servers_in(study.root) == [] and leftovers(study.root) == []
    summary = cell_rows(study, "summary.csv.gz", "none")
    assert len(summary) == 1 and summary[0]["tool"] == "pgbench" and summary[0]["kind"] == "database"
    assert float(summary[0]["tps"]) > 1 and float(summary[0]["lat_sd_ms"]) > 0
    samples = cell_rows(study, "samples.csv.gz", "none")
    assert len(samples) >= 2 and all(float(r["tps"]) >= 0 for r in samples)
    run = next(study.path("results/runs").glob("**/events~none/rep~1/run.json"))
    record = json.loads(run.read_text())
    assert all("password" not in " ".join(argv).lower() for argv in record["commands"])
    assert record["commands"][-1][0].endswith("pgbench") and "--progress=1" in record["commands"][-1]
    details = json.loads(run.with_name("summary.json").read_text())
    assert len(details["statements"]) == 11
    assert study.path("results/tables/engine_memory.md").exists()


@pytest.mark.workflow
def test_fetched_version_on_tmpfs(study_factory, workdir):  # noqa: F811
    """A fetched server (PostgreSQL 16 from npm, fetched once into resources/servers/) on tmpfs, which has
    no image: the run's inputs are the server only, and it must not restore that as an image (it did,
    and every run failed with "No such file or directory: …/credentials.json"). Debian's pgbench 15
    drives the 16 server, which ships none of its own."""
    config = pgbench_study(time=2)
    config["axes"] |= {"version": ["16"], "filesystem": ["tmpfs"]}
    del config["filesystems"]
    study = study_factory(config)
    study.run("--until", "aggregate")
    assert servers_in(workdir) == []
    summary = rows(study.path("results/tables/summary.csv.gz"))
    assert len(summary) == 1 and summary[0]["version"] == "16" and float(summary[0]["tps"]) > 1
    record = json.loads(next(study.path("results/runs").rglob("run.json")).read_text())
    assert record["server"]["version"].startswith("PostgreSQL 16.")
    assert record["commands"][-1][0] == "/usr/lib/postgresql/15/bin/pgbench"
    assert study.path("resources/servers/postgresql-16/origin.json").exists()


@pytest.mark.workflow
def test_a_paused_server_s_stall_carries_its_wait_from_the_transaction_log(debian_15):
    """pgbench prints "0.0 tps, lat 0.000 ms" for a second in which nothing completed; with timed events
    it logs every transaction, and the stalled seconds carry how long their transactions had waited."""
    study = debian_15
    assert servers_in(study.root) == [] and leftovers(study.root) == []
    samples = cell_rows(study, "samples.csv.gz", "pause")
    stalled = [r for r in samples if float(r["tps"]) == 0]
    assert stalled and max(float(r["wait_ms"]) for r in stalled) > 1000, samples
    assert max(float(r["lat_max_ms"] or 0) for r in samples) > 2000  # the transactions the pause held
    moving = [r for r in samples if float(r["tps"]) > 0]
    # the longest is no shorter than the mean; a moving second may have no transaction of the log ending in it
    # (pgbench's progress seconds count from its start, the log's from the epoch: once in CI, one such second)
    timed = [r for r in moving if r["lat_max_ms"]]
    assert len(timed) >= len(moving) - 2 and all(float(r["lat_max_ms"]) >= float(r["lat_ms"]) for r in timed)
    logs = list(study.path("results/runs").glob("**/events~pause/**/pgbench_log.*"))
    assert logs, "the transaction log is kept with the run's raw output"
    recovery = rows(study.path("results/tables/recovery.csv.gz"))
    assert [r["action"] for r in recovery] == ["pause"] and float(recovery[0]["below50_s"]) >= 2
