"""The units of work of the pytest-xdist workers, and their order (pytest.ini: -n 3 --dist loadscope).

A unit goes to one worker whole. A test file whose tests share a module or session fixture (a server image,
datadirs initialised once, the test Slurm) is one unit, so the fixture is set up once; every user of the one
test Slurm is one unit, so no worker waits for the other's turn on it (conftest.slurm_turn); every other
test is a unit of its own, so that a long file's tests spread over the workers.

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


# Seconds of CPU of the fast tier's costliest tests (about each one's wall on an idle core), measured with
# `-n 0` on the 2-core VM (2026-11-28, bench/history/suite.md): a fresh clone has no record of its own, and
# a test of 5 to 20 s estimated as a quick one was dealt out among the quick ones at the end, leaving the
# other worker idle (test_statistics_series.py's module fixture: 20 s). A test renamed here falls back to
# the rough estimate; test_suite_order checks that every name still finds its test.
MEASURED = {
    "test_r_analysis.py::test_testthat_file_passes[test-db-plots.R]": 10,
    "test_r_analysis.py::test_testthat_file_passes[test-plot-labels.R]": 4,
    "test_r_analysis.py::test_testthat_file_passes[test-statistics.R]": 9,
    "test_r_analysis.py::test_testthat_file_passes[test-statistics-chunks.R]": 5,
    "test_r_analysis.py::test_testthat_file_passes[test-plots.R]": 5,
    "test_r_analysis.py::test_testthat_file_passes[test-versions.R]": 5,
    "test_r_analysis.py::test_testthat_file_passes[test-stats.R]": 6,
    "test_r_analysis.py::test_testthat_file_passes[test-db-tables.R]": 5,
    "test_statistics_series.py::test_the_binary_columns_give_the_same_tables_as_the_gzipped_csv[one_rep]": 7,
    "test_statistics_series.py::test_the_binary_columns_give_the_same_tables_as_the_gzipped_csv[three_reps]": 7,
    "test_statistics_series.py::test_the_binary_columns_give_the_same_tables_as_the_gzipped_csv[edges]": 6,
    "test_report.py::test_a_topology_study_s_page_answers_with_each_event_s_recovery_in_its_first_screen": 7,
    "test_report.py::test_every_figure_of_the_tables_and_the_answer_has_a_definition_with_its_unit": 3,
    "test_accounting.py::test_a_reading_never_loses_a_child_reaped_while_it_reads": 6,
    "test_lint.py::test_lintr_finds_nothing_in_workflow_r[0]": 5,
    "test_lint.py::test_lintr_finds_nothing_in_workflow_r[1]": 4,
    "test_lint.py::test_snakemake_lint_reports_only_the_conda_lint": 2,
    "test_bench.py::test_smoke_mode_runs_and_prints_its_table[analysis]": 5,
    "test_multihost_placement.py::test_the_dry_run_shows_each_nodes_host_and_a_local_run_refuses_before_any_job": 5,
    "test_multihost_placement.py::test_a_placed_cell_with_a_proxy_is_planned_with_the_proxy_beside_the_client": 2,
    "test_catalog.py::test_compare_command_writes_table_and_plot_and_lists_cells_of_one_side": 3,
    "test_catalog.py::test_compare_with_one_repetition_follows_stats_r_block_bootstrap": 2,
    "test_catalog.py::test_compare_gives_the_ratio_and_ci_of_stats_r_on_the_same_data": 2,
    "test_explore.py::test_bench_smoke_draws_the_page_offline_in_chromium": 2,
}


def estimated_seconds(item) -> float:
    """A test's cost, for the order of work: its measured seconds (MEASURED), else a rough one: a workflow
    test runs snakemake or a server (tens of seconds), a testthat file, bench smoke or lint gate runs R, a
    benchmark or a linter over the tree (seconds), the rest take about 0.01 s each."""
    measured = MEASURED.get(item.nodeid.removeprefix("tests/"))
    if measured is not None:
        return measured
    if item.get_closest_marker("workflow"):
        return 30
    return 2 if item.path.name in {"test_r_analysis.py", "test_bench.py", "test_lint.py"} else 0.02


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
