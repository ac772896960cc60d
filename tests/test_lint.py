"""The lint gates of the fast tier: ruff (ruff.toml), snakefmt (pyproject.toml), `snakemake --lint` and lintr
(.lintr) find nothing in the checkout.

Each runs the real tool, from the venv (workflow/envs/python.txt) or Debian's packages (debian.txt), and lists
what it found. A missing tool fails the test rather than skipping it: the set-up installs them all, so a gate
that skipped would let findings in unseen. `snakemake --lint` loads the workflow and the default study into a
temporary folder; it runs no job."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
# The one lint snakemake may report, and why (the comment at the top of workflow/Snakefile).
CONDA_LINT = "Specify a conda environment or container for each rule."
LINT_TITLE = re.compile(r"^Lints for (.+):$|^    \* (.+?):$", re.M)


def tool(argv: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """argv's run, its output as text; a test failure naming the program when it is not installed."""
    try:
        return subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        pytest.fail(f"{argv[0]} is not installed (workflow/envs/install.sh installs it)")


def test_ruff_finds_nothing():
    done = tool([VENV_BIN / "ruff", "check", "--no-cache", "--output-format", "concise",
                 "workflow", "bench", "tests"])
    assert done.returncode == 0, f"ruff (ruff.toml):\n{done.stdout}{done.stderr}"


def test_snakefmt_leaves_the_snakefile_and_rules_as_they_are():
    done = tool([VENV_BIN / "snakefmt", "--check", "--diff", "workflow/"])
    assert done.returncode == 0, f"snakefmt would change (run `snakefmt workflow/`):\n{done.stdout}{done.stderr}"


def lints(output: str) -> list[tuple[str, str]]:
    """(where, title) of each lint in `snakemake --lint`'s text output."""
    found, where = [], None
    for match in LINT_TITLE.finditer(output):
        if match[1]:
            where = match[1]
        else:
            found.append((where, match[2]))
    return found


def test_snakemake_lint_reports_only_the_conda_lint(tmp_path):
    done = tool([VENV_BIN / "snakemake", "-s", ROOT / "workflow" / "Snakefile", "-d", tmp_path,
                 "--configfile", ROOT / "config" / "config.yaml", "--lint"])
    found = lints(done.stdout + done.stderr)
    # the conda lint, once per rule, shows that the linter ran through the rules
    assert any(title == CONDA_LINT for _, title in found), f"snakemake --lint did not lint:\n{done.stderr}"
    others = [f"{where}: {title}" for where, title in found if title != CONDA_LINT]
    assert not others, "snakemake --lint:\n" + "\n".join(others)


def test_lintr_finds_nothing_in_workflow_r():
    code = 'found <- lintr::lint_dir("workflow/R"); print(found); quit(status = as.integer(length(found) > 0))'
    done = tool(["Rscript", "-e", code])
    assert done.returncode == 0, f"lintr (.lintr):\n{done.stdout}{done.stderr}"
