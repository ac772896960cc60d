"""Declared vs delivered in a real run: mismatches planted in a real server's run are read back, marked
deviated, named before the answer and left out of the comparisons (or kept and said so)."""
import csv
import gzip
import threading
import time
from pathlib import Path

import psutil
import pytest

from test_database_workflow import servers_in, workdir  # noqa: F401 - the servers' folder fixture

pytestmark = pytest.mark.workflow

RAISED = 64 << 20  # what the plant adds to the server's memory cgroup limit


def rows(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


def study_config(include: bool = False) -> dict:
    return {
        "study": "plants",
        "description": "Does a planted mismatch show?",
        "baseline": {"plant": "none"},
        "axes": {"engine": ["innodb"], "memory": ["32M"], "filesystem": ["ext4"], "threads": [2],
                 "workload": ["ro"], "plant": ["none", "loose", "cap"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "512M", "mount_options": ["noatime"]}},
        "server": {"cgroup_overhead": "256M"},
        "server_options": {"plant": {"none": {"mariadb": {"sync_binlog": 0}},
                                     "loose": {"mariadb": {"sync_binlog": 0, "loose-no_such_option_planted": 1}},
                                     "cap": {"mariadb": {"sync_binlog": 0}}}},
        "workloads": {"ro": {"tool": "sysbench", "warmup": 1,
                             "options": {"script": "oltp_read_only", "tables": 1, "table_size": 2000, "time": 2}}},
        "analysis": {"include_deviated": include},
    }


def raise_cap_of(cell: str, stop: threading.Event, done: list) -> None:
    """The plant: once the server of `cell` runs (its datadir is below the cell's folder), raise its memory
    cgroup's limit under it, as another tool on the host might."""
    while not stop.is_set():
        for proc in psutil.process_iter(["name", "cwd"]):
            if proc.info["name"] == "mariadbd" and cell in (proc.info["cwd"] or ""):
                try:
                    line = next(row for row in Path(f"/proc/{proc.pid}/cgroup").read_text().splitlines()
                                if ":memory:" in row)
                except (OSError, StopIteration):
                    continue
                limit = Path("/sys/fs/cgroup/memory" + line.split(":", 2)[2]) / "memory.limit_in_bytes"
                if "dbsweep-" in str(limit) and limit.exists():
                    limit.write_text(str(int(limit.read_text()) + RAISED))
                    done.append(limit)
                    return
        time.sleep(0.05)


@pytest.mark.deviates  # its mismatches are planted
def test_planted_mismatches_are_deviated_named_before_the_answer_and_kept_out_of_comparisons(study_factory,
                                                                                               workdir):  # noqa: F811
    study = study_factory(study_config())
    stop, done = threading.Event(), []
    plant = threading.Thread(target=raise_cap_of, args=("plant~cap", stop, done), daemon=True)
    plant.start()
    try:
        study.run()
    finally:
        stop.set()
        plant.join()
    assert done, "the plant never found the cap cell's server"
    checks = rows(study.path("results/tables/delivered.csv.gz"))
    deviated = {(r["plant"], r["kind"], r["key"]) for r in checks if r["verdict"] == "deviated"}
    assert deviated == {("loose", "server option", "loose-no_such_option_planted"),
                        ("cap", "memory cap", "memory_limit (window start)"),
                        ("cap", "memory cap", "memory_limit (window end)")}, deviated
    verified = {(r["plant"], r["kind"], r["key"]) for r in checks if r["verdict"] == "equal"}
    for plant_value in ("none", "loose", "cap"):
        assert {(plant_value, "server option", "sync_binlog"), (plant_value, "memory", "innodb_buffer_pool_size"),
                (plant_value, "mount option", "noatime"), (plant_value, "filesystem", "type"),
                (plant_value, "connections", "threads"), (plant_value, "dataset", "engine"),
                (plant_value, "dataset", "tables")} <= verified
    assert {r["verdict"] for r in checks if r["key"] == "sbtest1 rows"} <= {"equal", "within tolerance"}
    assert {(p, "memory cap", "memory_limit (window end)") for p in ("none", "loose")} <= verified
    summary = {r["plant"]: r for r in rows(study.path("results/tables/summary.csv.gz"))}
    assert {p: int(summary[p]["deviations"]) for p in summary} == {"none": 0, "loose": 1, "cap": 2}

    comparisons = rows(study.path("results/tables/comparisons.csv"))
    assert [r for r in comparisons if r["axis"] == "plant"] == []  # both compared cells deviated
    page = study.path("results/index.html").read_text()
    section, answer = page.index('id="delivered"'), page.find('id="answer"')
    assert answer == -1 or section < answer  # the deviations come first
    assert "plant loose, repetition 1: server option loose-no_such_option_planted: declared 1, delivered (absent)" \
        in page
    assert "memory cap memory_limit (window end): declared 301989888, delivered 369098752" in page
    assert "3 setting(s) ran otherwise than declared, in 2 repetition(s), left out of the comparisons" in page

    study.write(study_config(include=True))
    study.run()
    kept = [r for r in rows(study.path("results/tables/comparisons.csv")) if r["axis"] == "plant"]
    assert {r["axis_value"] for r in kept} == {"loose", "cap"} and {r["includes_deviated"] for r in kept} == {"TRUE"}
    page = study.path("results/index.html").read_text()
    assert "includes a repetition that ran otherwise than declared" in page
    assert "kept in the comparisons (analysis.include_deviated: true)" in page
    assert servers_in(workdir) == []
