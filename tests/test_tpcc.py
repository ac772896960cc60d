"""tpcc: the TPC-C-like sysbench workload written here (workflow/lua/tpcc.lua) and its adapter.

The workflow test runs the real pipeline on MariaDB InnoDB, MyRocks (RC) and PostgreSQL at
scale 1: prepare into the image, a few seconds of run, and the consistency check after it;
then a district counter is corrupted inside the prepared InnoDB image, and the rerun's check
must fail, in summary.json and in the tables.
"""
import json
import shutil
from pathlib import Path

import pytest

from dbsweep import database, engines, storage
from dbsweep.config import load
from dbsweep.errors import ConfigError
from dbsweep.workloads import tpcc

from conftest import leftovers
from test_database_workflow import rows, servers_in, workdir  # noqa: F401 - the fixture, a parameter below


def study(engines_=("innodb", "myrocks", "postgresql"), **options) -> dict:
    return {
        "study": "tpcc",
        "axes": {"engine": list(engines_), "memory": ["64M"], "filesystem": ["ext4"], "threads": [2],
                 "workload": ["tpcc"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "1G"}},
        "workloads": {"tpcc": {"tool": "tpcc", "options": {"scale": 1, "isolation": "RC", "time": 3} | options}},
    }


# --- config --------------------------------------------------------------------

@pytest.mark.parametrize("key, value, message", [
    ("isolation", "SNAPSHOT", "workloads.tpcc.options.isolation: 'SNAPSHOT' is not one of RR, RC, SERIALIZABLE"),
    ("scale", 0, "workloads.tpcc.options.scale: 0 is not a positive integer"),
    ("tables", "two", "workloads.tpcc.options.tables: 'two' is not a positive integer"),
    ("purge", -1, "workloads.tpcc.options.purge: -1 is not a whole number of orders (0: no purge)"),
    ("foreign_keys", "maybe", "workloads.tpcc.options.foreign_keys: 'maybe' is not on/off"),
    ("warehouses", 4, "workloads.tpcc.options.warehouses: 4 is not an option of tpcc"),
    ("threads", 4, "workloads.tpcc.options.threads: 4 is set by dbsweep"),
    ("mysql-password", "x", "workloads.tpcc.options.mysql-password: '***' is set by dbsweep"),
])
def test_bad_options_stop_before_any_work(key, value, message):
    config = study()
    config["workloads"]["tpcc"]["options"][key] = value
    with pytest.raises(ConfigError) as err:
        load(config)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_myrocks_with_foreign_keys_is_not_applicable():
    s = load(study(foreign_keys=True))
    assert {c["engine"] for c in s.cells} == {"innodb", "postgresql"}
    (path, why), = s.not_applicable
    assert path.startswith("engine~myrocks/") and "foreign keys" in why


def test_dataset_is_sets_warehouses_and_foreign_keys_only():
    base = tpcc.dataset({"scale": 1})
    assert base == tpcc.dataset({"scale": "1", "tables": 1, "foreign_keys": "off", "isolation": "RR", "purge": 50,
                                 "time": 60})
    assert base != tpcc.dataset({"scale": 2}) and base != tpcc.dataset({"foreign_keys": True})
    s = load(study(engines_=["innodb"]))
    other = study(engines_=["innodb"])
    other["workloads"]["tpcc"]["options"]["isolation"] = "SERIALIZABLE"
    assert s.image(s.cells[0]) == load(other).image(load(other).cells[0])


def test_commands():
    cfg = Path("/run/x/sysbench.cfg")
    (prep,) = tpcc.prepare({"scale": 2, "tables": 3}, cfg, threads=8)
    assert prep[:3] == ["sysbench", str(tpcc.SCRIPT), f"--config-file={cfg}"]
    assert prep[-2:] == ["--threads=8", "prepare"] and "--scale=2" in prep and "--tables=3" in prep
    run = tpcc.command({"scale": 2, "isolation": "rr", "rand-seed": 7}, 4, Path("/tmp"), cfg, time_s=5)
    assert run[-1] == "run" and "--isolation=RR" in run and "--time=5" in run and "--threads=4" in run
    assert "--rand-seed=7" in run and "--report-interval=1" in run
    argv, name = tpcc.after_run({"purge": 10}, 2, cfg)
    assert argv[-1] == "check" and "--purge=10" in argv and name == "check.stdout.txt"


# --- parsers, on output captured from real runs (tests/fixtures/capture_tpcc.py) ---------

FIXTURES = Path(__file__).parent / "fixtures"
TPCC_TABLE = "results/tables/tpcc.md"


def fixture_copy(tmp_path, name, edit=None, path="stdout.txt"):
    """A fixture's folder, with edit(text) applied to one file."""
    raw = tmp_path / name
    shutil.copytree(FIXTURES / name, raw)
    if edit:
        (raw / path).write_text(edit((raw / path).read_text()))
    return raw


def test_summary_of_a_run_and_its_passed_check():
    out = tpcc.summary(FIXTURES / "tpcc_innodb")
    assert sum(out[t] for t in tpcc.TYPES) + out["rollbacks"] == out["transactions"] > 0
    assert out["tpmc"] == pytest.approx(out["new_order"] / out["time_s"] * 60)
    assert out["new_order"] > out["order_status"] and out["payment"] > out["delivery"]
    assert out["check"] == "ok" and out["check_failures"] == 0 and out["check_warehouses"] == 1
    assert out["check_failed"] == []
    seconds = tpcc.samples(FIXTURES / "tpcc_innodb", 0.0)
    assert [r["second"] for r in seconds] == [1, 2, 3] and all(r["tps"] > 0 for r in seconds)


