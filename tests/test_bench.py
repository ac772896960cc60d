"""Every benchmark in bench/ still runs: its --smoke mode (tiny sizes, one repeat) ends with its table.

Parametrized over the files in bench/, so a new benchmark without a smoke mode fails here. Only
scripts listed in FAST run in the fast tier; every other one runs snakemake, servers or mounts and is
marked `workflow` (a new script is, until it is listed in FAST).
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
HELPERS = {"common.py"}  # imported by the benchmarks, not one itself
FAST = {"analysis.py"}  # R on a synthetic table only: no snakemake, server or mount
TIMEOUT_S = 900


def scripts() -> list:
    return [pytest.param(path.name, marks=() if path.name in FAST else pytest.mark.workflow, id=path.stem)
            for path in sorted(BENCH.glob("*.py")) if path.name not in HELPERS]


def test_every_benchmark_is_found():
    names = {p.values[0] for p in scripts()}
    assert {"planning.py", "noop.py", "slurm.py"} <= names


@pytest.mark.parametrize("script", scripts())
def test_smoke_mode_runs_and_prints_its_table(script):
    done = subprocess.run([sys.executable, str(BENCH / script), "--smoke"], capture_output=True, text=True,
                          cwd=ROOT, timeout=TIMEOUT_S, env=os.environ | {"LC_ALL": "C.UTF-8"})
    assert done.returncode == 0, f"{script} --smoke exited with {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    table = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert len(table) >= 3, f"{script} --smoke printed no table:\n{done.stdout[-3000:]}"
