"""repeat_until: a round of every cell more while the study cannot yet tell its difference from noise."""
import json
import re
import signal
import subprocess
import time
from datetime import datetime

import pytest

from conftest import leftovers, table_rows
from dbsweep import rounds
from dbsweep.runtime import lock

HEADER = "metric,cells,reps,noise_pct,df,detectable_pct\n"  # what checkpoint round_noise writes


def verdicts(tmp_path, figures: dict[int, str]):
    """round -> its detectable_pct as the R rule writes it ("NA" when it has none); verdict(n) as the
    Snakefile's: the file's path, or None when that round is not judged yet."""
    for n, figure in figures.items():
        (tmp_path / f"round~{n}.csv").write_text(HEADER + f"iops,4,{n},8.1,{4 * (n - 1)},{figure}\n"
                                                 + f"tps,2,{n},3.0,{2 * (n - 1)},4.5\n")
    return lambda n: tmp_path / f"round~{n}.csv" if n in figures else None


def test_a_round_more_while_any_metric_is_above_the_target(tmp_path):
    spec = {"detectable_pct": 5, "max_repetitions": 6}
    # iops: 12% after 2, 7% after 3, 4.9% after 4; tps 4.5% throughout
    verdict = verdicts(tmp_path, {2: "12.0", 3: "7.0", 4: "4.9"})
    assert rounds.repetitions(2, spec, verdict) == 4
    assert rounds.repetitions(2, spec | {"detectable_pct": 4.4}, verdict) == 5  # round 5 is not judged yet
    assert rounds.repetitions(2, spec | {"max_repetitions": 3}, verdict) == 3
    assert rounds.repetitions(2, None, verdict) == 2
    assert rounds.text([tmp_path / f"round~{n}.csv" for n in (2, 3, 4)], spec).endswith(
        "±4.9% after 4; met (stopping once a round meets it calls identical cells different a little more often "
        "than 5%: 6.7% at 5% noise in simulation; fixed repetitions keep about 5%).")
    assert rounds.text([tmp_path / f"round~{n}.csv" for n in (2, 3)], spec | {"max_repetitions": 3}) == (
        "Repetitions until a difference of 5% could be told from noise (at most 3 per cell): ±12% after 2, "
        "±7.0% after 3; not met: stopped at 3 repetitions.")


def test_a_round_without_a_figure_ends_the_study(tmp_path):
    (tmp_path / "round~2.csv").write_text(HEADER)  # no cell with a per-second throughput
    spec = {"detectable_pct": 5, "max_repetitions": 6}
    assert rounds.repetitions(2, spec, lambda n: tmp_path / f"round~{n}.csv") == 2
    assert rounds.text([tmp_path / "round~2.csv"], spec).endswith(
        "not measurable after 2; no per-second throughput to judge by, so no more rounds.")


def adaptive_study(runtime: int) -> dict:
    """2 tmpfs fio cells, 2 rounds and up to a third, whose target no real host meets."""
    return {
        "study": "rounds", "repetitions": 2,
        "repeat_until": {"detectable_pct": 0.01, "max_repetitions": 3},
        "axes": {"filesystem": ["tmpfs"], "threads": [1, 2], "workload": ["fio-rr"]},
        "workloads": {"fio-rr": {"tool": "fio", "options": {"rw": "randread", "bs": "16k", "size": "16M",
                                                            "ioengine": "psync", "runtime": runtime}}},
    }


RUNTIME_S = 3  # the window in which the study is stopped: long enough to be in it 1.5 s after its job starts


