"""The R analysis functions' own tests (testthat), run as part of the one test command: one test per
testthat file, so that the two pytest-xdist workers share them."""
import os
import subprocess

import pytest

from conftest import ROOT

FILES = sorted(p.name for p in (ROOT / "tests" / "testthat").glob("test-*.R"))


def test_every_testthat_file_is_found():
    assert len(FILES) >= 10 and "test-statistics.R" in FILES


@pytest.mark.parametrize("name", FILES)
def test_testthat_file_passes(name):
    done = subprocess.run(
        ["Rscript", "-e",
         f'testthat::test_file("tests/testthat/{name}", stop_on_failure = TRUE, reporter = "summary")'],
        cwd=ROOT, capture_output=True, text=True,
        env=os.environ | {"R_ENABLE_JIT": "0"})  # small tables: compiling each function costs more than it saves
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "FAIL" not in done.stdout.split("══ DONE")[-1] or "[ FAIL 0" in done.stdout
