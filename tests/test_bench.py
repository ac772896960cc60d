"""Every benchmark in bench/ still runs: its --smoke mode (tiny sizes, one repeat) ends with its table.

Parametrized over the files in bench/, so a new benchmark without a smoke mode fails here. Only
scripts listed in FAST run in the fast tier; every other one runs snakemake, servers or mounts and is
marked `workflow` (a new script is, until it is listed in FAST).
"""
import os
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest

from conftest import slurm_turn

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
HELPERS = {"common.py"}  # imported by the benchmarks, not one itself
FAST = {"analysis.py"}  # R on a synthetic table only: no snakemake, server or mount
# Benchmarks whose smoke mode a test file of its own runs, and checks more of than the table
OWN_TEST = {"monitor_cost.py": "test_bench_monitor_cost.py", "restore.py": "test_bench_restore.py",
            "explore.py": "test_explore.py", "catalog.py": "test_catalog.py"}
TIMEOUT_S = 900


def scripts() -> list:
    return [pytest.param(path.name, marks=marks(path.name), id=path.stem)
            for path in sorted(BENCH.glob("*.py")) if path.name not in HELPERS | set(OWN_TEST)]


@pytest.mark.parametrize("script, test_file", sorted(OWN_TEST.items()))
def test_a_benchmark_left_out_here_has_its_smoke_run_by_its_own_test(script, test_file):
    text = (Path(__file__).parent / test_file).read_text()
    assert (BENCH / script).exists() and f'{script}"' in text and '"--smoke"' in text, (script, test_file)


def marks(script: str) -> tuple:
    """A fast script's smoke runs in the fast tier."""
    return () if script in FAST else (pytest.mark.workflow,)


def test_every_benchmark_is_found():
    names = {p.values[0] for p in scripts()}
    assert {"planning.py", "noop.py", "slurm.py", "proxy_overhead.py", "provisioning.py", "link_delay.py",
            "phase_efficiency.py"} <= names


@pytest.mark.parametrize("script", scripts())
def test_smoke_mode_runs_and_prints_its_table(script):
    with slurm_turn() if script == "slurm.py" else nullcontext():  # the test Slurm, shared with test_slurm.py
        done = subprocess.run([sys.executable, str(BENCH / script), "--smoke"], capture_output=True, text=True,
                              cwd=ROOT, timeout=TIMEOUT_S, env=os.environ | {"LC_ALL": "C.UTF-8"})
    assert done.returncode == 0, \
        f"{script} --smoke exited with {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    table = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert len(table) >= 3, f"{script} --smoke printed no table:\n{done.stdout[-3000:]}"


def test_bare_snakefile_has_the_dry_runs_rules_as_patterns():
    """bench/planning.py derives its bare Snakefile from a dry run of the workflow (a real one of a 4-cell
    study, captured): every planned rule, rule all first, cell paths and repetitions as wildcards."""
    sys.path.insert(0, str(BENCH))
    import planning
    text = (ROOT / "tests" / "fixtures" / "planning_dry_run.txt").read_text()
    cells = [f"filesystem~tmpfs/threads~{t}/workload~fio-rr/user~{u}" for t in (1, 2) for u in "ab"]
    snakefile, scripts = planning.bare_snakefile(text, cells)
    rules = [line.split()[1].rstrip(":") for line in snakefile.splitlines() if line.startswith("rule ")]
    assert rules[0] == "all"
    assert set(rules) == set(planning.job_counts(text)) == {"all", "run", "collect", "aggregate", "statistics",
                                                             "figures", "tables", "plots", "summary"}
    assert sorted(scripts) == sorted(f"scripts/{rule}.py" for rule in rules if rule != "all")
    run_rule = snakefile.split("rule run:")[1].split("\nrule ")[0]
    assert "'results/runs/{cell}/rep~{rep}/run.json'," in run_rule
    assert "'results/logs/run/{cell}/rep~{rep}.log'," in run_rule
    assert "measure=1," in run_rule and "priority: 1" in run_rule
    assert "expand('results/runs/{cell}/rep~{rep}/samples.csv', cell=CELLS, rep=REPS)," in snakefile
    assert "workload~fio-rr" not in snakefile  # no cell path left in
