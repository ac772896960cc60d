"""The same tiny study through a real single-node Slurm (tests/slurm/up.sh) and locally: same results."""
import csv
import gzip
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from conftest import ROOT, Study, leftovers, slurm_turn, tiny_study

pytestmark = pytest.mark.workflow
NODE = socket.gethostname().split(".")[0]
# The profile as shipped: the test cluster keeps no accounts (no slurmdbd), so its status command
# learns a job's state from scontrol alone.
SLURM_ARGS = ("--workflow-profile", str(ROOT / "workflow/profiles/slurm"))
JOB_LOGS = "results/logs/slurm"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A single-node Slurm for this module's tests, stopped (and checked stopped) after them."""
    folder = tmp_path_factory.mktemp("slurm")
    with slurm_turn():
        up = subprocess.run([ROOT / "tests/slurm/up.sh", folder], capture_output=True, text=True, timeout=120)
        assert up.returncode == 0, f"tests/slurm/up.sh failed: {up.stderr[-2000:]}"
        pids = {d: int((folder / f"{d}.pid").read_text()) for d in ("munged", "slurmctld", "slurmd")}
        yield os.environ | {"SLURM_CONF": str(folder / "slurm.conf"), "LC_ALL": "C.UTF-8"}
        subprocess.run([ROOT / "tests/slurm/down.sh", folder], check=True, timeout=60)
        assert [d for d, pid in pids.items() if psutil.pid_exists(pid)] == []


def study_config(host_axis: bool = False) -> dict:
    config = tiny_study()
    config["axes"] = {"filesystem": ["tmpfs"], "threads": [1, 2], "workload": ["fio-rr", "sb-rr"]}
    if host_axis:  # each cell on its named node (sbatch --nodelist), packed per host
        config["axes"] = {"host": [NODE]} | config["axes"]
    config["workloads"]["fio-rr"]["options"] |= {"direct": 0, "runtime": 2}
    del config["workloads"]["sb-rr"]["options"]["file-extra-flags"]  # tmpfs has no O_DIRECT
    config["workloads"]["sb-rr"]["options"]["time"] = 2
    return config


def run(study: Study, env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(study.argv(*args), capture_output=True, text=True, cwd=study.root, env=env, timeout=600)
    if check and done.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    return done


def rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt", newline="") if path.suffix == ".gz" else open(path, newline="") as f:
        return list(csv.DictReader(f))


def results(study: Study) -> dict:
    """What a run leaves, less what differs between two measurements: files, columns, cells."""
    root = study.path("results")
    files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
             and "attempt~" not in str(p) and "logs" not in p.parts and p.name != ".lock"}
    tables = {}
    for path in sorted(root.glob("tables/*.csv*")):
        table = rows(path)
        keys = [c for c in ("filesystem", "threads", "workload", "rep", "host", "second") if table and c in table[0]]
        tables[path.name] = (list(table[0]) if table else [], sorted(tuple(r[k] for k in keys) for r in table))
    return {"files": files, "tables": tables}


def manifests(study: Study) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(study.path("results/runs").rglob("rep~*/run.json"))]


def test_slurm_run_matches_a_local_run_and_names_the_node(slurm, tmp_path):
    local = Study(tmp_path / "local", study_config(host_axis=True))
    run(local, os.environ | {"LC_ALL": "C.UTF-8"})
    submitted = Study(tmp_path / "slurm", study_config(host_axis=True))
    run(submitted, slurm, *SLURM_ARGS)

    mine, theirs = results(local), results(submitted)
    assert theirs["files"] == mine["files"]
    assert f"runs/host~{NODE}/filesystem~tmpfs/threads~2/workload~sb-rr/rep~1/samples.csv" in theirs["files"]
    for name, (columns, keys) in mine["tables"].items():
        assert theirs["tables"][name][0] == columns, name
        if name not in ("samples.csv.gz", "system.csv.gz", "counters.csv.gz"):  # per-second rows may differ by one
            assert theirs["tables"][name][1] == keys, name
    summary = rows(submitted.path("results/tables/summary.csv.gz"))
    assert {r["host"] for r in summary} == {NODE} and all(float(r["iops"]) > 0 for r in summary)

    # The four repetitions ran in one Slurm job (the profile packs up to 8), on the node, named in each
    # manifest and attempt folder.
    jobs = set()
    for record in manifests(submitted):
        assert record["status"] == "ok" and record["host"]["node"] == NODE
        assert record["host"]["slurm_partition"] == "bench" and f"-{NODE}-" in record["attempt"]
        jobs.add(record["host"]["slurm_job_id"])
    assert len(jobs) == 1
    assert all(record["host"]["node"] is None for record in manifests(local))
    # One Snakemake in the job ran every run and collect itself (no job step of its own per rule);
    # aggregation and analysis ran here, unsubmitted.
    (log,) = submitted.path(JOB_LOGS).glob("*.log")
    text = log.read_text()
    assert text.count("localrule run:") == 4 and text.count("localrule collect:") == 4, text[-3000:]
    assert text.count("Snakemake version") == 1 and "rule aggregate" not in text
    out = run(submitted, slurm, *SLURM_ARGS, "-n").stdout
    assert "Nothing to be done" in out
    assert leftovers(tmp_path) == []


