"""The R analysis functions' own tests (testthat), run as part of the one test command: one test per
testthat file, so that the pytest-xdist workers share them. Each worker runs its files in one R
process of its own (loading R's packages took 1.5 s of CPU per file, more than most files' tests)."""
import os
import subprocess

import pytest

from conftest import ROOT

FILES = sorted(p.name for p in (ROOT / "tests" / "testthat").glob("test-*.R"))
END = "== dbsweep testthat file done:"
# Reads testthat file names from stdin, one a line, and runs each in a fresh environment of its own
# (test_file sources the helpers into it), printing END and the outcome after each.
SERVE = r"""
input <- file("stdin")
open(input)
while (length(name <- readLines(input, n = 1)) > 0) {
  outcome <- tryCatch({
    testthat::test_file(file.path("tests", "testthat", name), stop_on_failure = TRUE, reporter = "summary")
    "passed"
  }, error = function(e) paste("failed:", conditionMessage(e)))
  cat("\n", END, " ", outcome, "\n", sep = "")
  flush(stdout())
}
"""


@pytest.fixture(scope="session")
def r_session():
    """This worker's R process; stopped and waited for at the end of the session."""
    proc = subprocess.Popen(["Rscript", "-e", f'END <- "{END}"', "-e", SERVE], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=os.environ | {"R_ENABLE_JIT": "0"})  # small tables: compiling costs more than it saves
    try:
        yield proc
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_testthat_file(proc: subprocess.Popen, name: str) -> tuple[str, str]:
    """(outcome, output) of one testthat file run by the R process."""
    assert proc.poll() is None, f"the R process ended (status {proc.returncode})"
    proc.stdin.write(name + "\n")
    proc.stdin.flush()
    lines = []
    for line in proc.stdout:
        if line.startswith(END):
            return line[len(END):].strip(), "".join(lines)
        lines.append(line)
    raise AssertionError(f"the R process ended (status {proc.wait()}) while running {name}:\n"
                         + "".join(lines)[-4000:])


def test_every_testthat_file_is_found():
    assert len(FILES) >= 10 and "test-statistics.R" in FILES


@pytest.mark.parametrize("name", FILES)
def test_testthat_file_passes(name, r_session):
    outcome, output = run_testthat_file(r_session, name)
    assert outcome == "passed", output[-8000:]
    assert "FAIL" not in output.split("══ DONE")[-1] or "[ FAIL 0" in output
