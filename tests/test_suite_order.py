"""The suite's own units of work (tests/work_units.py): every test file that takes the one test Slurm runs in
the Slurm group, on one worker, so that no worker sits waiting for the other's turn; a file's module fixture is
set up once, on one worker; other tests are dealt out one by one."""
import configparser
import os
import re
import subprocess
import sys
from collections import defaultdict

from conftest import ROOT
from work_units import MEASURED, SLURM_GROUP, SLURM_USERS, work_unit

# A module fixture that counts its set-ups in a file, and tests that name their worker.
SHARED = '''
import os
import pytest

@pytest.fixture(scope="module")
def once():
    with open("setups", "a") as f:
        f.write(__name__ + "\\n")

@pytest.mark.parametrize("i", range(4))
def test_shared(once, i):
    pass
'''
ALONE = '''
import pytest

@pytest.mark.parametrize("i", range(4))
def test_alone(i):
    pass
'''


def test_every_file_that_takes_the_test_slurm_is_in_the_slurm_group():
    takers = {path.name for path in (ROOT / "tests").glob("test_*.py")
              if re.search(r"with slurm_turn\(\):", path.read_text())}
    assert "test_slurm.py" in takers  # the pattern still finds the users
    assert takers - SLURM_USERS == set()


def test_every_measured_cost_still_finds_its_test():
    """A renamed test would silently fall back to the rough estimate and be dealt out among the quick ones."""
    assert len(MEASURED) >= 10
    for nodeid in MEASURED:
        path, _, test = nodeid.partition("::")
        function, _, param = test.partition("[")
        assert f"def {function}(" in (ROOT / "tests" / path).read_text(), nodeid
        if path == "test_r_analysis.py":
            assert (ROOT / "tests" / "testthat" / param.removesuffix("]")).is_file(), nodeid


def test_a_test_s_unit_is_the_slurm_group_its_file_or_itself(tmp_path):
    (tmp_path / "test_shared.py").write_text(SHARED)
    (tmp_path / "test_alone.py").write_text(ALONE)
    assert work_unit("test_shared.py::test_shared[1]", tmp_path) == "test_shared.py"
    assert work_unit("test_alone.py::test_alone[1]", tmp_path) == "test_alone.py::test_alone[1]"
    assert work_unit("tests/test_slurm.py::test_x", ROOT) == SLURM_GROUP
    assert work_unit("tests/test_bench.py::test_smoke_mode_runs_and_prints_its_table[slurm]", ROOT) == SLURM_GROUP
    assert work_unit("tests/test_bench.py::test_smoke_mode_runs_and_prints_its_table[noop]", ROOT) \
        == "tests/test_bench.py::test_smoke_mode_runs_and_prints_its_table[noop]"
    # a file of one worker's R process each: its tests spread although they share a session fixture
    assert work_unit("tests/test_r_analysis.py::test_testthat_file_passes[test-plots.R]", ROOT) \
        == "tests/test_r_analysis.py::test_testthat_file_passes[test-plots.R]"
    assert work_unit("tests/test_engines.py::test_x", ROOT) == "tests/test_engines.py"


def test_the_workers_run_each_unit_whole_with_the_suite_s_options(tmp_path):
    """A real `pytest -n 3` with pytest.ini's options and work_units' hooks, over files of their own: the
    Slurm users' tests on one worker, a module fixture's file on one worker with its fixture set up once.
    (xdist's loadgroup dealt each of these tests out alone under pytest 9.2.)"""
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    (tmp_path / "pytest.ini").write_text(f"[pytest]\naddopts = {ini['pytest']['addopts']} -p no:cacheprovider\n")
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "from work_units import pytest_collection_modifyitems, pytest_xdist_make_scheduler  # noqa: F401\n")
    (tmp_path / "test_shared.py").write_text(SHARED)
    (tmp_path / "test_slurm.py").write_text(ALONE)
    (tmp_path / "test_slurm_cluster.py").write_text(ALONE)
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / name).write_text(ALONE)
    done = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:randomly"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    workers = defaultdict(set)
    for worker, file in re.findall(r"^\[(gw\d)\] .*PASSED (test_\w+\.py)::", done.stdout, re.M):
        workers[file].add(worker)
    assert sum(len(w) for w in workers.values()) >= 5, done.stdout[-3000:]
    assert len(workers["test_shared.py"]) == 1
    assert len(workers["test_slurm.py"] | workers["test_slurm_cluster.py"]) == 1
    assert (tmp_path / "setups").read_text() == "test_shared\n"
