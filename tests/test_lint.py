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


def lintr_parts(count: int = 2) -> list[list[str]]:
    """workflow/R's files in `count` parts of about equal lines, for the pytest-xdist workers to lint side
    by side (lintr took 19 s of CPU on the whole folder: the fast tier's longest test)."""
    parts = [[] for _ in range(count)]
    lines = [0] * count
    files = sorted((ROOT / "workflow" / "R").glob("*.R"), key=lambda p: -len(p.read_text().splitlines()))
    for path in files:
        emptiest = lines.index(min(lines))
        parts[emptiest].append(str(path.relative_to(ROOT)))
        lines[emptiest] += len(path.read_text().splitlines())
    return parts


def test_lintr_parts_hold_every_r_file_once():
    files = [f for part in lintr_parts() for f in part]
    assert sorted(files) == sorted(str(p.relative_to(ROOT)) for p in (ROOT / "workflow" / "R").glob("*.R"))
    assert len(files) >= 20 and all(lintr_parts())


# .lintr's linters but no_tab_linter, the costliest (2.5 of lintr's 10 s of CPU on workflow/R: a regular
# expression per line of each expression, and a lint object per match); test_no_r_file_indents_with_a_tab
# makes its check. lintr::lint still reads .lintr's other settings from the file's folder or a parent.
LINTR = ('linters <- eval(parse(text = read.dcf(".lintr", fields = "linters")[1, 1]), getNamespace("lintr")); '
         "stopifnot(!is.null(linters$no_tab_linter)); linters$no_tab_linter <- NULL; "
         "found <- do.call(c, lapply(commandArgs(TRUE), lintr::lint, linters = linters)); print(found); "
         "quit(status = as.integer(length(found) > 0))")


@pytest.mark.parametrize("part", range(2))
def test_lintr_finds_nothing_in_workflow_r(part):
    done = tool(["Rscript", "-e", LINTR, *lintr_parts()[part]])
    assert done.returncode == 0, f"lintr (.lintr):\n{done.stdout}{done.stderr}"


def lines_indented_with_a_tab(text: str) -> list[int]:
    """The numbers of text's lines whose indentation holds a tab: lintr's no_tab_linter's check (^\\s*\\t),
    made here in a few milliseconds."""
    return [n for n, line in enumerate(text.splitlines(), 1) if re.match(r"\s*\t", line)]


def test_no_r_file_indents_with_a_tab():
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "workflow" / "R").glob("*.R"))
             for n in lines_indented_with_a_tab(path.read_text(encoding="utf-8"))]
    assert not found, "indented with a tab (lintr's no_tab_linter):\n" + "\n".join(found)
    assert lines_indented_with_a_tab('x <- 1\n  \ty <- "\t"\nz <- 2 # \t\n\tw <- 3\n') == [2, 4]
