"""The dry run's time estimate: configured windows plus a per-repetition overhead."""
import json

import pytest

from dbsweep import estimate


def run_json(tmp_path, name, wall, window, warmup=0, engine=None, status="ok"):
    recipe = {"tool": "sysbench" if engine else "fio", "duration_s": 10, "warmup_s": warmup}
    if engine:
        recipe["engine"] = engine
    record = {"status": status, "recipe": recipe, "started": "2026-11-23T10:00:00.000+00:00",
              "ended": f"2026-11-23T10:00:{wall:06.3f}+00:00", "measure_start": 1000.0,
              "measure_end": 1000.0 + window}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(record))
    return path


def test_overhead_is_the_run_step_beyond_its_window_and_warmup(tmp_path):
    done = [run_json(tmp_path, "a", 12.5, 10.2), run_json(tmp_path, "b", 13.0, 10.1),
            run_json(tmp_path, "c", 30.0, 10.0, warmup=5, engine="innodb"),
            run_json(tmp_path, "failed", 50.0, 1.0, status="failed")]
    assert estimate.measured(done) == {"storage": [pytest.approx(2.3), pytest.approx(2.9)],
                                       "database": [pytest.approx(15.0)]}
    missing = [{"duration_s": 60}, {"duration_s": 60, "warmup_s": 10, "engine": "innodb"}, {"duration_s": None}]
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
    e = estimate.estimate([{"duration_s": 3600, "engine": "innodb"}] * 3, [])
    assert e["per_rep_s"] == {"database": 1.0 + estimate.DEFAULT_STEP_S["database"]}
    assert "about 3 h 00 min" in estimate.describe(e) and "; defaults)" in estimate.describe(e)
    assert estimate.describe(estimate.estimate([], [])) == "dbsweep: no repetition missing"