def test_retries_are_counted_per_error_and_match_sysbenchs_ignored_errors():
    out = tpcc.summary(FIXTURES / "tpcc_pgsql_serializable")
    assert set(out["retries_by_error"]) == {"40001"}
    assert out["retries"] == out["retries_by_error"]["40001"] == out["ignored_errors"] > 0


def test_a_failed_check_lists_every_failing_condition():
    out = tpcc.summary(FIXTURES / "tpcc_check_failed")
    assert out["check"] == "failed" and out["check_failures"] == 3
    assert [(f["warehouse"], f["condition"]) for f in out["check_failed"]] == [(1, 1), (1, 2), (1, 8)]
    assert out["check_failed"][1]["sample"].startswith("d_id=4 ")


def test_per_type_counts_that_do_not_add_up_are_refused(tmp_path):
    raw = fixture_copy(tmp_path, "tpcc_innodb", lambda t: "\n".join(
        line for line in t.splitlines() if not line.startswith('tpcc-thread {"committed"') or '"thread":1' not in line))
    with pytest.raises(ValueError, match="do not add up"):
        tpcc.summary(raw)


def test_a_check_that_did_not_finish_is_refused_and_one_not_run_is_none(tmp_path):
    raw = fixture_copy(tmp_path, "tpcc_check_failed", lambda t: t.replace("tpcc-check-done", "tpcc-check-don"),
                       "check.stdout.txt")
    with pytest.raises(ValueError, match="did not finish"):
        tpcc.summary(raw)
    (raw / "check.stdout.txt").unlink()
    assert tpcc.summary(raw)["check"] is None


# --- real servers, the whole pipeline --------------------------------------------

def corrupt_district(s, root: Path, cell) -> None:
    """Set one district's D_NEXT_O_ID wrong inside the cell's prepared image (a clean shutdown after)."""
    image = root / s.image(cell)
    recipe = s.recipe(cell)
    mnt, active = root / "corrupt", root / "results/.active"
    active.mkdir(parents=True, exist_ok=True)
    with storage.loop_device(image, active) as dev, storage.mounted(dev, mnt, "ext4", [], active), \
            open(root / "corrupt.log", "w") as log, database.running(recipe, mnt, log) as db:
        session = engines.family(recipe.engine).connect(db.conn)
        with session.cursor() as cursor:
            cursor.execute("UPDATE district1 SET d_next_o_id = d_next_o_id + 5 WHERE d_w_id = 1 AND d_id = 3")
        session.close()


@pytest.mark.workflow
def test_three_engines_prepare_run_check_and_a_corrupted_district_fails(study_factory, workdir):  # noqa: F811
    config = study(time=2)  # a 2 s window commits hundreds of each transaction type at scale 1
    run = study_factory(config)
    run.run(TPCC_TABLE)  # and what it needs (aggregate), not the rest of the analysis
    summary = {r["engine"]: r for r in rows(run.path("results/tables/summary.csv.gz"))}
    assert set(summary) == {"innodb", "myrocks", "postgresql"}
    for engine, r in summary.items():
        assert r["tool"] == "tpcc" and r["check"] == "ok" and r["check_failures"] == "0", engine
        assert int(r["check_warehouses"]) == 1
        assert float(r["tpmc"]) > 0 and int(r["new_order"]) > 0 and int(r["payment"]) > 0, engine
        committed = sum(int(r[t]) for t in tpcc.TYPES) + int(r["rollbacks"])
        assert committed == int(r["transactions"]), engine
        assert r["deviations"] == "0", engine  # what ran is what was declared (tpcc's 9 tables a set)
    table = run.path(TPCC_TABLE).read_text()
    assert "FAILED" not in table and table.count("| ok |") == 3
    # each image was analyzed after its load (PostgreSQL's check took a minute on a plan without statistics)
    analyzed = {"$ psql --dbname=dbsweep --command=VACUUM ANALYZE",
                "$ mariadb --database=dbsweep --execute=ANALYZE TABLE " + ", ".join(
                    f"`{name}1`" for name in sorted(tpcc.SET_TABLES))}
    logs = list(run.path("results/logs/prepare").rglob("*.log"))
    assert len(logs) == 3 and all(analyzed & set(log.read_text().splitlines()) for log in logs), logs

    s = load(config)
    (innodb,) = [c for c in s.cells if c["engine"] == "innodb"]
    corrupt_district(s, run.root, innodb)
    rep = next(run.path("results/runs").glob("engine~innodb/*/*/*/*/rep~1"))
    # that one repetition again (a file given to --forcerun), and the table after it, in one snakemake
    run.run(TPCC_TABLE, "--forcerun", str((rep / "run.json").relative_to(run.root)))
    result = json.loads((rep / "summary.json").read_text())
    assert result["check"] == "failed"
    # D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) fails (condition 2) or, once New-Orders in district 3
    # skipped past the gap, max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW-ORDER) does (condition 3)
    failed = result["check_failed"]
    assert failed and {(f["set"], f["warehouse"]) for f in failed} == {(1, 1)}
    assert {f["condition"] for f in failed} <= {2, 3} and all(f["sample"].startswith("d_id=3 ") for f in failed)
    assert result["check_failures"] == len(failed)
    summary = {r["engine"]: r for r in rows(run.path("results/tables/summary.csv.gz"))}
    assert summary["innodb"]["check"] == "failed" and summary["postgresql"]["check"] == "ok"
    table = run.path(TPCC_TABLE).read_text()
    assert "consistency check FAILED in 1 cell" in table and "FAILED (1 of 1 reps)" in table
    assert servers_in(workdir) == [] and leftovers(workdir) == []