def stop_in_round_3(study) -> str:
    """Run the study, SIGTERM to Snakemake while the first cell of round 3 measures; its output, once nothing
    of the study holds the measuring lock and nothing is left."""
    with open(study.path("snakemake.out"), "w") as out:
        snakemake = subprocess.Popen(study.argv(), cwd=study.root, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not re.search(rf" in {re.escape(str(study.root))}: run results/runs/\S+/rep~3 ", lock.holder() or ""):
            assert snakemake.poll() is None and time.monotonic() < deadline, \
                study.path("snakemake.out").read_text()[-3000:]
            time.sleep(0.2)
        time.sleep(1.5)  # in its window (not the canary's: results/canary/…/rep~3 comes before round 3)
        snakemake.send_signal(signal.SIGTERM)
        assert snakemake.wait(timeout=120) != 0
    finally:
        if snakemake.poll() is None:
            snakemake.kill()
    deadline = time.monotonic() + 60  # a killed job's guardian releases the lock once its run is cleaned up
    while f" in {study.root}: " in (lock.holder() or "") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftovers(study.root) == []
    return study.path("snakemake.out").read_text()


@pytest.mark.workflow
def test_rounds_run_until_the_target_or_the_most_repetitions_a_canary_ends_every_round_and_a_stop_in_one(
        study_factory):
    """The study's rounds, with a canary every 2 runs (the study's 2 cells), stopped by SIGTERM to Snakemake
    while the first cell of round 3 (a round it added) measures, then run again to its end. (One study for
    the three: the canary's test ran the same rounds again, and the stopped study's test ran them once more.)

    The stop: Snakemake lets a running job end: its repetition is measured in full, or fails; the other
    cell's round 3 is not run. The page counts round 3 from the verdict on disk and says Incomplete; nothing
    is left; the rerun measures what is missing.

    The rounds: each round ends with a canary, round 3's too, and the canary after round 2 runs before that
    round's check, not at the study's end."""
    config = adaptive_study(runtime=RUNTIME_S) | {"noise_control": {"canary": {"every": 2}}}
    study = study_factory(config)
    first = stop_in_round_3(study)
    assert "dbsweep: repeat_until: up to 1 more round of 2 repetitions while the noise needs them" in first
    third = [json.loads(p.read_text()) for p in study.path("results/runs").glob("*/*/*/rep~3/run.json")]
    assert len(third) <= 1 and all(r["status"] == "ok" and r["measure_end"] - r["measure_start"] >= RUNTIME_S - 0.5
                                   for r in third), third
    page = study.path("results/summary.md").read_text()
    stopped = "1 not collected" if third else "1 failed"
    assert "**Incomplete**" in page and stopped in page and "1 not run" in page, page

    err = study.run().stderr
    assert len(re.findall(r"^(?:local)?rule run:$", err, re.M)) == 2 - len(third), err[-3000:]
    assert "dbsweep: 6/6 repetitions done" in err, err[-3000:]  # the progress line counts the round it added
    reps = sorted(p.parent.name for p in study.path("results/runs").glob("*/*/*/rep~*/run.json"))
    assert reps == ["rep~1", "rep~1", "rep~2", "rep~2", "rep~3", "rep~3"]
    # round 3 came after both cells' round 2
    started = {}
    for path in study.path("results/runs").glob("*/*/*/rep~*/run.json"):
        record = json.loads(path.read_text())
        started.setdefault(record["rep"], []).append(record["started"])
    assert max(started[2]) < min(started[3])
    # (and round 2's tables, a temp folder: Snakemake removes it once its check has run in the same run, and
    # the stop came before it could; the rerun does not need it)
    assert sorted(p.name for p in study.path("results/rounds").iterdir() if p.name != "tables~2") == \
        ["round~2.csv", "round~3.csv"]
    page = study.path("results/summary.md").read_text()
    assert "**Incomplete**" not in page and "stopped at 3 repetitions" in page, page
    match = re.search(r"Repetitions until a difference of 0\.01% could be told from noise \(at most 3 per cell\): "
                      r"±([\d.]+)% after 2, ±([\d.]+)% after 3; not met: stopped at 3 repetitions\.", page)
    assert match, page
    # every repetition is in the tables, and the last round's figure is the half-width of the comparisons' CIs
    assert {row["reps"] for row in table_rows(study.path("results/tables/cell_stats.csv"))} == {"3"}
    (iops,) = [row for row in table_rows(study.path("results/tables/comparisons.csv")) if row["metric"] == "iops"]
    half = 100 * ((float(iops["ratio_high"]) / float(iops["ratio_low"])) ** 0.5 - 1)
    assert half == pytest.approx(float(match[2]), abs=0.5)
    assert half == pytest.approx(rounds.detectable(study.path("results/rounds/round~3.csv")), rel=1e-4)

    started = []
    for path in study.path("results").glob("*/*/*/*/rep~*/run.json"):
        record = json.loads(path.read_text())
        started.append((datetime.fromisoformat(record["started"]).timestamp(),
                        "canary" if "/canary/" in str(path) else "run", record["rep"]))
    order = [(kind, rep) for _, kind, rep in sorted(started)]
    assert order == [("canary", 1), ("run", 1), ("run", 1), ("canary", 2), ("run", 2), ("run", 2), ("canary", 3),
                     ("run", 3), ("run", 3), ("canary", 4)], order
    canaries = {rep: when for when, kind, rep in started if kind == "canary"}
    checked = study.path("results/rounds/round~2.csv").stat().st_mtime
    assert canaries[3] < checked < min(when for when, kind, rep in started if kind == "run" and rep == 3)
    rows = table_rows(study.path("results/tables/canary.csv"))
    assert [(r["canary"], r["after"]) for r in rows] == [("1", "0"), ("2", "2"), ("3", "4"), ("4", "6")]
    assert "Canary drift: " in page

    # A target the first rounds meet: the study is its 2 rounds again, nothing measured anew.
    config["repeat_until"]["detectable_pct"] = 1000
    study.write(config)
    counts = study.job_counts()
    assert "run" not in counts and counts.get("aggregate") == 1, counts