def test_a_partition_that_does_not_exist_fails_fast_with_slurms_message(slurm, tmp_path):
    config = study_config()
    config["axes"]["threads"] = [1]
    config["axes"]["workload"] = ["fio-rr"]
    config["cluster"] = {"partition": "nosuch"}
    study = Study(tmp_path, config)
    started = time.monotonic()
    done = run(study, slurm, *SLURM_ARGS, check=False)
    assert done.returncode != 0 and time.monotonic() - started < 60
    assert "dbsweep: slurm_partition 'nosuch': Partition nosuch not found" in done.stderr
    assert not study.path("results/runs").exists() and not study.path(JOB_LOGS).exists()


def test_a_second_snakemake_on_the_same_results_is_refused_naming_the_lock(slurm, tmp_path):
    config = study_config()
    config["axes"]["threads"] = [1]
    config["axes"]["workload"] = ["fio-rr"]
    config["workloads"]["fio-rr"]["options"] |= {"runtime": 30, "rate_iops": 100}  # a core's worth of reads for nothing
    study = Study(tmp_path, config)
    first = subprocess.Popen(study.argv(), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True, env=os.environ | {"LC_ALL": "C.UTF-8"})
    try:
        deadline = time.monotonic() + 60
        # not the load's check
        while not any("fio" in line and "--parse-only" not in line for line in leftovers(tmp_path)):
            assert time.monotonic() < deadline, "fio never started"
            time.sleep(0.2)
        done = run(study, slurm, *SLURM_ARGS, check=False)
        assert done.returncode != 0
        assert f"dbsweep: results/.lock is held by snakemake pid {first.pid} on {socket.gethostname()}" in done.stderr
        assert "Directory cannot be locked" in done.stderr
        assert not study.path(JOB_LOGS).exists(), "nothing was submitted"
    finally:
        os.killpg(first.pid, signal.SIGINT)
        first.wait(timeout=60)
    assert leftovers(tmp_path) == []


def test_a_job_cut_off_at_its_time_limit_leaves_the_cell_missing_and_released(slurm, tmp_path):
    config = study_config()
    config["axes"]["threads"] = [1]
    config["axes"]["workload"] = ["fio-rr"]
    # 100 reads a second: fio sleeps through the minute Slurm gives it (uncapped, it took a core for 60-90 s)
    config["workloads"]["fio-rr"]["options"] |= {"runtime": 300, "rate_iops": 100}
    study = Study(tmp_path, config)
    # A one-minute limit for the job of run and collect (Slurm enforces it within its 30 s check),
    # no retry: Slurm's SIGTERM stops run.py.
    done = run(study, slurm, *SLURM_ARGS, "--retries", "0", "--set-resources", "run:runtime=1", "collect:runtime=0",
               check=False)
    assert done.returncode != 0
    (log,) = study.path(JOB_LOGS).glob("*.log")
    assert "CANCELLED AT" in log.read_text() and "DUE TO TIME LIMIT" in log.read_text()
    rep = study.path("results/runs/filesystem~tmpfs/threads~1/workload~fio-rr/rep~1")
    assert not (rep / "run.json").exists()
    (attempt,) = rep.glob("attempt~*")
    record = json.loads((attempt / "run.json").read_text())
    assert record["status"] == "failed" and record["error"] == "stopped by SIGTERM"
    assert leftovers(tmp_path) == []
    assert study.planned("run") == {"filesystem~tmpfs/threads~1/workload~fio-rr"}


def test_every_analysis_rule_runs_where_snakemake_was_started():
    """A rule of aggregate, analyse or report without `localrule: True` would be submitted to a node."""
    import re
    rules = {}
    for stage in ("aggregate", "analyse", "report"):
        text = (ROOT / "workflow" / "rules" / f"{stage}.smk").read_text()
        for name, body in re.findall(r"^rule (\w+):\n(.*?)(?=^\S|\Z)", text, re.M | re.S):
            rules[name] = body
    assert len(rules) >= 10
    for name, body in rules.items():
        assert re.search(r"^    localrule: True", body, re.M), name


def test_rounds_of_repeat_until_run_as_slurm_jobs(slurm, tmp_path):
    """The checkpoint runs where Snakemake runs; the round it adds goes to Slurm like the first ones."""
    config = study_config()
    config["axes"]["workload"] = ["fio-rr"]
    config |= {"repetitions": 2, "repeat_until": {"detectable_pct": 0.01, "max_repetitions": 3}}  # never met
    study = Study(tmp_path, config)
    run(study, slurm, *SLURM_ARGS)
    runs = [json.loads(p.read_text()) for p in study.path("results/runs").glob("*/*/*/rep~*/run.json")]
    assert sorted(r["rep"] for r in runs) == [1, 1, 2, 2, 3, 3]
    assert all(r["host"]["slurm_job_id"] for r in runs), [r["host"] for r in runs]
    assert sorted(p.name for p in study.path("results/rounds").iterdir()) == ["round~2.csv", "round~3.csv"]
    assert "not met: stopped at 3 repetitions" in study.path("results/summary.md").read_text()
