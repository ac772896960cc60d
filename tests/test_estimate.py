"""The dry run's time estimate: configured windows plus a per-repetition overhead."""
import json

import pytest

from dbsweep import estimate
from dbsweep.recipe import Recipe


def recipe(duration_s, warmup=0, engine=None):
    return Recipe(tool="sysbench" if engine else "fio", options={}, threads=1, filesystem={"type": "tmpfs"},
                  dataset={}, duration_s=duration_s, engine=engine, warmup_s=warmup)


def run_json(tmp_path, name, wall, window, warmup=0, engine=None, status="ok"):
    record = {"status": status, "recipe": recipe(10, warmup, engine).as_dict(),
              "started": "2026-11-23T10:00:00.000+00:00", "ended": f"2026-11-23T10:00:{wall:06.3f}+00:00",
              "measure_start": 1000.0, "measure_end": 1000.0 + window}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(record))
    return path


def test_overhead_is_the_run_step_beyond_its_window_and_warmup(tmp_path):
    done = [run_json(tmp_path, "a", 12.5, 10.2), run_json(tmp_path, "b", 13.0, 10.1),
            run_json(tmp_path, "c", 30.0, 10.0, warmup=5, engine="innodb"),
            run_json(tmp_path, "failed", 50.0, 1.0, status="failed")]
    assert estimate.measured(done) == {"storage": [pytest.approx(2.3), pytest.approx(2.9)],
                                       "database": [pytest.approx(15.0)]}
    missing = [recipe(60), recipe(60, warmup=10, engine="innodb"), recipe(None)]
    e = estimate.estimate(missing, done)
    storage, database = 1.0 + 2.6, 1.0 + 15.0  # JOB_START_S + the median
    assert e["per_rep_s"] == {"storage": pytest.approx(storage), "database": pytest.approx(database)}
    assert (e["window_s"], e["no_duration"], e["measured_from"]) == (130, 1, 3)
    assert e["total_s"] == pytest.approx(130 + 2 * storage + database)
    line = estimate.describe(e, images=2)
    assert line.startswith("dbsweep: 3 repetitions to run, about 2 min 33 s: 130 s measured windows")
    assert line.endswith("measured from 3 earlier runs); 1 without a configured duration not counted; "
                         "plus 2 images to prepare")


def test_defaults_without_earlier_runs():
    e = estimate.estimate([recipe(3600, engine="innodb")] * 3, [])
    assert e["per_rep_s"] == {"database": 1.0 + estimate.DEFAULT_STEP_S["database"]}
    assert "about 3 h 00 min" in estimate.describe(e) and "; defaults)" in estimate.describe(e)
    assert estimate.describe(estimate.estimate([], [])) == "dbsweep: no repetition missing"


def test_describe_counts_repetitions_run_again():
    e = estimate.estimate([recipe(10)] * 3, [])
    assert estimate.describe(e, again=2).endswith("; 2 of them again (changed or incomplete)")


@pytest.mark.workflow
def test_the_estimate_counts_what_snakemake_will_rerun(study_factory):
    """A changed workload option reruns that workload's repetitions: the estimate counts them (it said
    "no repetition missing", counting only absent run.json files); an unchanged study has nothing to run."""
    config = {
        "study": "rerun", "repetitions": 2,
        "axes": {"filesystem": ["tmpfs"], "threads": [1], "workload": ["fio-rr", "fio-seq"]},
        "workloads": {
            "fio-rr": {"tool": "fio", "options": {"rw": "randread", "bs": "4k", "size": "16M", "runtime": 2}},
            "fio-seq": {"tool": "fio", "options": {"rw": "read", "bs": "64k", "size": "16M", "runtime": 2}},
        },
    }
    study = study_factory(config)
    study.run("--until", "run")  # the estimate counts repetitions, not the analysis after them
    assert "dbsweep: no repetition missing" in study.run("-n").stderr
    config["workloads"]["fio-rr"]["options"]["bs"] = "8k"
    study.write(config)
    done = study.run("-n")
    assert "dbsweep: 2 repetitions to run, about" in done.stderr, done.stderr[-3000:]
    assert "; 2 of them again (changed or incomplete)" in done.stderr
    assert study.planned("run") == {"filesystem~tmpfs/threads~1/workload~fio-rr"}  # its 2 repetitions
