"""Shared helpers: run the real workflow in a temp dir, and check nothing was left behind."""
import csv
import fcntl
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
import yaml

from work_units import pytest_collection_modifyitems, pytest_xdist_make_scheduler  # noqa: F401 (hooks: work_units.py)

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
SLURM_TURN = Path("/run/dbsweep/test-slurm.lock")
# Each pytest-xdist worker measures under a measuring lock of its own, so the workers' studies measure
# side by side rather than wait for each other (no test asserts a figure; the lock's own tests set theirs).
# Set at import, before any test module imports dbsweep.runtime.lock, and inherited by every snakemake.
os.environ["DBSWEEP_MEASURE_LOCK"] = f"/run/dbsweep/test-measure-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.lock"
# Every snakemake and job of a test imports dbsweep from the test's copy of workflow/. With
# PYTHONDONTWRITEBYTECODE (CI sets it) each of those processes compiled it again (0.2 s of CPU each);
# without it, the first one writes the copy's __pycache__ and the others read it.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def leftovers(folder: Path) -> list[str]:
    """Mounts, loop devices and processes that still refer to folder."""
    folder = str(folder.resolve())
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
              if line.split()[1].startswith(folder)]
    loops = [line for line in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout.splitlines()
             if folder in line]
    procs = []
    for proc in psutil.process_iter(["name", "cmdline", "cwd", "ppid", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:  # dead, waiting for its (new) parent to reap it
            continue
        cmd = " ".join(proc.info["cmdline"] or [])
        if proc.info["name"] in ("fio", "sysbench") and (folder in cmd or folder in (proc.info["cwd"] or "")):
            procs.append(cmd)
        elif proc.info["name"] in ("vmstat", "iostat") and proc.info["ppid"] == 1 \
                and (proc.info["cwd"] or "").startswith(folder):
            # its run died without stopping it. A monitor runs where its job does, in the study's folder:
            # another test's job, killed on purpose, leaves its monitors to init for a moment too (CI,
            # stop 43: a kill trial failed on two such monitors of the other xdist worker's study)
            procs.append(f"orphaned monitor: {cmd}")
    return mounts + loops + procs


class Study:
    """A copy of the workflow and a study config in a temp dir, run with the real snakemake."""

    def __init__(self, root: Path, config: dict):
        self.root = root
        shutil.copytree(ROOT / "workflow", root / "workflow", ignore=shutil.ignore_patterns("__pycache__"))
        self.write(config)

    def write(self, config: dict) -> None:
        self.config = config
        (self.root / "study.yaml").write_text(yaml.safe_dump(config))

    def argv(self, *args: str) -> list[str]:
        return [str(SNAKEMAKE), "-s", str(self.root / "workflow" / "Snakefile"), "-d", str(self.root),
                "--configfile", str(self.root / "study.yaml"), "-c2", *args]

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(self.argv(*args), capture_output=True, text=True, cwd=self.root,
                              env=os.environ | {"LC_ALL": "C.UTF-8"})
        if check and done.returncode != 0:
            raise AssertionError(f"snakemake failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
        return done

    def planned(self, rule: str) -> set[str]:
        """Cell paths of the `rule` jobs a dry run would execute."""
        return cells_of(self.run("-n").stdout, rule)

    def job_counts(self) -> dict[str, int]:
        """Rule -> number of jobs a dry run would execute."""
        return job_stats(self.run("-n").stdout)

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)


def job_stats(output: str) -> dict[str, int]:
    """Rule -> number of jobs, from the job stats table Snakemake prints before it runs them (a real run
    prints the same table as a dry run: a test that runs anyway reads it there, without a dry run more)."""
    if "Job stats:" not in output:
        return {}
    counts = {}
    for line in output.split("Job stats:", 1)[1].splitlines()[3:]:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


def cells_of(output: str, rule: str) -> set[str]:
    """Cell paths of the `rule` jobs in Snakemake's output: those a dry run plans, or those a run started
    (it names each job as it starts it, as a dry run does)."""
    return {line.split("=", 1)[1].split(", rep=")[0] for line in _job_lines(output, rule)}


def _job_lines(output: str, rule: str):
    current = None
    for line in output.splitlines():
        stripped = line.strip()
        if stripped.startswith(("rule ", "localrule ")):
            current = stripped.split()[1].rstrip(":")
        elif current == rule and stripped.startswith("wildcards: cell="):
            yield stripped


@pytest.fixture
def server_workdir():
    """A folder the servers, which run as mysql and postgres, can reach (pytest's are 0700); kept when
    something was left in it."""
    folder = Path(tempfile.mkdtemp(prefix="dbsweep-test-", dir="/var/tmp"))
    folder.chmod(0o755)
    yield folder
    if not leftovers(folder):
        shutil.rmtree(folder, ignore_errors=True)


def table_rows(path) -> list[dict]:
    """The rows of a CSV table, gzipped or not."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def workdir(tmp_path):
    """Where a workflow test runs (database tests override it: servers run as their own users)."""
    return tmp_path


def deviated_settings(root: Path, allowed: tuple[str, ...] = ()) -> list[str]:
    """Every deviated row of the repetitions' delivered.csv under root/results/runs: a setting that ran otherwise
    than declared (cell, kind, key, declared, delivered); rows of the kinds `allowed` left out."""
    from dbsweep import delivered

    runs = root / "results" / "runs"
    return [f"{path.parent.relative_to(runs)}: {c.kind} {c.key}: declared {c.declared!r}, delivered {c.delivered!r}"
            for path in sorted(runs.rglob("delivered.csv")) for c in delivered.read(path)
            if c.verdict == delivered.DEVIATED and c.kind not in allowed]


@pytest.fixture
def study_factory(request, workdir):
    """Studies in workdir, each run by the real workflow. After the test: nothing left behind, and what ran is
    what was declared, in every repetition of every study of every test (no deviated row in delivered.csv),
    unless the test is marked `deviates` (it plants a mismatch, or overloads on purpose): all kinds of check, or
    those the mark names (`deviates("link")`)."""
    made = []

    def make(config: dict) -> Study:
        made.append(Study(workdir, config))
        return made[-1]

    yield make
    assert leftovers(workdir) == []
    mark = request.node.get_closest_marker("deviates")
    if mark is None or mark.args:
        assert deviated_settings(workdir, mark.args if mark else ()) == []


@contextmanager
def slurm_turn():
    """The one test Slurm of this host (tests/slurm/up.sh), held while a test file or a benchmark uses it:
    the tests run on several pytest-xdist workers, and Slurm's commands find one cluster's config."""
    SLURM_TURN.parent.mkdir(parents=True, exist_ok=True)
    with open(SLURM_TURN, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def tiny_study(**changes) -> dict:
    """A study of a few seconds per cell: one fio and one sysbench fileio workload on a small ext4."""
    config = {
        "study": "tiny",
        "axes": {"filesystem": ["ext4"], "threads": [1], "workload": ["fio-rr", "sb-rr"]},
        "filesystems": {"ext4": {"type": "ext4", "size": "256M"}},
        "workloads": {
            "fio-rr": {"tool": "fio", "options": {"rw": "randread", "bs": "16k", "size": "32M", "direct": 1,
                                                  "ioengine": "psync", "runtime": 3}},
            "sb-rr": {"tool": "sysbench-fileio", "options": {"file-test-mode": "rndrd", "file-num": 1,
                                                             "file-total-size": "32M", "file-extra-flags": "direct",
                                                             "file-block-size": 16384, "time": 3}},
        },
    }
    config.update(changes)
    return config


_MADE_SHARED = pytest.StashKey[bool]()


def pytest_configure(config):
    """The workers measure at once, each under a lock of its own, which a host never does (one
    measuring lock). A topology test's nodes run in network namespaces (`ip netns exec`), each with a copy
    of the host's mounts of that moment; where / is private (this VM's init; systemd makes it shared), the
    another worker's loop filesystem stays mounted in those copies after its run unmounts it, and its loop
    device cannot be detached while the node lives (a run failed so: "held open by no process"). With /
    shared, the unmount reaches the copies. Set once by the controlling process, and set back at the end."""
    if hasattr(config, "workerinput") or os.geteuid() != 0:
        return
    found = subprocess.run(["findmnt", "--raw", "--noheadings", "--output", "PROPAGATION"],
                           capture_output=True, text=True).stdout.split()
    if found and set(found) == {"private"}:
        subprocess.run(["mount", "--make-rshared", "/"], check=True)
        config.stash[_MADE_SHARED] = True


def pytest_unconfigure(config):
    if config.stash.get(_MADE_SHARED, False):
        subprocess.run(["mount", "--make-rprivate", "/"], check=False)
