"""The units of work of the two pytest-xdist workers, and their order (pytest.ini: -n 2 --dist loadscope).

A unit goes to one worker whole. A test file whose tests share a module or session fixture (a server image,
datadirs initialised once, the test Slurm) is one unit, so the fixture is set up once; every user of the one
test Slurm is one unit, so no worker waits for the other's turn on it (conftest.slurm_turn); every other
test is a unit of its own, so that a long file's tests spread over both workers.

xdist's own `--dist loadgroup` reads `xdist_group` marks by appending the group to each node id, which
pytest 9.2 no longer lets it do (pytest-xdist issue #1386): it dealt every test out alone, a file's module
fixtures were set up on both workers, and test_slurm.py's tests on two workers waited up to 110 s for each
other's test Slurm. The scheduler here takes each test's unit from its node id and its file instead.
"""
import re
from functools import cache
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

# Files whose tests are units of their own although they share a session fixture: test_r_analysis.py's R
# process serves one worker's testthat files, and each worker may hold one.
SPREAD = {"test_r_analysis.py"}
SLURM_GROUP = "test-slurm"
# The files and benchmark that use the one test Slurm (conftest.slurm_turn).
SLURM_USERS = {"test_slurm.py", "test_slurm_cluster.py", "test_multihost.py",
               "test_bench.py::test_smoke_mode_runs_and_prints_its_table[slurm]"}
SHARED_FIXTURE = re.compile(r"""@pytest\.fixture\([^)]*scope=["'](module|package|session)["']""")


@cache
def shares_a_fixture(path: Path) -> bool:
    """Whether a test file declares a fixture that lives longer than one test."""
    return bool(SHARED_FIXTURE.search(path.read_text()))


def work_unit(nodeid: str, root: Path) -> str:
    """The unit of a test (by its node id, relative to root): the Slurm group, its file, or itself."""
    path, _, test = nodeid.partition("::")
    name = Path(path).name
    if name in SLURM_USERS or f"{name}::{test}" in SLURM_USERS:
        return SLURM_GROUP
    if name not in SPREAD and (root / path).is_file() and shares_a_fixture(root / path):
        return path
    return nodeid


class WorkUnitScheduling(LoadScopeScheduling):
    """xdist's scope scheduler (a unit at a time to whichever worker has two tests or fewer left, in the
    order of the collection) with the units of work_unit."""

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid, self.config.rootpath)


def pytest_xdist_make_scheduler(config, log):
    """The scheduler of `--dist loadscope`; other modes stay xdist's."""
    if config.getvalue("dist") == "loadscope":
        return WorkUnitScheduling(config, log)
    return None


def estimated_seconds(item) -> float:
    """A rough cost of a test, for the order of work: a workflow test runs snakemake or a server (tens of
    seconds), a testthat file, bench smoke or lint gate runs R, a benchmark or a linter over the tree
    (seconds), the rest take a fraction of a second. Measured costs would be better, but a fresh clone has
    none."""
    if item.get_closest_marker("workflow"):
        return 30
    return 10 if item.path.name in {"test_r_analysis.py", "test_bench.py", "test_lint.py"} else 0.1


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The order of work, among the tests selected (after -m): the costliest units first, so that the many
    quick ones fill the end. A worker takes its next unit when two tests of its own are left, so a long
    test handed out last leaves the other worker idle."""
    def unit(item) -> str:
        return work_unit(item.nodeid, config.rootpath)

    cost = {}
    for item in items:
        cost[unit(item)] = cost.get(unit(item), 0) + estimated_seconds(item)
    items.sort(key=lambda item: (-cost[unit(item)], unit(item)))
